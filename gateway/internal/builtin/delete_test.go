package builtin

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/storage"
)

func TestDelete(t *testing.T) {
	s := newSemantics(t)
	ago := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	inAMinute := metav1.NewTime(time.Now().Add(time.Minute).Truncate(time.Second))
	pod := func(node string, phase corev1.PodPhase, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "u1", ResourceVersion: "5", Generation: 1},
			Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{container()}},
			Status: corev1.PodStatus{Phase: phase}}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	deleting := func(at metav1.Time, grace int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &at, &grace }
	}
	cm := func(finalizers ...string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", UID: "u1", ResourceVersion: "5", Finalizers: finalizers}}
	}
	policy := func(p metav1.DeletionPropagation) *metav1.DeleteOptions {
		return &metav1.DeleteOptions{PropagationPolicy: &p}
	}
	grace := func(g int64) *metav1.DeleteOptions { return &metav1.DeleteOptions{GracePeriodSeconds: &g} }
	type want struct {
		action     storage.DeleteAction
		grace      *int64        // deletionGracePeriodSeconds after an update
		inSeconds  time.Duration // deletionTimestamp ≈ now + this, after an update
		generation int64
		finalizers []string
	}
	tests := []struct {
		name       string
		group, res string
		obj        runtime.Object
		opts       *metav1.DeleteOptions
		want       want
	}{
		{"bound pod: the spec's grace period (default 30)", "", "pods", pod("n1", corev1.PodRunning), nil,
			want{storage.DeleteUpdate, ptr.To[int64](30), 30 * time.Second, 2, nil}},
		{"bound pod: the option's grace period", "", "pods", pod("n1", corev1.PodRunning), grace(7),
			want{storage.DeleteUpdate, ptr.To[int64](7), 7 * time.Second, 2, nil}},
		{"bound pod: negative grace is 1", "", "pods", pod("n1", corev1.PodRunning), grace(-5),
			want{storage.DeleteUpdate, ptr.To[int64](1), time.Second, 2, nil}},
		{"bound pod: grace 0 removes", "", "pods", pod("n1", corev1.PodRunning), grace(0), want{action: storage.DeleteRemove}},
		{"unbound pod removes", "", "pods", pod("", corev1.PodPending), nil, want{action: storage.DeleteRemove}},
		{"succeeded pod removes", "", "pods", pod("n1", corev1.PodSucceeded), nil, want{action: storage.DeleteRemove}},
		{"pending graceful deletion: again keeps", "", "pods", pod("n1", corev1.PodRunning, deleting(inAMinute, 30)), nil, want{action: storage.DeleteKeep}},
		{"pending graceful deletion: longer grace keeps", "", "pods", pod("n1", corev1.PodRunning, deleting(inAMinute, 30)), grace(60), want{action: storage.DeleteKeep}},
		{"pending graceful deletion: shorter grace moves it back", "", "pods", pod("n1", corev1.PodRunning, deleting(inAMinute, 60)), grace(30),
			want{storage.DeleteUpdate, ptr.To[int64](30), 30 * time.Second, 1, nil}},
		{"pending graceful deletion: grace over is 1 from now", "", "pods", pod("n1", corev1.PodRunning, deleting(ago, 30)), grace(10),
			want{storage.DeleteUpdate, ptr.To[int64](1), 0, 1, nil}},
		{"pod with a finalizer, grace 0: marked", "", "pods", pod("n1", corev1.PodRunning, func(p *corev1.Pod) { p.Finalizers = []string{"x/f"} }), grace(0),
			want{storage.DeleteUpdate, ptr.To[int64](0), 0, 2, []string{"x/f"}}},
		{"configmap removes", "", "configmaps", cm(), nil, want{action: storage.DeleteRemove}},
		{"configmap with a finalizer: marked", "", "configmaps", cm("x/f"), nil, want{storage.DeleteUpdate, ptr.To[int64](0), 0, 0, []string{"x/f"}}},
		{"foreground adds its finalizer", "", "configmaps", cm(), policy(metav1.DeletePropagationForeground),
			want{storage.DeleteUpdate, ptr.To[int64](0), 0, 0, []string{metav1.FinalizerDeleteDependents}}},
		{"orphan replaces foreground", "", "configmaps", cm("x", metav1.FinalizerDeleteDependents), policy(metav1.DeletePropagationOrphan),
			want{storage.DeleteUpdate, ptr.To[int64](0), 0, 0, []string{"x", metav1.FinalizerOrphanDependents}}},
		{"background removes orphan and the object", "", "configmaps", cm(metav1.FinalizerOrphanDependents), policy(metav1.DeletePropagationBackground),
			want{action: storage.DeleteRemove}},
		{"no policy keeps orphan", "", "configmaps", cm(metav1.FinalizerOrphanDependents), nil,
			want{storage.DeleteUpdate, ptr.To[int64](0), 0, 0, []string{metav1.FinalizerOrphanDependents}}},
		{"orphanDependents=true", "", "configmaps", cm(), &metav1.DeleteOptions{OrphanDependents: ptr.To(true)},
			want{storage.DeleteUpdate, ptr.To[int64](0), 0, 0, []string{metav1.FinalizerOrphanDependents}}},
		// batch/v1 Jobs orphan their pods by default (the strategy's
		// DefaultGarbageCollectionPolicy); apps/v1 Deployments do not.
		{"job: orphan by default", "batch", "jobs", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "j", UID: "u1", ResourceVersion: "5", Generation: 3}}, nil,
			want{storage.DeleteUpdate, ptr.To[int64](0), 0, 4, []string{metav1.FinalizerOrphanDependents}}},
		{"deployment: background by default", "apps", "deployments", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", UID: "u1", ResourceVersion: "5", Generation: 3}}, nil,
			want{action: storage.DeleteRemove}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := resource(t, tt.group, tt.res)
			var sent *metav1.DeleteOptions
			if tt.opts != nil {
				sent = tt.opts.DeepCopy()
			}
			before := time.Now().Truncate(time.Second)
			out, action, err := s.Delete(context.Background(), res, tt.obj.DeepCopyObject(), tt.opts)
			if err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if tt.opts != nil && !reflect.DeepEqual(sent, tt.opts) {
				t.Errorf("Delete modified the options")
			}
			if action != tt.want.action {
				t.Fatalf("action %d, want %d", action, tt.want.action)
			}
			if action != storage.DeleteUpdate {
				return
			}
			m, err := meta.Accessor(out)
			if err != nil {
				t.Fatal(err)
			}
			if !ptr.Equal(m.GetDeletionGracePeriodSeconds(), tt.want.grace) {
				t.Errorf("deletionGracePeriodSeconds %v, want %v", ptr.Deref(m.GetDeletionGracePeriodSeconds(), -1), *tt.want.grace)
			}
			dt := m.GetDeletionTimestamp()
			if dt == nil {
				t.Fatal("no deletionTimestamp")
			}
			if lo, hi := before.Add(tt.want.inSeconds), time.Now().Add(tt.want.inSeconds+time.Second); dt.Time.Before(lo) || dt.Time.After(hi) {
				t.Errorf("deletionTimestamp %v, want between %v and %v", dt, lo, hi)
			}
			if m.GetGeneration() != tt.want.generation {
				t.Errorf("generation %d, want %d", m.GetGeneration(), tt.want.generation)
			}
			if !slices.Equal(m.GetFinalizers(), tt.want.finalizers) && (len(m.GetFinalizers())+len(tt.want.finalizers) > 0) {
				t.Errorf("finalizers %q, want %q", m.GetFinalizers(), tt.want.finalizers)
			}
			if out.GetObjectKind().GroupVersionKind() != res.GVK() {
				t.Errorf("answered kind %v, want %v", out.GetObjectKind().GroupVersionKind(), res.GVK())
			}
		})
	}
}

