package builtin

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// Delete decides what a delete with opts does to obj, the current state
// of an object of res in its served version (a copy it may modify), as
// kube-apiserver's registry does: rest.BeforeDelete with the resource's
// strategy (preconditions, the strategy's CheckGracefulDelete, a pending
// graceful deletion only shortened, the generation bump), then the
// garbage collector's finalizers from the options, the object's
// finalizers and the strategy's DefaultGarbageCollectionPolicy, and
// markAsDeleting for an object with finalizers that is not deleted
// gracefully. Namespaces follow their own REST's Delete (termination
// first; removed once spec.finalizers is empty), CRDs theirs (deleteCRD). Resources with no
// upstream strategy (added at run time) follow the registry's rules with
// no graceful deletion and no default policy. opts is not modified.
//
// It returns the object and what storage must do with it: the new state
// with DeleteUpdate, obj with DeleteKeep and DeleteRemove. Conflicting
// preconditions are upstream's 409 Conflict.
func (s *Semantics) Delete(ctx context.Context, res *registry.Resource, obj runtime.Object, opts *metav1.DeleteOptions) (runtime.Object, storage.DeleteAction, error) {
	opts = opts.DeepCopy()
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		return deleteNamespace(ns, opts)
	}
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		return deleteCRD(crd, opts)
	}
	var (
		strat    rest.RESTDeleteStrategy = kindTyper{}
		internal                         = obj
	)
	st, known := s.strategies[res.GVR().GroupResource()]
	if known {
		strat = st.main
		// As kube-apiserver's storage decodes it: defaulted, internal.
		s.scheme.Default(obj)
		var err error
		if internal, err = s.toInternal(res, obj); err != nil {
			return nil, 0, err
		}
	}
	m, err := meta.Accessor(internal)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot delete %s: %w", res.Resource, err)
	}
	ctx, err = requestContext(ctx, res, "", "delete", internal)
	if err != nil {
		return nil, 0, err
	}
	graceful, pending, err := rest.BeforeDelete(strat, ctx, internal, opts)
	if err != nil {
		return nil, 0, err
	}
	if pending {
		return obj, storage.DeleteKeep, nil
	}
	if changed, finalizers := gcFinalizers(ctx, strat, m, opts); changed {
		m.SetFinalizers(finalizers)
	}
	hasFinalizers := len(m.GetFinalizers()) > 0
	switch {
	case !graceful && !hasFinalizers:
		return obj, storage.DeleteRemove, nil
	case !graceful:
		markAsDeleting(m, time.Now())
	case !hasFinalizers && *opts.GracePeriodSeconds == 0:
		// A graceful delete with no grace left and nothing to wait for.
		return obj, storage.DeleteRemove, nil
	}
	if !known {
		return internal, storage.DeleteUpdate, nil
	}
	out, err := s.toVersioned(res, internal)
	if err != nil {
		return nil, 0, err
	}
	return out, storage.DeleteUpdate, nil
}

// ReturnsDeletedObject reports whether kube-apiserver answers a delete of
// res that removed the object with the object itself (its registry
// store's ReturnDeletedObject) rather than a Success Status.
func (s *Semantics) ReturnsDeletedObject(res *registry.Resource) bool {
	return returnDeletedObject[res.GVR().GroupResource()]
}

// returnDeletedObject lists the served resources whose upstream registry
// store sets ReturnDeletedObject (pkg/registry/<group>/<resource>/storage;
// TestReturnDeletedObjectMatchesUpstream reads them there).
var returnDeletedObject = map[schema.GroupResource]bool{
	{Resource: "namespaces"}:                                       true,
	{Resource: "persistentvolumeclaims"}:                           true,
	{Resource: "persistentvolumes"}:                                true,
	{Resource: "pods"}:                                             true,
	{Resource: "podtemplates"}:                                     true,
	{Resource: "resourcequotas"}:                                   true,
	{Resource: "serviceaccounts"}:                                  true,
	{Resource: "services"}:                                         true,
	{Group: "storage.k8s.io", Resource: "storageclasses"}:          true,
	{Group: "resource.k8s.io", Resource: "deviceclasses"}:          true,
	{Group: "resource.k8s.io", Resource: "resourceclaims"}:         true,
	{Group: "resource.k8s.io", Resource: "resourceclaimtemplates"}: true,
	{Group: "resource.k8s.io", Resource: "resourceslices"}:         true,
	{Group: "storage.k8s.io", Resource: "csidrivers"}:              true,
	{Group: "storage.k8s.io", Resource: "csinodes"}:                true,
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:       true,
	{Group: "storage.k8s.io", Resource: "volumeattributesclasses"}: true,
}

// gcFinalizers is the registry store's deletionFinalizersForGarbageCollection
// (garbage collection enabled, as in kube-apiserver): the orphan and
// foreground finalizers as the options, then the object's finalizers,
// then the strategy's default policy ask. It reports whether they change.
func gcFinalizers(ctx context.Context, strat rest.RESTDeleteStrategy, m metav1.Object, opts *metav1.DeleteOptions) (bool, []string) {
	var policy rest.GarbageCollectionPolicy
	if gc, ok := strat.(rest.GarbageCollectionDeleteStrategy); ok {
		policy = gc.DefaultGarbageCollectionPolicy(ctx)
	}
	if policy == rest.Unsupported {
		return false, m.GetFinalizers()
	}
	orphan := shouldOrphan(policy, m, opts)
	foreground := shouldForeground(m, opts)
	next := []string{}
	for _, f := range m.GetFinalizers() {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			next = append(next, f)
		}
	}
	if orphan {
		next = append(next, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		next = append(next, metav1.FinalizerDeleteDependents)
	}
	if sameSet(m.GetFinalizers(), next) {
		return false, m.GetFinalizers()
	}
	return true, next
}

