package node

import (
	"fmt"

	certsv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	nodeauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/node"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"

	"github.com/kgate/kgate/gateway/internal/feed"
)

// Sinks are the feed's sinks that keep graph current, one per resource
// upstream's AddGraphEventHandlers follows, with its event handlers'
// semantics: pods enter the graph once bound to a node and are added
// again only when what the graph records of them can have changed; a
// relist (Replace) also removes what is gone.
func Sinks(graph *nodeauthorizer.Graph) map[schema.GroupVersionResource]feed.Sink {
	return map[schema.GroupVersionResource]feed.Sink{
		podsGVR: newTracked(
			podStateOf,
			podState.same,
			graph.AddPod,
			func(k key) { graph.DeletePod(k.name, k.namespace) },
		).withJSON(podStateFromJSON),
		pvsGVR: newTracked(
			func(pv *corev1.PersistentVolume) (struct{}, bool) { return struct{}{}, true },
			nil, // every change may change the claim or the secrets
			graph.AddPV,
			func(k key) { graph.DeletePV(k.name) },
		),
		attachmentsGVR: newTracked(
			func(va *storagev1.VolumeAttachment) (bound, bool) { return bound{va.UID, va.Spec.NodeName}, true },
			sameBound,
			func(va *storagev1.VolumeAttachment) { graph.AddVolumeAttachment(va.Name, va.Spec.NodeName) },
			func(k key) { graph.DeleteVolumeAttachment(k.name) },
		),
		slicesGVR: newTracked(
			func(s *resourcev1.ResourceSlice) (bound, bool) {
				return bound{s.UID, ptr.Deref(s.Spec.NodeName, "")}, true
			},
			sameBound, // the node name is immutable
			func(s *resourcev1.ResourceSlice) { graph.AddResourceSlice(s.Name, ptr.Deref(s.Spec.NodeName, "")) },
			func(k key) { graph.DeleteResourceSlice(k.name) },
		),
		pcrsGVR: newTracked(
			func(r *certsv1.PodCertificateRequest) (bound, bool) {
				return bound{r.UID, string(r.Spec.NodeName)}, true
			},
			sameBound, // the spec is immutable
			graph.AddPodCertificateRequest,
			func(k key) {
				graph.DeletePodCertificateRequest(&certsv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: k.name}})
			},
		),
	}
}

// podState is what the graph's edges of a pod depend on beyond its
// immutable spec.
type podState struct {
	node      string
	uid       types.UID
	ephemeral int
	claims    []corev1.PodResourceClaimStatus
	extended  *corev1.PodExtendedResourceClaimStatus
}

// same is upstream's updatePod test: the same pod on the same node, no
// new ephemeral containers (which may reference new secrets and config
// maps) and the same resource claim statuses.
func (old podState) same(cur podState) bool {
	return old.node == cur.node && old.uid == cur.uid && cur.ephemeral <= old.ephemeral &&
		resourceclaim.PodStatusEqual(old.claims, cur.claims) &&
		resourceclaim.PodExtendedStatusEqual(old.extended, cur.extended)
}

// bound is an object tied to a node by an immutable or rarely changed
// field: it is added again only when that node changes or the object was
// replaced by another of the same name.
type bound struct {
	uid  types.UID
	node string
}

// podStateOf is what the graph's edges of p depend on, and whether p
// is in the graph (bound to a node).
func podStateOf(p *corev1.Pod) (podState, bool) {
	return podState{
		node: p.Spec.NodeName, uid: p.UID, ephemeral: len(p.Spec.EphemeralContainers),
		claims: p.Status.ResourceClaimStatuses, extended: p.Status.ExtendedResourceClaimStatus,
	}, p.Spec.NodeName != ""
}

// podJSON is the part of a Pod podState reads, decoded from the Pod's
// JSON without the rest of it.
type podJSON struct {
	Metadata struct {
		UID types.UID `json:"uid"`
	} `json:"metadata"`
	Spec struct {
		NodeName            string     `json:"nodeName"`
		EphemeralContainers []struct{} `json:"ephemeralContainers"`
	} `json:"spec"`
	Status struct {
		ResourceClaimStatuses       []corev1.PodResourceClaimStatus        `json:"resourceClaimStatuses"`
		ExtendedResourceClaimStatus *corev1.PodExtendedResourceClaimStatus `json:"extendedResourceClaimStatus"`
	} `json:"status"`
}

