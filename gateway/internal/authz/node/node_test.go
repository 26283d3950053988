package node

import (
	"encoding/json"
	"testing"

	certsv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	nodeauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/node"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/feed"
)

// world is a graph fed through Sinks and the authorizer over it.
type world struct {
	t     *testing.T
	z     *Authorizer
	sinks map[string]interface {
		Replace([]runtime.Object)
		Upsert(runtime.Object) error
		Delete(runtime.Object) error
	}
}

func newWorld(t *testing.T) *world {
	g := nodeauthorizer.NewGraph()
	w := &world{t: t, z: newAuthorizer(g), sinks: map[string]interface {
		Replace([]runtime.Object)
		Upsert(runtime.Object) error
		Delete(runtime.Object) error
	}{}}
	for gvr, s := range Sinks(g) {
		w.sinks[gvr.Resource] = s
	}
	return w
}

func (w *world) upsert(resource string, objs ...runtime.Object) {
	w.t.Helper()
	for _, o := range objs {
		if err := w.sinks[resource].Upsert(o); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) delete(resource string, o runtime.Object) {
	w.t.Helper()
	if err := w.sinks[resource].Delete(o); err != nil {
		w.t.Fatal(err)
	}
}

// req is one request of the table: verb, resource[/subresource],
// namespace, name and an optional field selector.
type req struct {
	verb, group, resource, sub, ns, name, fieldSelector string
}

// check asks the authorizer for u and compares decision and reason.
func (w *world) check(u user.Info, r req, want authz.Decision, wantReason string) {
	w.t.Helper()
	at := authz.Attributes{User: u, Verb: r.verb, APIGroup: r.group, APIVersion: "v1", Resource: r.resource, Subresource: r.sub,
		Namespace: r.ns, Name: r.name, IsResourceRequest: true, FieldSelector: r.fieldSelector}
	d, reason := w.z.Authorize(at)
	if d != want || (wantReason != "*" && reason != wantReason) {
		w.t.Errorf("%s %+v: %v %q, want %v %q", u.GetName(), r, d, reason, want, wantReason)
	}
}

var (
	n1    = &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.NodesGroup, user.AllAuthenticated}}
	alice = &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
)

const noRelation = "no relationship found between node 'n1' and this object"

func pod(ns, name, node, uid string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}, Spec: corev1.PodSpec{NodeName: node}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// uses makes p reference a service account, a secret and a config map
// through volumes, a secret through env, and a claim.
func uses(sa, secret, envSecret, configMap, claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.ServiceAccountName = sa
		p.Spec.Volumes = []corev1.Volume{
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}},
			{Name: "p", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
		}
		p.Spec.Containers = []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: envSecret}, Key: "k"}}}}}}
	}
}

func pv(name, claimNS, claim, secret string) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if claim != "" {
		v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: claimNS, Name: claim}
		v.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h",
			NodePublishSecretRef: &corev1.SecretReference{Namespace: claimNS, Name: secret}}
	}
	return v
}

