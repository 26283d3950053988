package upstream

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	adm "github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/storage/registry"
)

// env is what the plugins under test run on: upstream's scheme, the
// built-in resources, stored objects (the listers and the client see the
// same), and the permissions the authorizer grants.
type env struct {
	t       *testing.T
	scheme  *runtime.Scheme
	byGVR   map[schema.GroupVersionResource]*registry.Resource
	objects map[string]runtime.Object // gvr/ns/name
	// allowed are "user verb group/resource[/subresource] name" lines.
	allowed map[string]bool
}

var (
	semOnce sync.Once
	sem     *builtin.Semantics
	semErr  error
)

func newEnv(t *testing.T) *env {
	t.Helper()
	semOnce.Do(func() { sem, semErr = builtin.New(registry.Builtin()) })
	if semErr != nil {
		t.Fatal(semErr)
	}
	e := &env{t: t, scheme: sem.Scheme(), byGVR: map[schema.GroupVersionResource]*registry.Resource{},
		objects: map[string]runtime.Object{}, allowed: map[string]bool{}}
	res := registry.Builtin()
	for i := range res {
		if res[i].Prefix != "" {
			e.byGVR[res[i].GVR()] = &res[i]
		}
	}
	return e
}

func (e *env) resource(gvr schema.GroupVersionResource) *registry.Resource {
	res, ok := e.byGVR[gvr]
	if !ok {
		e.t.Fatalf("%s is not a built-in resource", gvr)
	}
	return res
}