// podStateFromJSON is podStateOf read from a Pod's JSON, as
// apimachinery's JSON serializer reads it (case-sensitive).
func podStateFromJSON(data []byte) (podState, bool, error) {
	var p podJSON
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &p); err != nil {
		return podState{}, false, err
	}
	return podState{
		node: p.Spec.NodeName, uid: p.Metadata.UID, ephemeral: len(p.Spec.EphemeralContainers),
		claims: p.Status.ResourceClaimStatuses, extended: p.Status.ExtendedResourceClaimStatus,
	}, p.Spec.NodeName != "", nil
}

func sameBound(old, cur bound) bool { return old == cur }

type key struct{ namespace, name string }

// tracked feeds one resource of type T into the graph and remembers, per
// object in the graph, the state S its edges depend on: to skip changes
// that cannot change them, and to remove on a relist what is gone (the
// graph cannot list its vertices). The feed calls it from one goroutine.
type tracked[T metav1.Object, S any] struct {
	known map[key]S
	// state is what the graph records of obj, and whether obj belongs in
	// the graph at all (a pod not bound yet does not).
	state func(obj T) (S, bool)
	// same reports whether the graph's edges need no update from old to
	// cur; nil: every change updates them.
	same func(old, cur S) bool
	add  func(obj T)
	del  func(k key)
	// fromJSON, when set, is state read from an object's JSON alone: a
	// change it shows needs nothing of the graph is skipped undecoded.
	fromJSON func(json []byte) (S, bool, error)
}

// withJSON sets t's fromJSON and returns t.
func (t *tracked[T, S]) withJSON(f func(json []byte) (S, bool, error)) *tracked[T, S] {
	t.fromJSON = f
	return t
}

// Skip implements feed.Skipper: true when Upsert would leave the graph
// as it is, as read from the object's JSON. What t remembers of the
// object is then kept as it was: same says it is equivalent.
func (t *tracked[T, S]) Skip(namespace, name string, json []byte) bool {
	if t.fromJSON == nil {
		return false
	}
	cur, in, err := t.fromJSON(json)
	if err != nil {
		return false // the decode will tell
	}
	old, had := t.known[key{namespace, name}]
	switch {
	case !in:
		return !had
	case had && t.same != nil:
		return t.same(old, cur)
	}
	return false
}

func newTracked[T metav1.Object, S any](state func(T) (S, bool), same func(old, cur S) bool, add func(T), del func(key)) *tracked[T, S] {
	return &tracked[T, S]{known: map[key]S{}, state: state, same: same, add: add, del: del}
}

func (t *tracked[T, S]) object(obj runtime.Object) (T, key, error) {
	o, ok := obj.(T)
	if !ok {
		var zero T
		return zero, key{}, fmt.Errorf("cannot feed the Node authorizer graph: unexpected %T", obj)
	}
	return o, key{o.GetNamespace(), o.GetName()}, nil
}

// Upsert implements feed.Sink.
func (t *tracked[T, S]) Upsert(obj runtime.Object) error {
	o, k, err := t.object(obj)
	if err != nil {
		return err
	}
	t.upsert(o, k)
	return nil
}

func (t *tracked[T, S]) upsert(o T, k key) {
	cur, in := t.state(o)
	old, had := t.known[k]
	switch {
	case !in:
		if had {
			t.del(k)
			delete(t.known, k)
		}
		return
	case had && t.same != nil && t.same(old, cur):
	default:
		t.add(o)
	}
	t.known[k] = cur
}

// Delete implements feed.Sink.
func (t *tracked[T, S]) Delete(obj runtime.Object) error {
	_, k, err := t.object(obj)
	if err != nil {
		return err
	}
	if _, had := t.known[k]; had {
		t.del(k)
		delete(t.known, k)
	}
	return nil
}

// Replace implements feed.Sink: objs are all there is.
func (t *tracked[T, S]) Replace(objs []runtime.Object) {
	seen := make(map[key]bool, len(objs))
	for _, obj := range objs {
		o, k, err := t.object(obj)
		if err != nil {
			continue
		}
		seen[k] = true
		t.upsert(o, k)
	}
	for k := range t.known {
		if !seen[k] {
			t.del(k)
			delete(t.known, k)
		}
	}
}