// TestDecisions is the Node authorizer's decision table for kubelet n1,
// with the graph fed through the sinks the feed uses.
func TestDecisions(t *testing.T) {
	w := newWorld(t)
	w.upsert("pods",
		pod("ns", "web", "n1", "u1", uses("sa1", "s1", "env1", "cm1", "claim1")),
		pod("ns", "db", "n2", "u2", uses("sa2", "s2", "env2", "cm2", "claim2")),
		pod("ns", "pending", "", "u3", uses("sa3", "s3", "env3", "cm3", "claim3")),
	)
	w.upsert("persistentvolumes", pv("pv1", "ns", "claim1", "pvsecret1"), pv("pv2", "ns", "claim2", "pvsecret2"), pv("pv3", "", "", ""))
	w.upsert("volumeattachments",
		&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va1"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1"}},
		&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va2"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n2"}})
	w.upsert("resourceslices",
		&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "slice1"}, Spec: resourcev1.ResourceSliceSpec{NodeName: ptr.To("n1")}},
		&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "slice2"}, Spec: resourcev1.ResourceSliceSpec{NodeName: ptr.To("n2")}})
	w.upsert("podcertificaterequests",
		&certsv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pcr1"}, Spec: certsv1.PodCertificateRequestSpec{NodeName: "n1"}},
		&certsv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pcr2"}, Spec: certsv1.PodCertificateRequestSpec{NodeName: "n2"}})

	const core, storage, coordination, resource, certificates = "", "storage.k8s.io", "coordination.k8s.io", "resource.k8s.io", "certificates.k8s.io"
	allow := func(r req) { t.Helper(); w.check(n1, r, authz.Allow, "") }
	deny := func(r req, reason string) { t.Helper(); w.check(n1, r, authz.NoOpinion, reason) }

	// Its own Node object, not another's.
	allow(req{verb: "get", resource: "nodes", name: "n1"})
	allow(req{verb: "watch", resource: "nodes", name: "n1"})
	allow(req{verb: "patch", resource: "nodes", sub: "status", name: "n1"})
	allow(req{verb: "create", resource: "nodes"}) // NodeRestriction narrows it
	deny(req{verb: "get", resource: "nodes", name: "n2"}, "node 'n1' cannot read 'n2', only its own Node object")
	deny(req{verb: "list", resource: "nodes"}, "node 'n1' cannot read all nodes, only its own Node object")

	// Secrets, config maps, claims, volumes of the pods bound to it.
	for _, s := range []string{"s1", "env1", "pvsecret1"} {
		allow(req{verb: "get", resource: "secrets", ns: "ns", name: s})
		allow(req{verb: "watch", resource: "secrets", ns: "ns", name: s})
	}
	for _, s := range []string{"s2", "env2", "pvsecret2", "s3", "nosuch"} {
		deny(req{verb: "get", resource: "secrets", ns: "ns", name: s}, noRelation)
	}
	deny(req{verb: "get", resource: "secrets", ns: "other", name: "s1"}, noRelation)
	deny(req{verb: "list", resource: "secrets", ns: "ns"}, "No Object name found")
	deny(req{verb: "update", resource: "secrets", ns: "ns", name: "s1"}, "can only read resources of this type")
	allow(req{verb: "get", resource: "configmaps", ns: "ns", name: "cm1"})
	deny(req{verb: "get", resource: "configmaps", ns: "ns", name: "cm2"}, noRelation)
	allow(req{verb: "get", resource: "persistentvolumeclaims", ns: "ns", name: "claim1"})
	allow(req{verb: "patch", resource: "persistentvolumeclaims", sub: "status", ns: "ns", name: "claim1"})
	deny(req{verb: "get", resource: "persistentvolumeclaims", ns: "ns", name: "claim2"}, noRelation)
	deny(req{verb: "list", resource: "persistentvolumeclaims", ns: "ns"}, "can only get individual resources of this type")
	allow(req{verb: "get", resource: "persistentvolumes", name: "pv1"})
	deny(req{verb: "get", resource: "persistentvolumes", name: "pv2"}, noRelation)
	deny(req{verb: "get", resource: "persistentvolumes", name: "pv3"}, noRelation)

	// Service accounts and tokens of its pods' service accounts.
	allow(req{verb: "create", resource: "serviceaccounts", sub: "token", ns: "ns", name: "sa1"})
	allow(req{verb: "get", resource: "serviceaccounts", ns: "ns", name: "sa1"})
	deny(req{verb: "create", resource: "serviceaccounts", sub: "token", ns: "ns", name: "sa2"}, noRelation)
	deny(req{verb: "get", resource: "serviceaccounts", ns: "ns", name: "sa3"}, noRelation)

	// Pods: its own, by name or with its field selector; mirror pods.
	allow(req{verb: "get", resource: "pods", ns: "ns", name: "web"})
	deny(req{verb: "get", resource: "pods", ns: "ns", name: "db"}, noRelation)
	allow(req{verb: "list", resource: "pods", fieldSelector: "spec.nodeName=n1"})
	allow(req{verb: "watch", resource: "pods", fieldSelector: "spec.nodeName=n1,metadata.namespace=ns"})
	deny(req{verb: "list", resource: "pods", fieldSelector: "spec.nodeName=n2"}, "can only list/watch pods with spec.nodeName field selector")
	deny(req{verb: "list", resource: "pods"}, "can only list/watch pods with spec.nodeName field selector")
	allow(req{verb: "create", resource: "pods", ns: "ns"})
	allow(req{verb: "patch", resource: "pods", sub: "status", ns: "ns", name: "web"})
	allow(req{verb: "create", resource: "pods", sub: "eviction", ns: "ns", name: "web"})
	deny(req{verb: "update", resource: "pods", ns: "ns", name: "web"}, "")

	// Its lease in kube-node-lease, its CSINode.
	allow(req{verb: "get", group: coordination, resource: "leases", ns: "kube-node-lease", name: "n1"})
	allow(req{verb: "update", group: coordination, resource: "leases", ns: "kube-node-lease", name: "n1"})
	allow(req{verb: "create", group: coordination, resource: "leases", ns: "kube-node-lease"})
	deny(req{verb: "get", group: coordination, resource: "leases", ns: "kube-node-lease", name: "n2"}, "can only access node lease with the same name as the requesting node")
	deny(req{verb: "get", group: coordination, resource: "leases", ns: "kube-system", name: "n1"}, `can only access leases in the "kube-node-lease" system namespace`)
	deny(req{verb: "list", group: coordination, resource: "leases", ns: "kube-node-lease"}, "can only get, create, update, patch, or delete a node lease")
	allow(req{verb: "get", group: storage, resource: "csinodes", name: "n1"})
	allow(req{verb: "create", group: storage, resource: "csinodes"})
	deny(req{verb: "update", group: storage, resource: "csinodes", name: "n2"}, "can only access CSINode with the same name as the requesting node")
	deny(req{verb: "list", group: storage, resource: "csinodes"}, "can only get, create, update, patch, or delete a CSINode")

	// Volume attachments, resource slices, pod certificate requests of
	// its node.
	allow(req{verb: "get", group: storage, resource: "volumeattachments", name: "va1"})
	deny(req{verb: "get", group: storage, resource: "volumeattachments", name: "va2"}, noRelation)
	allow(req{verb: "get", group: resource, resource: "resourceslices", name: "slice1"})
	allow(req{verb: "delete", group: resource, resource: "resourceslices", name: "slice1"})
	deny(req{verb: "update", group: resource, resource: "resourceslices", name: "slice2"}, noRelation)
	allow(req{verb: "create", group: resource, resource: "resourceslices"})
	allow(req{verb: "watch", group: resource, resource: "resourceslices", fieldSelector: "spec.nodeName=n1"})
	deny(req{verb: "list", group: resource, resource: "resourceslices"}, "can only list/watch/deletecollection resourceslices with nodeName field selector")
	allow(req{verb: "get", group: certificates, resource: "podcertificaterequests", ns: "ns", name: "pcr1"})
	deny(req{verb: "get", group: certificates, resource: "podcertificaterequests", ns: "ns", name: "pcr2"}, noRelation)

	// Everything else by upstream's node rules.
	allow(req{verb: "list", resource: "services"})
	allow(req{verb: "create", resource: "events", ns: "ns"})
	allow(req{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews"})
	allow(req{verb: "get", group: storage, resource: "csidrivers", name: "d"})
	deny(req{verb: "list", group: "apps", resource: "deployments"}, "")
	deny(req{verb: "delete", resource: "namespaces", name: "ns"}, "")

	// Users that are not nodes: no opinion, whatever they ask.
	w.check(alice, req{verb: "get", resource: "nodes", name: "n1"}, authz.NoOpinion, "")
	w.check(&user.DefaultInfo{Name: "system:node:n1"}, req{verb: "get", resource: "secrets", ns: "ns", name: "s1"}, authz.NoOpinion, "")
	w.check(&user.DefaultInfo{Name: "kubelet", Groups: []string{user.NodesGroup}}, req{verb: "get", resource: "nodes", name: "kubelet"}, authz.NoOpinion, "")
	w.check(&user.DefaultInfo{Name: "system:node:", Groups: []string{user.NodesGroup}}, req{verb: "get", resource: "nodes"}, authz.NoOpinion, `unknown node for user "system:node:"`)
	if !w.z.IsNode(n1) || w.z.IsNode(alice) {
		t.Error("IsNode does not tell nodes from other users")
	}

	// Changes: a new ephemeral container's secret becomes readable; once
	// the pod is deleted its objects are not.
	w.upsert("pods", pod("ns", "web", "n1", "u1", func(p *corev1.Pod) {
		uses("sa1", "s1", "env1", "cm1", "claim1")(p)
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "debug-secret"}}}}}}}
	}))
	allow(req{verb: "get", resource: "secrets", ns: "ns", name: "debug-secret"})
	w.delete("pods", pod("ns", "web", "n1", "u1", nil))
	for _, r := range []req{
		{verb: "get", resource: "secrets", ns: "ns", name: "s1"},
		{verb: "get", resource: "secrets", ns: "ns", name: "debug-secret"},
		{verb: "get", resource: "configmaps", ns: "ns", name: "cm1"},
		{verb: "get", resource: "persistentvolumeclaims", ns: "ns", name: "claim1"},
		{verb: "get", resource: "persistentvolumes", name: "pv1"},
		{verb: "get", resource: "secrets", ns: "ns", name: "pvsecret1"},
		{verb: "create", resource: "serviceaccounts", sub: "token", ns: "ns", name: "sa1"},
		{verb: "get", resource: "pods", ns: "ns", name: "web"},
	} {
		deny(r, noRelation)
	}

	// The pending pod is bound to n1: its objects become readable.
	w.upsert("pods", pod("ns", "pending", "n1", "u3", uses("sa3", "s3", "env3", "cm3", "claim3")))
	allow(req{verb: "get", resource: "secrets", ns: "ns", name: "s3"})
	allow(req{verb: "get", resource: "configmaps", ns: "ns", name: "cm3"})

	// A volume attachment moved to n1; a slice and a request deleted.
	w.upsert("volumeattachments", &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va2"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1"}})
	allow(req{verb: "get", group: storage, resource: "volumeattachments", name: "va2"})
	w.delete("resourceslices", &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "slice1"}})
	deny(req{verb: "get", group: resource, resource: "resourceslices", name: "slice1"}, noRelation)
	w.delete("podcertificaterequests", &certsv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pcr1"}})
	deny(req{verb: "get", group: certificates, resource: "podcertificaterequests", ns: "ns", name: "pcr1"}, noRelation)

	// A persistent volume rebound from claim2 to claim3 (now on n1).
	w.upsert("persistentvolumes", pv("pv2", "ns", "claim3", "pvsecret2"))
	allow(req{verb: "get", resource: "persistentvolumes", name: "pv2"})
	allow(req{verb: "get", resource: "secrets", ns: "ns", name: "pvsecret2"})
}