func TestDeletePreconditions(t *testing.T) {
	s := newSemantics(t)
	cms := resource(t, "", "configmaps")
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", UID: "u1", ResourceVersion: "5"}}
	f := func(name string, pre metav1.Preconditions, wantConflict bool) {
		t.Run(name, func(t *testing.T) {
			_, action, err := s.Delete(context.Background(), cms, obj.DeepCopy(), &metav1.DeleteOptions{Preconditions: &pre})
			if got := apierrors.IsConflict(err); got != wantConflict {
				t.Fatalf("conflict %v (%v), want %v", got, err, wantConflict)
			}
			if !wantConflict && action != storage.DeleteRemove {
				t.Errorf("action %d", action)
			}
		})
	}
	f("matching", metav1.Preconditions{UID: ptr.To(types.UID("u1")), ResourceVersion: ptr.To("5")}, false)
	f("other uid", metav1.Preconditions{UID: ptr.To(types.UID("u2"))}, true)
	f("other resourceVersion", metav1.Preconditions{ResourceVersion: ptr.To("4")}, true)
}

// TestDeleteNamespace: the namespace REST's two steps.
func TestDeleteNamespace(t *testing.T) {
	s := newSemantics(t)
	nss := resource(t, "", "namespaces")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u1", ResourceVersion: "5"},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}}
	out, action, err := s.Delete(context.Background(), nss, ns.DeepCopy(), nil)
	if err != nil || action != storage.DeleteUpdate {
		t.Fatalf("first delete: %d, %v", action, err)
	}
	got := out.(*corev1.Namespace)
	if got.DeletionTimestamp == nil || got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("first delete: %v, phase %q", got.DeletionTimestamp, got.Status.Phase)
	}
	// Again while spec.finalizers remain: kept.
	if _, action, err := s.Delete(context.Background(), nss, got.DeepCopy(), nil); err != nil || action != storage.DeleteKeep {
		t.Errorf("delete while finalizing: %d, %v", action, err)
	}
	// Once the namespace controller emptied them: removed.
	got.Spec.Finalizers = nil
	if _, action, err := s.Delete(context.Background(), nss, got.DeepCopy(), nil); err != nil || action != storage.DeleteRemove {
		t.Errorf("final delete: %d, %v", action, err)
	}
	// The uid precondition is upstream's namespace conflict.
	_, _, err = s.Delete(context.Background(), nss, ns.DeepCopy(), &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("u2"))}})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "Precondition failed: UID in precondition") {
		t.Errorf("uid precondition: %v", err)
	}
}