// kinds implements Config.Kinds.
func (e *env) kinds(obj runtime.Object) (schema.GroupVersionResource, error) {
	kinds, _, err := e.scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	for gvr, res := range e.byGVR {
		if res.GVK() == kinds[0] {
			return gvr, nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("no resource of %s", kinds[0])
}

func key(gvr schema.GroupVersionResource, ns, name string) string {
	return gvr.String() + "/" + ns + "/" + name
}

// Object implements Objects.
func (e *env) Object(_ context.Context, gvr schema.GroupVersionResource, ns, name string) (runtime.Object, error) {
	if o, ok := e.objects[key(gvr, ns, name)]; ok {
		return o.DeepCopyObject(), nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

// Authorize implements authorizer.Authorizer.
func (e *env) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r := a.GetAPIGroup() + "/" + a.GetResource()
	if a.GetSubresource() != "" {
		r += "/" + a.GetSubresource()
	}
	if e.allowed[a.GetUser().GetName()+" "+a.GetVerb()+" "+r+" "+a.GetName()] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// store adds objects (to the listers and the client).
func (e *env) store(objs ...runtime.Object) {
	for _, o := range objs {
		gvr, err := e.kinds(o)
		if err != nil {
			e.t.Fatal(err)
		}
		m := o.(metav1.Object)
		e.objects[key(gvr, m.GetNamespace(), m.GetName())] = o
	}
}

// plugins returns names initialised, their listers filled from the
// stored objects as the feed would.
func (e *env) plugins(names ...string) *Plugins {
	e.t.Helper()
	p, err := New(Config{Names: names, Scheme: e.scheme, Kinds: e.kinds, Objects: e, Authorizer: e,
		Features: utilfeature.DefaultFeatureGate, Version: "1.37"})
	if err != nil {
		e.t.Fatal(err)
	}
	for gvr, sink := range p.Sinks() {
		var objs []runtime.Object
		for k, o := range e.objects {
			if strings.HasPrefix(k, gvr.String()+"/") {
				objs = append(objs, o.DeepCopyObject())
			}
		}
		sink.Replace(objs)
	}
	return p
}

// write describes one write through kgate's chain.
type write struct {
	user        user.Info
	gvr         schema.GroupVersionResource
	subresource string
	kind        schema.GroupVersionKind
	op          adm.Operation
	obj, old    runtime.Object
}

// run admits w through a chain of p (mutating, then validating phase)
// and returns the attributes (the object as admitted).
func (e *env) run(p *Plugins, w write) (*adm.Attributes, error) {
	u := w.user
	if u == nil {
		u = &user.DefaultInfo{Name: "alice"}
	}
	obj := w.obj
	if obj == nil {
		obj = w.old
	}
	m := obj.(metav1.Object)
	at := &adm.Attributes{User: u, Resource: e.resource(w.gvr), Subresource: w.subresource, Kind: w.kind,
		Operation: w.op, Namespace: m.GetNamespace(), Name: m.GetName(), Object: w.obj, OldObject: w.old}
	c := adm.Chain{p}
	if err := c.Admit(context.Background(), at); err != nil {
		return at, err
	}
	return at, c.Validate(context.Background(), at)
}

var (
	gvrPods     = corev1.SchemeGroupVersion.WithResource("pods")
	gvrNodes    = corev1.SchemeGroupVersion.WithResource("nodes")
	gvrPVCs     = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	gvrPVs      = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	gvrIngress  = networkingv1.SchemeGroupVersion.WithResource("ingresses")
	gvrCSRs     = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	gvrBundles  = certificatesv1beta1.SchemeGroupVersion.WithResource("clustertrustbundles")
	gvrPriority = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")
)

func ns(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func pod(name string, f func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if f != nil {
		f(p)
	}
	return p
}

// wantErr checks err: nil when want is empty, else a Status error with
// code and a message containing want.
func wantErr(t *testing.T, err error, code int32, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	se, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("error %v (%T) is not a Status error", err, err)
	}
	if se.Status().Code != code || !strings.Contains(se.Status().Message, want) {
		t.Fatalf("error %d %q, want %d containing %q", se.Status().Code, se.Status().Message, code, want)
	}
}

func TestPriority(t *testing.T) {
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	def := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "dflt"}, Value: 7, GlobalDefault: true}
	cases := []struct {
		name     string
		stored   []runtime.Object
		w        write
		want     int32
		code     int32
		wantErr  string
		wantName string
	}{
		{name: "from the class", stored: []runtime.Object{high},
			w:    write{gvr: gvrPods, op: adm.Create, obj: pod("p", func(p *corev1.Pod) { p.Spec.PriorityClassName = "high" })},
			want: 1000, wantName: "high"},
		{name: "global default", stored: []runtime.Object{high, def},
			w:    write{gvr: gvrPods, op: adm.Create, obj: pod("p", nil)},
			want: 7, wantName: "dflt"},
		{name: "no default: zero", w: write{gvr: gvrPods, op: adm.Create, obj: pod("p", nil)}},
		{name: "unknown class", w: write{gvr: gvrPods, op: adm.Create, obj: pod("p", func(p *corev1.Pod) { p.Spec.PriorityClassName = "nope" })},
			code: 403, wantErr: `pods "p" is forbidden: no PriorityClass with name nope was found`},
		{name: "second global default", stored: []runtime.Object{def},
			w:    write{gvr: gvrPriority, op: adm.Create, obj: &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Value: 1, GlobalDefault: true}},
			code: 403, wantErr: "PriorityClass dflt is already marked as default. Only one default can exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.store(c.stored...)
			at, err := e.run(e.plugins("Priority"), c.w)
			wantErr(t, err, c.code, c.wantErr)
			if err != nil {
				return
			}
			p, ok := at.Object.(*corev1.Pod)
			if !ok {
				return
			}
			if p.Spec.Priority == nil || *p.Spec.Priority != c.want || p.Spec.PriorityClassName != c.wantName {
				t.Fatalf("priority %v class %q, want %d %q", p.Spec.Priority, p.Spec.PriorityClassName, c.want, c.wantName)
			}
		})
	}
}

