package review

import (
	"context"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authz"
)

// selfSubjectAccessReview asks the gateway's authorizer about the
// requester (kubectl auth can-i).
func (h *Handler) selfSubjectAccessReview(_ context.Context, c *call, obj runtime.Object) (runtime.Object, error) {
	r := obj.(*authorizationv1.SelfSubjectAccessReview)
	errs := validateAttributes(r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes, field.NewPath("spec"))
	if len(errs) > 0 {
		return nil, apierror.Invalid(kind(r), "", errs)
	}
	r.Status = h.decide(c.user, r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes)
	return r, nil
}

// subjectAccessReview asks about the user the review names.
func (h *Handler) subjectAccessReview(_ context.Context, _ *call, obj runtime.Object) (runtime.Object, error) {
	r := obj.(*authorizationv1.SubjectAccessReview)
	errs := validateSubject(&r.ObjectMeta, &r.Spec, false)
	if len(errs) > 0 {
		return nil, apierror.Invalid(kind(r), "", errs)
	}
	r.Status = h.decide(subject(&r.Spec), r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes)
	return r, nil
}

// localSubjectAccessReview is a SubjectAccessReview confined to the
// namespace of its URL.
func (h *Handler) localSubjectAccessReview(_ context.Context, c *call, obj runtime.Object) (runtime.Object, error) {
	r := obj.(*authorizationv1.LocalSubjectAccessReview)
	ns := c.info.Namespace
	if ns == "" {
		return nil, apierror.BadRequest("namespace is required on this type: ")
	}
	if r.Namespace == "" {
		r.Namespace = ns
	}
	if r.Namespace != ns {
		return nil, apierror.BadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	errs := validateSubject(&r.ObjectMeta, &r.Spec, true)
	if a := r.Spec.ResourceAttributes; a != nil && a.Namespace != r.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), a.Namespace, "must match metadata.namespace"))
	}
	if r.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), r.Spec.NonResourceAttributes, "disallowed on this kind of request"))
	}
	if len(errs) > 0 {
		return nil, apierror.Invalid(kind(r), "", errs)
	}
	r.Status = h.decide(subject(&r.Spec), r.Spec.ResourceAttributes, nil)
	return r, nil
}

func kind(obj runtime.Object) schema.GroupKind {
	switch obj.(type) {
	case *authorizationv1.SubjectAccessReview:
		return authzV1.WithKind("SubjectAccessReview").GroupKind()
	case *authorizationv1.LocalSubjectAccessReview:
		return authzV1.WithKind("LocalSubjectAccessReview").GroupKind()
	}
	return authzV1.WithKind("SelfSubjectAccessReview").GroupKind()
}

// validateAttributes is upstream's check that exactly one kind of
// attributes is given.
func validateAttributes(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case ra != nil && nra != nil:
		errs = append(errs, field.Invalid(spec.Child("nonResourceAttributes"), nra, "cannot be specified in combination with resourceAttributes"))
	case ra == nil && nra == nil:
		errs = append(errs, field.Invalid(spec.Child("resourceAttributes"), nra, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	return errs
}

// validateSubject is upstream's ValidateSubjectAccessReview: empty
// metadata (but for a local review's namespace), a user or a group.
func validateSubject(m *metav1.ObjectMeta, spec *authorizationv1.SubjectAccessReviewSpec, local bool) field.ErrorList {
	meta := *m
	if local {
		meta.Namespace = ""
	}
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(metav1.ObjectMeta{}, meta) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), meta, "must be empty"))
	}
	errs = append(errs, validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes, field.NewPath("spec"))...)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

// subject is the user a SubjectAccessReview names.
func subject(spec *authorizationv1.SubjectAccessReviewSpec) user.Info {
	u := &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		u.Extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	return u
}

// decide asks the authorizer, as upstream's access reviews do.
func (h *Handler) decide(u user.Info, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	a := authz.Attributes{User: u}
	if ra != nil {
		a.IsResourceRequest = true
		a.Verb, a.Namespace, a.APIGroup, a.Resource, a.Subresource, a.Name = ra.Verb, ra.Namespace, ra.Group, ra.Resource, ra.Subresource, ra.Name
		a.APIVersion = ra.Version
		a.FieldSelector, a.LabelSelector = rawFieldSelector(ra.FieldSelector), rawLabelSelector(ra.LabelSelector)
	} else {
		a.Verb, a.Path = nra.Verb, nra.Path
	}
	d, reason, err := authz.Evaluate(h.cfg.Authorizer, a)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authz.Allow, Denied: d == authz.Deny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

// rawFieldSelector is a review's field selector as a query string would
// carry it, for the authorizers that look at selectors (the webhook):
// the raw selector, or the requirements (In and NotIn with one value)
// written out.
func rawFieldSelector(fs *authorizationv1.FieldSelectorAttributes) string {
	if fs == nil {
		return ""
	}
	if fs.RawSelector != "" {
		return fs.RawSelector
	}
	var terms []string
	for _, r := range fs.Requirements {
		if len(r.Values) != 1 {
			continue
		}
		switch r.Operator {
		case metav1.FieldSelectorOpIn:
			terms = append(terms, fields.OneTermEqualSelector(r.Key, r.Values[0]).String())
		case metav1.FieldSelectorOpNotIn:
			terms = append(terms, fields.OneTermNotEqualSelector(r.Key, r.Values[0]).String())
		}
	}
	return strings.Join(terms, ",")
}

// rawLabelSelector is rawFieldSelector for labels.
func rawLabelSelector(ls *authorizationv1.LabelSelectorAttributes) string {
	if ls == nil {
		return ""
	}
	if ls.RawSelector != "" || len(ls.Requirements) == 0 {
		return ls.RawSelector
	}
	sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: ls.Requirements})
	if err != nil {
		return ""
	}
	return sel.String()
}
