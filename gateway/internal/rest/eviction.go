package rest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// The eviction subresource follows upstream's EvictionREST
// (k8s.io/kubernetes/pkg/registry/core/pod/storage/eviction.go), whose
// steps are unexported there: kgate's storage stands where the pod store
// and the PodDisruptionBudget client stand.

var evictionGVK = policyv1.SchemeGroupVersion.WithKind("Eviction")

const (
	// maxDisruptedPodSize is upstream's MaxDisruptedPodSize: past it a
	// budget's status.disruptedPods refuses more evictions. (Its package,
	// the pod store, builds on the generic registry Store kgate does not
	// link.)
	maxDisruptedPodSize = 2000

	evictionBudgetMessage = "Cannot evict pod as it would violate the pod's disruption budget."
	multiplePDBsMessage   = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)

// evict answers a create of pods/eviction: the pod is deleted (with the
// Eviction's DeleteOptions) if no PodDisruptionBudget forbids it, and the
// budget that allows it is charged: status.disruptionsAllowed decremented
// and the pod recorded in status.disruptedPods, by compare-and-swap.
func (h *Handler) evict(ctx context.Context, r *request) error {
	sent, err := h.decodeBody(r, "CreateOptions", evictionGVK, &policyv1.Eviction{})
	if err != nil {
		return err
	}
	ev, ok := sent.(*policyv1.Eviction)
	if !ok {
		return apierror.BadRequest(fmt.Sprintf("not a Eviction object: %T", sent))
	}
	if ev.Name == "" {
		ev.Name = r.info.Name
	}
	if ev.Name != r.info.Name {
		return apierror.BadRequest("name in URL does not match name in Eviction object")
	}
	if ev.Namespace == "" {
		ev.Namespace = r.info.Namespace
	}
	if ev.DeleteOptions != nil && ev.DeleteOptions.IgnoreStoreReadErrorWithClusterBreakingPotential != nil && *ev.DeleteOptions.IgnoreStoreReadErrorWithClusterBreakingPotential {
		return apierror.Invalid(evictionGVK.GroupKind(), ev.Name, field.ErrorList{
			field.Invalid(field.NewPath("deleteOptions").Child("ignoreStoreReadErrorWithClusterBreakingPotential"), true, "can not be set for pod eviction, try after removing the option"),
		})
	}
	dry, err := dryRun(r, "CreateOptions")
	if err != nil {
		return err
	}
	// upstream's propagateDryRun: the request's dryRun and the
	// Eviction's DeleteOptions' must agree when both are given.
	opts := &metav1.DeleteOptions{}
	if ev.DeleteOptions != nil {
		opts = ev.DeleteOptions.DeepCopy()
	}
	if dry {
		if len(opts.DryRun) == 0 {
			opts.DryRun = []string{metav1.DryRunAll}
		}
	} else if len(opts.DryRun) > 0 {
		dry = true
	}
	pods, ok := h.cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("pods"))
	if !ok {
		return notFoundPath()
	}
	pdbs, ok := h.cfg.Registry.Lookup(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"))
	if !ok {
		return notFoundPath()
	}

	// Admission sees a CREATE of the Eviction on pods/eviction.
	a := h.attributes(r, admission.Create, ev, nil, dry)
	a.Kind, a.Name = evictionGVK, ev.Name
	if _, err := h.admit(ctx, r, a, nil); err != nil {
		return err
	}
	ns, name := r.info.Namespace, ev.Name
	cur, err := h.cfg.Store.Get(ctx, pods, ns, name, 0)
	if err != nil {
		return err
	}
	pod, ok := cur.(*corev1.Pod)
	if !ok {
		return apierror.InternalError(fmt.Errorf("stored pod %s/%s is a %T", ns, name, cur))
	}

	// A terminal, pending or deleting pod is deleted without asking its
	// budgets: it disrupts nothing more.
	if canIgnorePDB(pod) {
		del := opts
		if shouldEnforceResourceVersion(pod) && resourceVersionIsUnset(opts) {
			del = withResourceVersion(opts, pod.ResourceVersion)
		}
		err := h.deleteEvicted(ctx, r, a, pods, ns, name, del, dry)
		if err != nil {
			return err
		}
		return h.bound(r)
	}

	list, err := h.cfg.Store.List(ctx, pdbs, ns, storage.ListOptions{})
	if err != nil {
		return err
	}
	var matching []*policyv1.PodDisruptionBudget
	for _, obj := range list.Items {
		pdb, ok := obj.(*policyv1.PodDisruptionBudget)
		if !ok || pdb.Namespace != ns {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue // an invalid selector matches no pod
		}
		matching = append(matching, pdb)
	}
	if len(matching) > 1 {
		return apierror.Failure(500, multiplePDBsMessage)
	}
	unhealthyOK := false // an unready pod the budget lets go uncharged
	var pdbName string
	if len(matching) == 1 {
		pdb := matching[0]
		pdbName = pdb.Name
		if !podutil.IsPodReady(pod) {
			if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
				unhealthyOK = true
			} else if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
				unhealthyOK = true
			}
		}
		if !unhealthyOK {
			if err := h.chargeBudget(ctx, pdbs, pdb, name, dry); err != nil {
				return err
			}
		}
	}
	del := opts
	if unhealthyOK {
		del = withResourceVersion(opts, pod.ResourceVersion)
	}
	if err := h.deleteEvicted(ctx, r, a, pods, ns, name, del, dry); err != nil {
		if errors.Is(err, storage.ErrConflict) && unhealthyOK && resourceVersionIsUnset(opts) {
			// The pod changed (became ready?) since the budget let it go:
			// the client retries.
			return tooManyRequests(pdbName)
		}
		return err
	}
	return h.bound(r)
}