func TestDefaultTolerationSeconds(t *testing.T) {
	e := newEnv(t)
	own := corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want int // tolerations
	}{
		{name: "both added", pod: pod("p", nil), want: 2},
		{name: "the pod's own kept", pod: pod("p", func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{own} }), want: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at, err := e.run(e.plugins("DefaultTolerationSeconds"), write{gvr: gvrPods, op: adm.Create, obj: c.pod})
			if err != nil {
				t.Fatal(err)
			}
			tol := at.Object.(*corev1.Pod).Spec.Tolerations
			if len(tol) != c.want {
				t.Fatalf("tolerations %+v, want %d", tol, c.want)
			}
			for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
				found := false
				for _, x := range tol {
					if x.Key == key && x.Effect == corev1.TaintEffectNoExecute {
						found = true
						if x.TolerationSeconds == nil && !reflect.DeepEqual(x, own) || x.TolerationSeconds != nil && *x.TolerationSeconds != 300 {
							t.Errorf("toleration %+v", x)
						}
					}
				}
				if !found {
					t.Errorf("no toleration of %s", key)
				}
			}
		})
	}
}

func pvc(f func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if f != nil {
		f(c)
	}
	return c
}

func TestDefaultStorageClass(t *testing.T) {
	fast := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast",
		Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "x"}
	slow := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Provisioner: "x"}
	gold := "slow"
	cases := []struct {
		name   string
		stored []runtime.Object
		claim  *corev1.PersistentVolumeClaim
		want   *string
	}{
		{name: "default set", stored: []runtime.Object{fast, slow}, claim: pvc(nil), want: &fast.Name},
		{name: "own class kept", stored: []runtime.Object{fast, slow}, claim: pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = &gold }), want: &gold},
		{name: "no default", stored: []runtime.Object{slow}, claim: pvc(nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.store(c.stored...)
			at, err := e.run(e.plugins("DefaultStorageClass"), write{gvr: gvrPVCs, op: adm.Create, obj: c.claim})
			if err != nil {
				t.Fatal(err)
			}
			got := at.Object.(*corev1.PersistentVolumeClaim).Spec.StorageClassName
			if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
				t.Fatalf("storage class %v, want %v", got, c.want)
			}
		})
	}
}

func TestStorageObjectInUseProtection(t *testing.T) {
	e := newEnv(t)
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}}
	cases := []struct {
		name string
		w    write
		want string
	}{
		{name: "claim", w: write{gvr: gvrPVCs, op: adm.Create, obj: pvc(nil)}, want: "kubernetes.io/pvc-protection"},
		{name: "volume", w: write{gvr: gvrPVs, op: adm.Create, obj: pv}, want: "kubernetes.io/pv-protection"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at, err := e.run(e.plugins("StorageObjectInUseProtection"), c.w)
			if err != nil {
				t.Fatal(err)
			}
			if f := at.Object.(metav1.Object).GetFinalizers(); !reflect.DeepEqual(f, []string{c.want}) {
				t.Fatalf("finalizers %v, want %s", f, c.want)
			}
		})
	}
}

func TestPersistentVolumeClaimResize(t *testing.T) {
	yes, no := true, false
	classes := []runtime.Object{
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "grows"}, Provisioner: "x", AllowVolumeExpansion: &yes},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fixed"}, Provisioner: "x", AllowVolumeExpansion: &no},
	}
	bound := func(class string, size string) *corev1.PersistentVolumeClaim {
		return pvc(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.StorageClassName, c.Spec.VolumeName = &class, "pv"
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
			c.Status.Phase = corev1.ClaimBound
		})
	}
	cases := []struct {
		name, class string
		code        int32
		want        string
	}{
		{name: "expandable class", class: "grows"},
		{name: "fixed class", class: "fixed", code: 403,
			want: "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.store(classes...)
			_, err := e.run(e.plugins("PersistentVolumeClaimResize"),
				write{gvr: gvrPVCs, op: adm.Update, obj: bound(c.class, "2Gi"), old: bound(c.class, "1Gi")})
			wantErr(t, err, c.code, c.want)
		})
	}
}