func shouldOrphan(policy rest.GarbageCollectionPolicy, m metav1.Object, opts *metav1.DeleteOptions) bool {
	//nolint:staticcheck // upstream still honours the deprecated option
	if opts.OrphanDependents != nil {
		return *opts.OrphanDependents
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationOrphan:
			return true
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
			return false
		}
	}
	for _, f := range m.GetFinalizers() {
		switch f {
		case metav1.FinalizerOrphanDependents:
			return true
		case metav1.FinalizerDeleteDependents:
			return false
		}
	}
	return policy == rest.OrphanDependents
}

func shouldForeground(m metav1.Object, opts *metav1.DeleteOptions) bool {
	//nolint:staticcheck // upstream still honours the deprecated option
	if opts.OrphanDependents != nil {
		return false
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationForeground:
			return true
		case metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan:
			return false
		}
	}
	for _, f := range m.GetFinalizers() {
		switch f {
		case metav1.FinalizerDeleteDependents:
			return true
		case metav1.FinalizerOrphanDependents:
			return false
		}
	}
	return false
}

// markAsDeleting is the registry store's: deletionGracePeriodSeconds 0,
// deletionTimestamp now unless an earlier one is set, and the generation
// bumped on the first deletion.
func markAsDeleting(m metav1.Object, now time.Time) {
	if m.GetDeletionTimestamp() == nil && m.GetGeneration() > 0 {
		m.SetGeneration(m.GetGeneration() + 1)
	}
	if dt := m.GetDeletionTimestamp(); dt == nil || dt.After(now) {
		t := metav1.NewTime(now)
		m.SetDeletionTimestamp(&t)
	}
	zero := int64(0)
	m.SetDeletionGracePeriodSeconds(&zero)
}

// deleteNamespace is the namespace REST's Delete: the uid and
// resourceVersion preconditions, then on the first delete the deletion
// timestamp, phase Terminating and the garbage collector's finalizers as
// the options ask (the namespace controller empties spec.finalizers and
// deletes again); once deleting, it stays until spec.finalizers is empty,
// then the registry store's delete (no graceful deletion, no default
// policy).
func deleteNamespace(ns *corev1.Namespace, opts *metav1.DeleteOptions) (runtime.Object, storage.DeleteAction, error) {
	gr := schema.GroupResource{Resource: "namespaces"}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != ns.UID {
			return nil, 0, apierror.Conflict(gr, ns.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, ns.UID))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != ns.ResourceVersion {
			return nil, 0, apierror.Conflict(gr, ns.Name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, ns.ResourceVersion))
		}
	}
	if ns.DeletionTimestamp.IsZero() {
		now := metav1.Now()
		ns.DeletionTimestamp = &now
		ns.Status.Phase = corev1.NamespaceTerminating
		has := func(f string) bool { return slices.Contains(ns.Finalizers, f) }
		want := map[string]bool{
			metav1.FinalizerOrphanDependents: namespaceOrphan(opts, has(metav1.FinalizerOrphanDependents)),
			metav1.FinalizerDeleteDependents: namespaceForeground(opts, has(metav1.FinalizerDeleteDependents)),
		}
		changed := false
		next := []string{}
		for _, f := range ns.Finalizers {
			if keep, managed := want[f]; !managed || keep {
				next = append(next, f)
			} else {
				changed = true
			}
		}
		for _, f := range []string{metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents} {
			if want[f] && !has(f) {
				next = append(next, f)
				changed = true
			}
		}
		if changed {
			ns.Finalizers = next
		}
		return ns, storage.DeleteUpdate, nil
	}
	if len(ns.Spec.Finalizers) != 0 {
		return ns, storage.DeleteKeep, nil
	}
	m := metav1.Object(ns)
	if changed, finalizers := gcFinalizers(context.Background(), kindTyper{}, m, opts); changed {
		m.SetFinalizers(finalizers)
	}
	if len(m.GetFinalizers()) == 0 {
		return ns, storage.DeleteRemove, nil
	}
	markAsDeleting(m, time.Now())
	return ns, storage.DeleteUpdate, nil
}

// namespaceOrphan and namespaceForeground are the namespace REST's
// shouldHaveOrphanFinalizer and shouldHaveDeleteDependentsFinalizer.
func namespaceOrphan(opts *metav1.DeleteOptions, has bool) bool {
	//nolint:staticcheck // upstream still honours the deprecated option
	if opts.OrphanDependents != nil {
		return *opts.OrphanDependents
	}
	if opts.PropagationPolicy != nil {
		return *opts.PropagationPolicy == metav1.DeletePropagationOrphan
	}
	return has
}

func namespaceForeground(opts *metav1.DeleteOptions, has bool) bool {
	//nolint:staticcheck // upstream still honours the deprecated option
	if opts.OrphanDependents != nil {
		return !*opts.OrphanDependents
	}
	if opts.PropagationPolicy != nil {
		return *opts.PropagationPolicy == metav1.DeletePropagationForeground
	}
	return has
}

func sameSet(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

// kindTyper is the object typer of resources with no upstream strategy:
// an object's kind is what it says.
type kindTyper struct{}

func (kindTyper) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		return nil, false, fmt.Errorf("cannot delete an object of %T without a kind", obj)
	}
	return []schema.GroupVersionKind{gvk}, false, nil
}

func (kindTyper) Recognizes(schema.GroupVersionKind) bool { return true }