// TestReplace checks that a relist removes from the graph what it no
// longer lists, and adds what it lists anew.
func TestReplace(t *testing.T) {
	w := newWorld(t)
	web := pod("ns", "web", "n1", "u1", uses("sa1", "s1", "env1", "cm1", "claim1"))
	w.sinks["pods"].Replace([]runtime.Object{web, pod("ns", "db", "n1", "u2", uses("sa2", "s2", "env2", "cm2", "claim2"))})
	w.sinks["volumeattachments"].Replace([]runtime.Object{&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va1"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1"}}})
	w.sinks["persistentvolumes"].Replace([]runtime.Object{pv("pv1", "ns", "claim1", "pvsecret1")})
	get := func(resource, group, ns, name string, want authz.Decision) {
		t.Helper()
		reason := ""
		if want != authz.Allow {
			reason = noRelation
		}
		w.check(n1, req{verb: "get", group: group, resource: resource, ns: ns, name: name}, want, reason)
	}
	get("secrets", "", "ns", "s1", authz.Allow)
	get("secrets", "", "ns", "s2", authz.Allow)
	get("volumeattachments", "storage.k8s.io", "", "va1", authz.Allow)
	get("persistentvolumes", "", "", "pv1", authz.Allow)

	// db went while the watch was down; web was recreated (new UID) on
	// n2; another pod appeared. Nothing else lists.
	w.sinks["pods"].Replace([]runtime.Object{
		pod("ns", "web", "n2", "u9", uses("sa1", "s1", "env1", "cm1", "claim1")),
		pod("ns", "new", "n1", "u4", uses("sa4", "s4", "env4", "cm4", "claim4")),
	})
	w.sinks["volumeattachments"].Replace(nil)
	w.sinks["persistentvolumes"].Replace(nil)
	get("secrets", "", "ns", "s1", authz.NoOpinion)
	get("secrets", "", "ns", "s2", authz.NoOpinion)
	get("secrets", "", "ns", "s4", authz.Allow)
	get("volumeattachments", "storage.k8s.io", "", "va1", authz.NoOpinion)
	get("persistentvolumes", "", "", "pv1", authz.NoOpinion)

	// An object of the wrong type is an error, not a panic.
	if err := w.sinks["pods"].Upsert(&corev1.Secret{}); err == nil {
		t.Error("a Secret fed as a pod was accepted")
	}
}