func TestRuntimeClass(t *testing.T) {
	gvisor := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc",
		Overhead:   &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "yes"}}}
	withClass := func(name string) *corev1.Pod {
		return pod("p", func(p *corev1.Pod) { p.Spec.RuntimeClassName = &name })
	}
	cases := []struct {
		name   string
		stored []runtime.Object // in the lister
		live   []runtime.Object // only in etcd (created a moment ago)
		pod    *corev1.Pod
		code   int32
		want   string
	}{
		{name: "overhead and node selector", stored: []runtime.Object{gvisor}, pod: withClass("gvisor")},
		{name: "read fresh through the client", live: []runtime.Object{gvisor}, pod: withClass("gvisor")},
		{name: "unknown class", pod: withClass("kata"), code: 403, want: `pod rejected: RuntimeClass "kata" not found`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.store(c.stored...)
			p := e.plugins("RuntimeClass")
			e.store(c.live...)
			at, err := e.run(p, write{gvr: gvrPods, op: adm.Create, obj: c.pod})
			wantErr(t, err, c.code, c.want)
			if err != nil {
				return
			}
			got := at.Object.(*corev1.Pod)
			if cpu := got.Spec.Overhead[corev1.ResourceCPU]; cpu.String() != "250m" || got.Spec.NodeSelector["sandbox"] != "yes" {
				t.Fatalf("overhead %v node selector %v", got.Spec.Overhead, got.Spec.NodeSelector)
			}
		})
	}
}

func TestDefaultIngressClass(t *testing.T) {
	nginx := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx",
		Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}}, Spec: networkingv1.IngressClassSpec{Controller: "x/nginx"}}
	other := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: networkingv1.IngressClassSpec{Controller: "x/other"}}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "ing", Namespace: "ns"},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "s", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
	cases := []struct {
		name   string
		stored []runtime.Object
		want   string
	}{
		{name: "default set", stored: []runtime.Object{nginx, other}, want: "nginx"},
		{name: "no default", stored: []runtime.Object{other}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.store(c.stored...)
			at, err := e.run(e.plugins("DefaultIngressClass"), write{gvr: gvrIngress, op: adm.Create, obj: ing.DeepCopy()})
			if err != nil {
				t.Fatal(err)
			}
			got := at.Object.(*networkingv1.Ingress).Spec.IngressClassName
			if c.want == "" && got != nil || c.want != "" && (got == nil || *got != c.want) {
				t.Fatalf("ingress class %v, want %q", got, c.want)
			}
		})
	}
}

func TestTaintNodesByCondition(t *testing.T) {
	e := newEnv(t)
	at, err := e.run(e.plugins("TaintNodesByCondition"), write{gvr: gvrNodes, op: adm.Create, obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
	if got := at.Object.(*corev1.Node).Spec.Taints; !reflect.DeepEqual(got, want) {
		t.Fatalf("taints %+v, want %+v", got, want)
	}
}

func TestPodSecurity(t *testing.T) {
	privileged := pod("p", func(p *corev1.Pod) {
		yes := true
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes}
	})
	const violation = `privileged (container "c" must not set securityContext.privileged=true)`
	cases := []struct {
		name     string
		labels   map[string]string
		pod      *corev1.Pod
		code     int32
		want     string
		warnings []string
	}{
		{name: "enforce rejects", labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}, pod: privileged,
			code: 403, want: `pods "p" is forbidden: violates PodSecurity "baseline:latest": ` + violation},
		{name: "warn warns", labels: map[string]string{"pod-security.kubernetes.io/warn": "baseline"}, pod: privileged,
			warnings: []string{`would violate PodSecurity "baseline:latest": ` + violation}},
		{name: "privileged by default", pod: privileged},
		{name: "compliant pod", labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}, pod: pod("p", nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.store(ns("ns", c.labels))
			at, err := e.run(e.plugins("PodSecurity"), write{gvr: gvrPods, op: adm.Create, obj: c.pod})
			wantErr(t, err, c.code, c.want)
			if w := at.Warnings(); !reflect.DeepEqual(w, c.warnings) {
				t.Fatalf("warnings %q, want %q", w, c.warnings)
			}
		})
	}
}