// chargeBudget is upstream's checkAndDecrement, applied to the stored
// budget by compare-and-swap (storage retries on a concurrent change,
// checking the budget again as upstream's RetryOnConflict does).
func (h *Handler) chargeBudget(ctx context.Context, pdbs *registry.Resource, seen *policyv1.PodDisruptionBudget, podName string, dry bool) error {
	check := func(pdb *policyv1.PodDisruptionBudget) error {
		if pdb.Status.ObservedGeneration < pdb.Generation {
			return tooManyRequests(pdb.Name)
		}
		if pdb.Status.DisruptionsAllowed < 0 {
			return apierror.DisruptionBudget(apierror.Forbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, errors.New("pdb disruptions allowed is negative")),
				fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative", pdb.Name))
		}
		if len(pdb.Status.DisruptedPods) > maxDisruptedPodSize {
			return apierror.DisruptionBudget(apierror.Forbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, errors.New("DisruptedPods map too big - too many evictions not confirmed by PDB controller")),
				fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller", pdb.Name))
		}
		if pdb.Status.DisruptionsAllowed == 0 {
			return apierror.DisruptionBudget(apierror.TooManyRequests(evictionBudgetMessage, 0), noDisruptionMessage(pdb))
		}
		return nil
	}
	if dry {
		return check(seen)
	}
	_, err := h.cfg.Store.Update(ctx, pdbs, seen.Namespace, seen.Name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		pdb, ok := cur.DeepCopyObject().(*policyv1.PodDisruptionBudget)
		if !ok {
			return nil, fmt.Errorf("stored budget is a %T", cur)
		}
		if err := check(pdb); err != nil {
			return nil, err
		}
		pdb.Status.DisruptionsAllowed--
		if pdb.Status.DisruptionsAllowed == 0 {
			pdbhelper.UpdateDisruptionAllowedCondition(pdb)
		}
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		// The disruption controller counts the pod out until it is gone
		// (or a timeout passes).
		pdb.Status.DisruptedPods[podName] = metav1.Time{Time: time.Now()}
		pdb.ResourceVersion = ""
		return pdb, nil
	})
	return err
}