// TestPodState checks which pod changes re-add the pod to the graph, as
// upstream's updatePod decides.
func TestPodState(t *testing.T) {
	base := podState{node: "n1", uid: "u"}
	f := func(name string, cur podState, same bool) {
		t.Helper()
		if got := base.same(cur); got != same {
			t.Errorf("%s: same %v, want %v", name, got, same)
		}
	}
	f("unchanged", base, true)
	f("other node", podState{node: "n2", uid: "u"}, false)
	f("recreated", podState{node: "n1", uid: "v"}, false)
	f("ephemeral container added", podState{node: "n1", uid: "u", ephemeral: 1}, false)
	f("claim status", podState{node: "n1", uid: "u", claims: []corev1.PodResourceClaimStatus{{Name: "c", ResourceClaimName: ptr.To("x")}}}, false)
	f("extended claim status", podState{node: "n1", uid: "u", extended: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "x"}}, false)
}

// TestPodSkip: the pod sink skips, from the JSON alone, exactly the
// changes its Upsert would not pass to the graph, so the feed need not
// decode them.
func TestPodSkip(t *testing.T) {
	if _, ok := Sinks(nodeauthorizer.NewGraph())[podsGVR].(feed.Skipper); !ok {
		t.Fatal("the pod sink does not skip")
	}
	var calls int
	s := newTracked(podStateOf, podState.same, func(*corev1.Pod) { calls++ }, func(key) { calls++ }).withJSON(podStateFromJSON)
	status := func(phase corev1.PodPhase) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Status.Phase = phase }
	}
	ephemeral := func(p *corev1.Pod) {
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
	}
	steps := []struct {
		name string
		pod  *corev1.Pod
		skip bool
	}{
		{"pending, not bound", pod("ns", "p", "", "u1", status(corev1.PodPending)), true},
		{"bound", pod("ns", "p", "n1", "u1", nil), false},
		{"status update", pod("ns", "p", "n1", "u1", status(corev1.PodRunning)), true},
		{"labels", pod("ns", "p", "n1", "u1", func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }), true},
		{"ephemeral container", pod("ns", "p", "n1", "u1", ephemeral), false},
		{"ephemeral container again", pod("ns", "p", "n1", "u1", ephemeral), true},
		{"claim status", pod("ns", "p", "n1", "u1", func(p *corev1.Pod) {
			ephemeral(p)
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "c", ResourceClaimName: ptr.To("x")}}
		}), false},
		{"extended claim status", pod("ns", "p", "n1", "u1", func(p *corev1.Pod) {
			ephemeral(p)
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "c", ResourceClaimName: ptr.To("x")}}
			p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "y"}
		}), false},
		{"other node", pod("ns", "p", "n2", "u1", nil), false},
		{"recreated", pod("ns", "p", "n2", "u2", nil), false},
		{"another pod of the same name elsewhere", pod("other", "p", "n2", "u2", nil), false},
		{"unbound again", pod("ns", "p", "", "u2", nil), false},
		{"still unbound", pod("ns", "p", "", "u2", status(corev1.PodFailed)), true},
	}
	for _, st := range steps {
		data, err := json.Marshal(st.pod)
		if err != nil {
			t.Fatal(err)
		}
		skip := s.Skip(st.pod.Namespace, st.pod.Name, data)
		before := calls
		if err := s.Upsert(st.pod); err != nil {
			t.Fatal(err)
		}
		if changed := calls != before; skip != st.skip || skip == changed {
			t.Fatalf("%s: skip %v (want %v), the graph changed: %v", st.name, skip, st.skip, changed)
		}
	}
	if s.Skip("ns", "p", []byte(`{"spec":`)) {
		t.Fatal("a pod that does not decode was skipped")
	}
}