func TestServiceAccount(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns"}}
	cases := []struct {
		name   string
		stored []runtime.Object
		pod    *corev1.Pod
		code   int32
		want   string
		mount  bool
	}{
		{name: "default account and its token", stored: []runtime.Object{sa}, pod: pod("p", nil), mount: true},
		{name: "no automount", stored: []runtime.Object{sa}, pod: pod("p", func(p *corev1.Pod) {
			no := false
			p.Spec.AutomountServiceAccountToken = &no
		})},
		{name: "missing account", pod: pod("p", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "robot" }),
			code: 403, want: `error looking up service account ns/robot: serviceaccount "robot" not found`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.store(c.stored...)
			at, err := e.run(e.plugins("ServiceAccount"), write{gvr: gvrPods, op: adm.Create, obj: c.pod})
			wantErr(t, err, c.code, c.want)
			if err != nil {
				return
			}
			p := at.Object.(*corev1.Pod)
			if p.Spec.ServiceAccountName != "default" || p.Spec.DeprecatedServiceAccount != "default" {
				t.Fatalf("service account %q/%q", p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount)
			}
			mounted := len(p.Spec.Volumes) == 1 && strings.HasPrefix(p.Spec.Volumes[0].Name, "kube-api-access-") &&
				p.Spec.Volumes[0].Projected != nil && len(p.Spec.Containers[0].VolumeMounts) == 1 &&
				p.Spec.Containers[0].VolumeMounts[0].MountPath == "/var/run/secrets/kubernetes.io/serviceaccount"
			if mounted != c.mount {
				t.Fatalf("token mounted %v, want %v: %+v", mounted, c.mount, p.Spec)
			}
		})
	}
}

func TestNodeRestriction(t *testing.T) {
	kubelet := &user.DefaultInfo{Name: "system:node:a", Groups: []string{user.NodesGroup, user.AllAuthenticated}}
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	cases := []struct {
		name string
		w    write
		code int32
		want string
	}{
		{name: "own node", w: write{user: kubelet, gvr: gvrNodes, op: adm.Update, obj: node("a"), old: node("a")}},
		{name: "another node", w: write{user: kubelet, gvr: gvrNodes, op: adm.Update, obj: node("b"), old: node("b")},
			code: 403, want: `node "a" is not allowed to modify node "b"`},
		{name: "not a node", w: write{gvr: gvrNodes, op: adm.Update, obj: node("b"), old: node("b")}},
		{name: "a pod of another node", w: write{user: kubelet, gvr: gvrPods, op: adm.Create,
			obj: pod("mirror", func(p *corev1.Pod) {
				p.Spec.NodeName = "b"
				p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
			})},
			code: 403, want: `node "a" can only create pods with spec.nodeName set to itself`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.store(node("a"), node("b"))
			_, err := e.run(e.plugins("NodeRestriction"), c.w)
			wantErr(t, err, c.code, c.want)
		})
	}
}

// csrPEM returns a PEM certificate request for subject.
func csrPEM(t *testing.T, subject pkix.Name) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func csr(t *testing.T, signer string, subject pkix.Name) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "req"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM(t, subject), SignerName: signer,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}}}
}

