package crdcontroller

import (
	"fmt"
	"reflect"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/util/webhook"
)

// The rules of apiextensions-apiserver's naming, establishing and
// finalizer controllers (pkg/controller/{status,establish,finalizer}),
// whose sync functions read an informer's lister and write through a
// clientset; here they run on plain objects, over the list of every CRD
// the controller read. Reasons and messages are upstream's.

// groupNames are the names the CRDs of one group have been given
// (status.acceptedNames): resources (plural, singular, short names) and
// kinds (kind, list kind), as upstream's getAcceptedNamesForGroup.
func groupNames(crds []*apiextensionsv1.CustomResourceDefinition, group string) (resources, kinds sets.Set[string]) {
	resources, kinds = sets.New[string](), sets.New[string]()
	for _, c := range crds {
		if c.Spec.Group != group {
			continue
		}
		n := c.Status.AcceptedNames
		resources.Insert(n.Plural, n.Singular)
		resources.Insert(n.ShortNames...)
		kinds.Insert(n.Kind, n.ListKind)
	}
	return resources, kinds
}

// namesAndConditions is upstream's calculateNamesAndConditions: the names
// in crd's spec it may have (each one it already has, or one no other CRD
// of the group has), the NamesAccepted condition, and the Established
// condition to set with it.
func namesAndConditions(in *apiextensionsv1.CustomResourceDefinition, all []*apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition, apiextensionsv1.CustomResourceDefinitionCondition) {
	allResources, allKinds := groupNames(all, in.Spec.Group)
	accepted := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionUnknown}
	conflict := func(reason string, err error) {
		accepted.Status = apiextensionsv1.ConditionFalse
		accepted.Reason = reason
		accepted.Message = err.Error()
	}
	requested := in.Spec.Names
	had := in.Status.AcceptedNames
	names := in.Status.AcceptedNames

	if err := equalToAcceptedOrFresh(requested.Plural, had.Plural, allResources); err != nil {
		conflict("PluralConflict", err)
	} else {
		names.Plural = requested.Plural
	}
	if err := equalToAcceptedOrFresh(requested.Singular, had.Singular, allResources); err != nil {
		conflict("SingularConflict", err)
	} else {
		names.Singular = requested.Singular
	}
	if !reflect.DeepEqual(requested.ShortNames, had.ShortNames) {
		var errs []error
		mine := sets.New(had.ShortNames...)
		for _, s := range requested.ShortNames {
			if mine.Has(s) {
				continue
			}
			if err := equalToAcceptedOrFresh(s, "", allResources); err != nil {
				errs = append(errs, err)
			}
		}
		if err := utilerrors.NewAggregate(errs); err != nil {
			conflict("ShortNamesConflict", err)
		} else {
			names.ShortNames = requested.ShortNames
		}
	}
	if err := equalToAcceptedOrFresh(requested.Kind, had.Kind, allKinds); err != nil {
		conflict("KindConflict", err)
	} else {
		names.Kind = requested.Kind
	}
	if err := equalToAcceptedOrFresh(requested.ListKind, had.ListKind, allKinds); err != nil {
		conflict("ListKindConflict", err)
	} else {
		names.ListKind = requested.ListKind
	}
	names.Categories = requested.Categories

	if accepted.Status == apiextensionsv1.ConditionUnknown {
		accepted.Status = apiextensionsv1.ConditionTrue
		accepted.Reason = "NoConflicts"
		accepted.Message = "no conflicts found"
	}

	established := apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
		Reason: "NotAccepted", Message: "not all names are accepted",
	}
	if old := apiextensionshelpers.FindCRDCondition(in, apiextensionsv1.Established); old != nil {
		established = *old
	}
	if established.Status != apiextensionsv1.ConditionTrue && accepted.Status == apiextensionsv1.ConditionTrue {
		established = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
			Reason: "Installing", Message: "the initial names have been accepted",
		}
	}
	return names, accepted, established
}

func equalToAcceptedOrFresh(requested, accepted string, used sets.Set[string]) error {
	if requested == accepted || !used.Has(requested) {
		return nil
	}
	return fmt.Errorf("%q is already in use", requested)
}

// name applies the naming controller's sync to crd, a copy it may change,
// and reports whether it changed.
func name(crd *apiextensionsv1.CustomResourceDefinition, all []*apiextensionsv1.CustomResourceDefinition) bool {
	if equality.Semantic.DeepEqual(crd.Spec.Names, crd.Status.AcceptedNames) {
		return false
	}
	names, accepted, established := namesAndConditions(crd, all)
	if reflect.DeepEqual(crd.Status.AcceptedNames, names) &&
		apiextensionshelpers.IsCRDConditionEquivalent(&accepted, apiextensionshelpers.FindCRDCondition(crd, apiextensionsv1.NamesAccepted)) {
		return false
	}
	crd.Status.AcceptedNames = names
	apiextensionshelpers.SetCRDCondition(crd, accepted)
	apiextensionshelpers.SetCRDCondition(crd, established)
	return true
}

// establish applies the establishing controller's sync to crd and reports
// whether it changed: Established once the names are accepted, unless the
// conversion webhook's caBundle is invalid.
func establish(crd *apiextensionsv1.CustomResourceDefinition) bool {
	if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) ||
		apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		return false
	}
	cond := apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
		Reason: "InitialNamesAccepted", Message: "the initial names have been accepted",
	}
	if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil &&
		len(webhook.ValidateCABundle(field.NewPath(""), c.Webhook.ClientConfig.CABundle)) > 0 {
		cond = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
			Reason: "InvalidCABundle", Message: "The conversion webhook CABundle is invalid",
		}
	}
	if apiextensionshelpers.IsCRDConditionEquivalent(&cond, apiextensionshelpers.FindCRDCondition(crd, apiextensionsv1.Established)) {
		return false
	}
	apiextensionshelpers.SetCRDCondition(crd, cond)
	return true
}

// storedVersion adds the storage version to status.storedVersions, as the
// strategy does on each write, and reports whether it changed.
func storedVersion(crd *apiextensionsv1.CustomResourceDefinition) bool {
	v, err := apiextensionshelpers.GetCRDStorageVersion(crd)
	if err != nil || apiextensionshelpers.IsStoredVersion(crd, v) {
		return false
	}
	crd.Status.StoredVersions = append(crd.Status.StoredVersions, v)
	return true
}