// TestReturnDeletedObjectMatchesUpstream reads upstream's registry stores
// (pkg/registry/<group>/<resource>/storage of the linked k8s.io/kubernetes,
// apiextensions-apiserver's beside its CRD strategy)
// for ReturnDeletedObject: true, for the package of each served
// resource's strategy, and compares with kgate's table.
func TestReturnDeletedObjectMatchesUpstream(t *testing.T) {
	moduleDir := func(mod string) string {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
		if err != nil {
			t.Fatalf("cannot find the %s module: %v", mod, err)
		}
		return strings.TrimSpace(string(out))
	}
	kube, apiext := moduleDir("k8s.io/kubernetes"), moduleDir("k8s.io/apiextensions-apiserver")
	s := newSemantics(t)
	checked := 0
	for gr, st := range s.strategies {
		typ := reflect.TypeOf(st.main)
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		var store string
		if pkg, ok := strings.CutPrefix(typ.PkgPath(), "k8s.io/kubernetes/"); ok {
			store = filepath.Join(kube, pkg, "storage")
		} else if pkg, ok := strings.CutPrefix(typ.PkgPath(), "k8s.io/apiextensions-apiserver/"); ok {
			// apiextensions-apiserver keeps the store beside the strategy.
			store = filepath.Join(apiext, pkg)
		} else if pkg, ok := strings.CutPrefix(typ.PkgPath(), "k8s.io/kube-aggregator/"); ok {
			// kube-aggregator keeps the APIService store in etcd/ beside the strategy.
			store = filepath.Join(moduleDir("k8s.io/kube-aggregator"), pkg, "etcd")
		} else {
			t.Fatalf("%v: strategy %v is neither k8s.io/kubernetes's, apiextensions-apiserver's nor kube-aggregator's", gr, typ)
		}
		upstream := returnsDeleted(t, store)
		if got := returnDeletedObject[gr]; got != upstream {
			t.Errorf("%v: kgate returns the deleted object %v, upstream's store (%s) %v", gr, got, store, upstream)
		}
		checked++
	}
	if checked < 30 {
		t.Errorf("checked %d resources, want every served one", checked)
	}
}

// returnsDeleted reports whether a Go file of the package in dir sets
// ReturnDeletedObject: true in a composite literal.
func returnsDeleted(t *testing.T, dir string) bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no upstream storage package in %s: %v", dir, err)
	}
	found := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			k, ok1 := kv.Key.(*ast.Ident)
			v, ok2 := kv.Value.(*ast.Ident)
			if ok1 && ok2 && k.Name == "ReturnDeletedObject" && v.Name == "true" {
				found = true
			}
			return true
		})
	}
	return found
}