func TestCertificates(t *testing.T) {
	const signer = "example.com/signer"
	plain := csr(t, signer, pkix.Name{CommonName: "bob"})
	approved := plain.DeepCopy()
	approved.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	signed := approved.DeepCopy()
	signed.Status.Certificate = []byte("cert")
	cases := []struct {
		name    string
		plugin  string
		allowed string
		w       write
		code    int32
		want    string
	}{
		{name: "approve without permission", plugin: "CertificateApproval",
			w:    write{gvr: gvrCSRs, subresource: "approval", op: adm.Update, obj: approved, old: plain},
			code: 403, want: `user not permitted to approve requests with signerName "example.com/signer"`},
		{name: "approve with permission", plugin: "CertificateApproval", allowed: "alice approve certificates.k8s.io/signers example.com/signer",
			w: write{gvr: gvrCSRs, subresource: "approval", op: adm.Update, obj: approved, old: plain}},
		{name: "sign without permission", plugin: "CertificateSigning",
			w:    write{gvr: gvrCSRs, subresource: "status", op: adm.Update, obj: signed, old: approved},
			code: 403, want: `user not permitted to sign requests with signerName "example.com/signer"`},
		{name: "sign with permission", plugin: "CertificateSigning", allowed: "alice sign certificates.k8s.io/signers example.com/signer",
			w: write{gvr: gvrCSRs, subresource: "status", op: adm.Update, obj: signed, old: approved}},
		{name: "system:masters client certificate", plugin: "CertificateSubjectRestriction",
			w: write{gvr: gvrCSRs, op: adm.Create,
				obj: csr(t, certificatesv1.KubeAPIServerClientSignerName, pkix.Name{CommonName: "eve", Organization: []string{"system:masters"}})},
			code: 403, want: `use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`},
		{name: "other group", plugin: "CertificateSubjectRestriction",
			w: write{gvr: gvrCSRs, op: adm.Create,
				obj: csr(t, certificatesv1.KubeAPIServerClientSignerName, pkix.Name{CommonName: "eve", Organization: []string{"devs"}})}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.allowed[c.allowed] = true
			_, err := e.run(e.plugins(c.plugin), c.w)
			wantErr(t, err, c.code, c.want)
		})
	}
}

func TestClusterTrustBundleAttest(t *testing.T) {
	if !utilfeature.DefaultFeatureGate.Enabled("ClusterTrustBundle") {
		t.Fatal("ClusterTrustBundle is on by default in 1.37")
	}
	if _, ok := newEnv(t).byGVR[gvrBundles]; !ok {
		t.Skip("clustertrustbundles are not served yet (issue 13 part 1)")
	}
	bundle := &certificatesv1beta1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:signer:b"},
		Spec: certificatesv1beta1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: "x"}}
	cases := []struct {
		name, allowed string
		code          int32
		want          string
	}{
		{name: "no attest permission", code: 403, want: `user not permitted to attest for signerName "example.com/signer"`},
		{name: "attest permission", allowed: "alice attest certificates.k8s.io/signers example.com/signer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.allowed[c.allowed] = true
			_, err := e.run(e.plugins("ClusterTrustBundleAttest"), write{gvr: gvrBundles, op: adm.Create, obj: bundle})
			wantErr(t, err, c.code, c.want)
		})
	}
}

func TestPodTopologyLabels(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		corev1.LabelTopologyZone: "z1", corev1.LabelTopologyRegion: "r1", "other": "x"}}}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	e := newEnv(t)
	e.store(node)
	at, err := e.run(e.plugins("PodTopologyLabels"), write{gvr: gvrPods, subresource: "binding",
		kind: corev1.SchemeGroupVersion.WithKind("Binding"), op: adm.Create, obj: binding})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{corev1.LabelTopologyZone: "z1", corev1.LabelTopologyRegion: "r1"}
	if got := at.Object.(*corev1.Binding).Labels; !reflect.DeepEqual(got, want) {
		t.Fatalf("binding labels %v, want %v", got, want)
	}
}

func TestPodResizeValidator(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}
	sized := func(cpu string, gen int64) *corev1.Pod {
		return pod("p", func(p *corev1.Pod) {
			p.Generation, p.Spec.NodeName = gen, "n1"
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		})
	}
	cases := []struct {
		name, cpu string
		code      int32
		want      string
	}{
		{name: "fits", cpu: "500m"},
		{name: "too big", cpu: "2", code: 403, want: `pods "p" is forbidden: node didn't have enough allocatable resources: cpu`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.store(node)
			_, err := e.run(e.plugins("PodResizeValidator"), write{gvr: gvrPods, subresource: "resize", op: adm.Update,
				obj: sized(c.cpu, 2), old: sized("100m", 1)})
			wantErr(t, err, c.code, c.want)
		})
	}
}