// noDisruptionMessage is the cause upstream gives when a budget allows no
// disruption.
func noDisruptionMessage(pdb *policyv1.PodDisruptionBudget) string {
	cond := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	switch {
	case cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "" && cond.Reason == policyv1.SyncFailedReason:
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, cond.Message)
	case pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy:
		return fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
	case cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "":
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, cond.Reason, cond.Message)
	default:
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
	}
}

// tooManyRequests is upstream's createTooManyRequestsError.
func tooManyRequests(pdbName string) error {
	return apierror.DisruptionBudget(apierror.TooManyRequests(evictionBudgetMessage, 10),
		fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdbName))
}

// deleteEvicted is upstream's addConditionAndDeletePod: the pod gets the
// DisruptionTarget condition, then is deleted with opts.
func (h *Handler) deleteEvicted(ctx context.Context, r *request, a *admission.Attributes, pods *registry.Resource, ns, name string, opts *metav1.DeleteOptions, dry bool) error {
	pre, err := updatePreconditions(opts)
	if err != nil {
		return err
	}
	if dry {
		_, err := h.cfg.Store.Get(ctx, pods, ns, name, 0)
		return err
	}
	updated, err := h.cfg.Store.Update(ctx, pods, ns, name, pre, func(cur runtime.Object) (runtime.Object, error) {
		pod, ok := cur.DeepCopyObject().(*corev1.Pod)
		if !ok {
			return nil, fmt.Errorf("stored pod is a %T", cur)
		}
		podutil.UpdatePodCondition(&pod.Status, &corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting",
		})
		pod.ResourceVersion = ""
		return pod, nil
	})
	if err != nil {
		return err
	}
	if opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil {
		// We changed the pod ourselves: the precondition moves with it.
		m, err := meta.Accessor(updated)
		if err != nil {
			return err
		}
		opts = opts.DeepCopy()
		rv := m.GetResourceVersion()
		opts.Preconditions.ResourceVersion = &rv
	}
	// The delete itself goes through upstream's delete hooks (BeforeDelete
	// with the pod strategy: preconditions, graceful deletion), as the
	// pod's own DELETE does.
	pr := *r
	pr.res = pods
	d := &deleter{h: h, ctx: ctx, r: &pr, opts: opts}
	obj, deleted, err := h.cfg.Store.Delete(ctx, pods, ns, name, storage.Preconditions{}, d.decide)
	if deleted || err != nil {
		h.finish(ctx, a, obj, err)
	}
	if err != nil {
		return err
	}
	if deleted {
		h.releaseAllocations(obj)
	}
	return nil
}

func canIgnorePDB(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		pod.Status.Phase == corev1.PodPending || !pod.DeletionTimestamp.IsZero()
}

func shouldEnforceResourceVersion(pod *corev1.Pod) bool {
	return !(pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || !pod.DeletionTimestamp.IsZero())
}

func resourceVersionIsUnset(opts *metav1.DeleteOptions) bool {
	return opts.Preconditions == nil || opts.Preconditions.ResourceVersion == nil
}

func withResourceVersion(opts *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	out := opts.DeepCopy()
	if out.Preconditions == nil {
		out.Preconditions = &metav1.Preconditions{}
	}
	out.Preconditions.ResourceVersion = &rv
	return out
}

// updatePreconditions are the Eviction's delete preconditions as storage
// checks them on the update that adds the DisruptionTarget condition.
func updatePreconditions(opts *metav1.DeleteOptions) (storage.Preconditions, error) {
	var out storage.Preconditions
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			out.UID = string(*p.UID)
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != "" {
			rv, err := strconv.ParseInt(*p.ResourceVersion, 10, 64)
			if err != nil || rv <= 0 {
				return out, apierror.BadRequest(fmt.Sprintf("invalid precondition resourceVersion %q", *p.ResourceVersion))
			}
			out.ResourceVersion = rv
		}
	}
	return out, nil
}
