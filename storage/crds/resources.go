package crds

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"

	"github.com/kgate/kgate/storage/registry"
)

// Established reports whether crd's Established condition is True: only
// then are its custom resources served, as kube-apiserver serves them.
func Established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// StorageVersion returns the name of crd's storage version, or "".
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// Resources returns the resources crd serves, one per served version, the
// storage version first: names from its accepted names, objects under
// kube-apiserver's key for custom resources (/registry/<group>/<plural>),
// those of the other versions stored as the storage version's kind. None
// when crd is not established.
func Resources(crd *apiextensionsv1.CustomResourceDefinition) []registry.Resource {
	names := crd.Status.AcceptedNames
	storage := StorageVersion(crd)
	if !Established(crd) || names.Plural == "" || names.Kind == "" || storage == "" {
		return nil
	}
	prefix := "/registry/" + crd.Spec.Group + "/" + names.Plural
	var out []registry.Resource
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		res := registry.Resource{
			Group:      crd.Spec.Group,
			Version:    v.Name,
			Resource:   names.Plural,
			Kind:       names.Kind,
			Singular:   names.Singular,
			Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			ShortNames: names.ShortNames,
			Categories: names.Categories,
			Prefix:     prefix,
			CRD:        crd,
		}
		if sub := v.Subresources; sub != nil {
			if sub.Status != nil {
				res.Subresources = append(res.Subresources, "status")
			}
			if sub.Scale != nil {
				res.Subresources = append(res.Subresources, "scale")
			}
		}
		if v.Name != storage {
			res.StorageKind = res.GVK()
			res.StorageKind.Version = storage
		}
		if len(v.SelectableFields) > 0 {
			res.FieldSelectors, res.Fields = selectableFields(v.SelectableFields)
		}
		if v.Name == storage {
			out = append([]registry.Resource{res}, out...)
		} else {
			out = append(out, res)
		}
	}
	return out
}

// selectableFields returns the field names of a version's selectableFields
// and their values in an object, as upstream's custom resource strategy
// computes them (apiextensions-apiserver pkg/registry/customresource,
// selectableFields: the JSONPath's first result printed with fmt.Sprint,
// "" when missing). That package links apiserver's generic registry,
// which the cache node must not, hence this twin.
func selectableFields(sfs []apiextensionsv1.SelectableField) ([]string, func(runtime.Object) fields.Set) {
	type path struct {
		name string
		jp   *jsonpath.JSONPath
	}
	var names []string
	var paths []path
	for _, sf := range sfs {
		name := strings.TrimPrefix(sf.JSONPath, ".")
		jp := jsonpath.New("selectableField")
		jp.AllowMissingKeys(true)
		if err := jp.Parse("{" + sf.JSONPath + "}"); err != nil {
			continue // the CRD's validation refuses such paths
		}
		names = append(names, name)
		paths = append(paths, path{name, jp})
	}
	return names, func(obj runtime.Object) fields.Set {
		u, ok := obj.(runtime.Unstructured)
		if !ok {
			return nil
		}
		content := u.UnstructuredContent()
		set := make(fields.Set, len(paths)+2)
		for _, p := range paths {
			set[p.name] = ""
			results, err := p.jp.FindResults(content)
			if err != nil || len(results) != 1 || len(results[0]) != 1 {
				continue
			}
			if v := results[0][0].Interface(); v != nil {
				set[p.name] = fmt.Sprint(v)
			}
		}
		return set
	}
}
