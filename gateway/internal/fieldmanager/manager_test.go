package fieldmanager_test

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/fieldmanager"
	"github.com/kgate/kgate/storage/registry"
)

// The type converter is built once for the test binary, as the gateway
// builds it once per process.
var (
	shared    sync.Once
	sharedM   *fieldmanager.Managers
	sharedErr error
)

func managers(t testing.TB) *fieldmanager.Managers {
	t.Helper()
	shared.Do(func() {
		sem, err := builtin.New(registry.Builtin())
		if err != nil {
			sharedErr = err
			return
		}
		tc, err := fieldmanager.NewTypeConverter(sem.Scheme())
		if err != nil {
			sharedErr = err
			return
		}
		sharedM, sharedErr = fieldmanager.New(fieldmanager.Config{Scheme: sem.Scheme(), TypeConverter: tc, ResetFields: sem.ResetFields})
	})
	if sharedErr != nil {
		t.Fatalf("cannot make the field managers: %v", sharedErr)
	}
	return sharedM
}

func resource(t testing.TB, group, name string) *registry.Resource {
	t.Helper()
	for _, r := range registry.Builtin() {
		if r.Group == group && r.Resource == name {
			return &r
		}
	}
	t.Fatalf("no built-in %s in group %q", name, group)
	return nil
}

// owners describes managedFields as "manager operation apiVersion:
// fields" lines, sorted; fields are the leaf paths of fieldsV1.
func owners(t testing.TB, obj runtime.Object) []string {
	t.Helper()
	var entries []metav1.ManagedFieldsEntry
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		entries = o.ManagedFields
	case *appsv1.Deployment:
		entries = o.ManagedFields
	case *autoscalingv1.Scale:
		entries = o.ManagedFields
	default:
		t.Fatalf("owners of %T", obj)
	}
	return describe(t, entries)
}

func describe(t testing.TB, entries []metav1.ManagedFieldsEntry) []string {
	t.Helper()
	var out []string
	for _, e := range entries {
		var tree map[string]any
		if e.FieldsV1 != nil {
			if err := json.Unmarshal(e.FieldsV1.Raw, &tree); err != nil {
				t.Fatalf("fieldsV1 of %s: %v", e.Manager, err)
			}
		}
		var leaves []string
		var walk func(prefix string, m map[string]any)
		walk = func(prefix string, m map[string]any) {
			for k, v := range m {
				if k == "." {
					continue
				}
				p := prefix + "." + strings.TrimPrefix(k, "f:")
				sub, _ := v.(map[string]any)
				if len(sub) == 0 || (len(sub) == 1 && sub["."] != nil) {
					leaves = append(leaves, p)
					continue
				}
				walk(p, sub)
			}
		}
		walk("", tree)
		sort.Strings(leaves)
		out = append(out, e.Manager+" "+string(e.Operation)+" "+e.APIVersion+": "+strings.Join(leaves, ","))
	}
	sort.Strings(out)
	return out
}

func same(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

const cmA1 = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  namespace: ns
data:
  a: "1"
`

func cmWith(data map[string]string) string {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm", "namespace": "ns"},
		"data":     data,
	})
	return string(b)
}

func TestApply(t *testing.T) {
	m := managers(t)
	cms := resource(t, "", "configmaps")
	applied := func(t *testing.T, live runtime.Object, patch, manager string, force bool) runtime.Object {
		t.Helper()
		out, err := m.Apply(cms, "", live, []byte(patch), manager, force)
		if err != nil {
			t.Fatalf("apply by %s: %v", manager, err)
		}
		return out
	}
	type step struct {
		patch   string
		manager string
		force   bool
	}
	tests := []struct {
		name  string
		steps []step // applied in order; the last one is checked
		// want: data and owners after the last step; or its conflict.
		wantData     map[string]string
		wantOwners   []string
		wantConflict []string // causes' fields
		wantMessage  string
	}{{
		name:       "apply creates",
		steps:      []step{{cmA1, "alice", false}},
		wantData:   map[string]string{"a": "1"},
		wantOwners: []string{"alice Apply v1: .data.a"},
	}, {
		name:       "re-apply changes the value and keeps one entry",
		steps:      []step{{cmA1, "alice", false}, {cmWith(map[string]string{"a": "2", "b": "x"}), "alice", false}},
		wantData:   map[string]string{"a": "2", "b": "x"},
		wantOwners: []string{"alice Apply v1: .data.a,.data.b"},
	}, {
		name:       "re-apply without a field removes it",
		steps:      []step{{cmWith(map[string]string{"a": "1", "b": "x"}), "alice", false}, {cmA1, "alice", false}},
		wantData:   map[string]string{"a": "1"},
		wantOwners: []string{"alice Apply v1: .data.a"},
	}, {
		name:       "a second manager applying the same value shares the field",
		steps:      []step{{cmA1, "alice", false}, {cmA1, "bob", false}},
		wantData:   map[string]string{"a": "1"},
		wantOwners: []string{"alice Apply v1: .data.a", "bob Apply v1: .data.a"},
	}, {
		name:         "a second manager changing the field conflicts",
		steps:        []step{{cmA1, "alice", false}, {cmWith(map[string]string{"a": "2"}), "bob", false}},
		wantConflict: []string{".data.a"},
		wantMessage:  `Apply failed with 1 conflict: conflict with "alice": .data.a`,
	}, {
		name:       "force takes the field",
		steps:      []step{{cmWith(map[string]string{"a": "1", "b": "x"}), "alice", false}, {cmWith(map[string]string{"a": "2"}), "bob", true}},
		wantData:   map[string]string{"a": "2", "b": "x"},
		wantOwners: []string{"alice Apply v1: .data.b", "bob Apply v1: .data.a"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var live runtime.Object
			for _, s := range tt.steps[:len(tt.steps)-1] {
				live = applied(t, live, s.patch, s.manager, s.force)
			}
			last := tt.steps[len(tt.steps)-1]
			out, err := m.Apply(cms, "", live, []byte(last.patch), last.manager, last.force)
			if tt.wantConflict != nil {
				var se *apierrors.StatusError
				if !errors.As(err, &se) || !apierrors.IsConflict(err) {
					t.Fatalf("apply: got %v (%v), want a 409 Conflict", out, err)
				}
				var fields []string
				for _, c := range se.ErrStatus.Details.Causes {
					if c.Type != metav1.CauseTypeFieldManagerConflict {
						t.Errorf("cause type %q, want %q", c.Type, metav1.CauseTypeFieldManagerConflict)
					}
					fields = append(fields, c.Field)
				}
				if !same(fields, tt.wantConflict) {
					t.Errorf("conflicting fields %v, want %v", fields, tt.wantConflict)
				}
				if se.ErrStatus.Message != tt.wantMessage {
					t.Errorf("message %q, want %q", se.ErrStatus.Message, tt.wantMessage)
				}
				return
			}
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			cm, ok := out.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("apply returned %T, want a v1 ConfigMap", out)
			}
			if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Name != "cm" || cm.Namespace != "ns" {
				t.Errorf("apply returned %s %s %s/%s", cm.APIVersion, cm.Kind, cm.Namespace, cm.Name)
			}
			if got, _ := json.Marshal(cm.Data); string(got) != mustJSON(tt.wantData) {
				t.Errorf("data %s, want %s", got, mustJSON(tt.wantData))
			}
			if got := owners(t, out); !same(got, tt.wantOwners) {
				t.Errorf("owners\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.wantOwners, "\n"))
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestApplyBadPatch(t *testing.T) {
	m := managers(t)
	cms := resource(t, "", "configmaps")
	for _, tt := range []struct {
		name, patch string
		want        func(error) bool
	}{
		{"not YAML", "data: [", func(err error) bool { return errors.Is(err, fieldmanager.ErrDecode) }},
		{"managedFields set", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","managedFields":[{"manager":"x"}]}}`, apierrors.IsBadRequest},
		{"another version", `{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"cm"}}`, apierrors.IsBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := m.Apply(cms, "", nil, []byte(tt.patch), "alice", false)
			if err == nil || !tt.want(err) {
				t.Fatalf("apply: got %v, %v", out, err)
			}
		})
	}
}

func configMap(data map[string]string, entries []metav1.ManagedFieldsEntry) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns", ManagedFields: entries},
		Data:       data,
	}
}

func TestUpdate(t *testing.T) {
	m := managers(t)
	cms := resource(t, "", "configmaps")
	created, err := m.Update(cms, "", nil, configMap(map[string]string{"a": "1"}, nil), "creator")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	live := created.(*corev1.ConfigMap)
	if got, want := owners(t, live), []string{"creator Update v1: .data.a"}; !same(got, want) {
		t.Fatalf("after create: owners %v, want %v", got, want)
	}
	tests := []struct {
		name    string
		next    *corev1.ConfigMap
		manager string
		want    []string
	}{{
		name:    "a new field is owned by the updater",
		next:    configMap(map[string]string{"a": "1", "b": "2"}, nil),
		manager: "kubectl-edit",
		want:    []string{"creator Update v1: .data.a", "kubectl-edit Update v1: .data.b"},
	}, {
		// The creator keeps the map itself.
		name:    "a changed field moves to the updater",
		next:    configMap(map[string]string{"a": "9"}, nil),
		manager: "kubectl-edit",
		want:    []string{"creator Update v1: .data", "kubectl-edit Update v1: .data.a"},
	}, {
		name:    "managedFields left out keep the live ones",
		next:    configMap(map[string]string{"a": "1"}, nil),
		manager: "other",
		want:    []string{"creator Update v1: .data.a"},
	}, {
		name:    "an empty list resets them",
		next:    configMap(map[string]string{"a": "1"}, []metav1.ManagedFieldsEntry{}),
		manager: "other",
		want:    nil,
	}, {
		name:    "managedFields sent replace the live ones",
		next:    configMap(map[string]string{"a": "1"}, mustEntries(t, m, cms, "someone")),
		manager: "other",
		want:    []string{"someone Update v1: .data.a"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := m.Update(cms, "", live.DeepCopy(), tt.next, tt.manager)
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if got := owners(t, out); !same(got, tt.want) {
				t.Errorf("owners\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// mustEntries returns the managedFields of a ConfigMap {a: 1} created by
// manager.
func mustEntries(t testing.TB, m *fieldmanager.Managers, cms *registry.Resource, manager string) []metav1.ManagedFieldsEntry {
	out, err := m.Update(cms, "", nil, configMap(map[string]string{"a": "1"}, nil), manager)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return out.(*corev1.ConfigMap).ManagedFields
}

// The status subresource's manager does not own what its strategy resets
// (a Deployment's spec), as upstream's reset fields say.
func TestStatusResetFields(t *testing.T) {
	m := managers(t)
	deps := resource(t, "apps", "deployments")
	d := func(replicas, ready int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"},
			Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
			Status:     appsv1.DeploymentStatus{ReadyReplicas: ready},
		}
	}
	live, err := m.Update(deps, "", nil, d(1, 0), "creator")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	next := d(5, 3)
	next.ManagedFields = live.(*appsv1.Deployment).ManagedFields
	out, err := m.Update(deps, "status", live, next, "controller")
	if err != nil {
		t.Fatalf("status update: %v", err)
	}
	want := []string{"controller Update apps/v1: .status.readyReplicas", "creator Update apps/v1: .spec.replicas"}
	if got := owners(t, out); !same(got, want) {
		t.Errorf("owners\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The scale subresource's entries move between a Deployment and its Scale
// as upstream's scale REST moves them.
func TestScale(t *testing.T) {
	m := managers(t)
	deps := resource(t, "apps", "deployments")
	const dep = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"ns"},
"spec":{"replicas":2,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},
"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}`
	live, err := m.Apply(deps, "", nil, []byte(dep), "alice", false)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	parent := live.(*appsv1.Deployment)
	sf, err := fieldmanager.NewScaleFields(deps, parent.ManagedFields)
	if err != nil {
		t.Fatal(err)
	}
	scaleEntries, err := sf.ToScale()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describe(t, scaleEntries), []string{"alice Apply autoscaling/v1: .spec.replicas"}; !same(got, want) {
		t.Fatalf("scale owners %v, want %v", got, want)
	}
	cur := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", ManagedFields: scaleEntries},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 2},
	}
	// A client changing the replicas through the scale without apply
	// conflicts with nobody and takes them.
	next := cur.DeepCopy()
	next.ManagedFields = nil
	next.Spec.Replicas = 5
	scaled, err := m.Update(deps, "scale", cur, next, "hpa")
	if err != nil {
		t.Fatalf("scale update: %v", err)
	}
	entries, err := sf.ToParent(scaled.(*autoscalingv1.Scale).ManagedFields)
	if err != nil {
		t.Fatal(err)
	}
	got := describe(t, entries)
	if len(got) != 2 || !strings.HasPrefix(got[1], "hpa Update apps/v1: .spec.replicas") || strings.Contains(got[0], "replicas") {
		t.Errorf("parent owners after scaling:\n%s", strings.Join(got, "\n"))
	}
	// Alice re-applying her replicas now conflicts with the scaler.
	parent.ManagedFields = entries
	parent.Spec.Replicas = ptr(int32(5))
	_, err = m.Apply(deps, "", parent, []byte(dep), "alice", false)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "hpa"`) || !strings.Contains(err.Error(), ".spec.replicas") {
		t.Errorf("re-apply after scaling: %v, want a conflict with hpa on .spec.replicas", err)
	}
}

func ptr[T any](v T) *T { return &v }

// Upgrading from client-side apply: the fields kubectl's client-side
// apply owns, recorded in the last-applied annotation, do not conflict
// with kubectl's first server-side apply, as upstream's last-applied
// manager resolves them; without the annotation they do.
func TestClientSideApplyUpgrade(t *testing.T) {
	m := managers(t)
	cms := resource(t, "", "configmaps")
	for _, tt := range []struct {
		name         string
		annotation   bool
		wantConflict bool
	}{
		{"with last-applied", true, false},
		{"without last-applied", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := configMap(map[string]string{"a": "1"}, nil)
			if tt.annotation {
				cm.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: cmWith(map[string]string{"a": "1"})}
			}
			live, err := m.Update(cms, "", nil, cm, "kubectl-client-side-apply")
			if err != nil {
				t.Fatalf("client-side apply: %v", err)
			}
			out, err := m.Apply(cms, "", live, []byte(cmWith(map[string]string{"a": "2"})), "kubectl", false)
			if tt.wantConflict {
				if !apierrors.IsConflict(err) {
					t.Fatalf("server-side apply: %v, want a conflict", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("server-side apply: %v", err)
			}
			if got := out.(*corev1.ConfigMap).Data["a"]; got != "2" {
				t.Errorf("data.a = %q, want 2", got)
			}
		})
	}
}

func TestName(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, tt := range []struct{ fieldManager, userAgent, want string }{
		{"helm", "kubectl/v1.37.2 (linux/amd64)", "helm"},
		{"", "kubectl/v1.37.2 (linux/amd64) kubernetes/abc", "kubectl"},
		{"", "kube-controller-manager/v1.37.2 (linux/amd64)/system:serviceaccount", "kube-controller-manager"},
		{"", "no-slash", "no-slash"},
		{"", "bad\x00\x07name/1", "badname"},
		{"", long + "/1", long[:128]},
		{"", "", ""},
	} {
		if got := fieldmanager.Name(tt.fieldManager, tt.userAgent); got != tt.want {
			t.Errorf("Name(%q, %q) = %q, want %q", tt.fieldManager, tt.userAgent, got, tt.want)
		}
	}
}

// Every stored built-in kind has a model in the type converter, so every
// write's managedFields are kept: an Update of an empty object of each
// kind (and of autoscaling/v1 Scale) gives an entry.
func TestEveryKindHasAModel(t *testing.T) {
	m := managers(t)
	sem, err := builtin.New(registry.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range registry.Builtin() {
		if _, err := sem.ResetFields(&r, ""); errors.Is(err, builtin.ErrUnknown) {
			continue // never stored: the review APIs, bindings
		}
		t.Run(r.Group+"/"+r.Resource, func(t *testing.T) {
			obj, err := sem.Scheme().New(r.GVK())
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.Update(&r, "", nil, withLabel(t, obj), "test")
			if err != nil {
				t.Fatal(err)
			}
			mo, err := meta.Accessor(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := mo.GetManagedFields(); len(got) != 1 || got[0].Manager != "test" || got[0].APIVersion != r.GVK().GroupVersion().String() {
				t.Errorf("managedFields %+v, want one entry of test in %s", got, r.GVK().GroupVersion())
			}
		})
	}
}

// withLabel gives obj a label, something for its manager to own.
func withLabel(t *testing.T, obj runtime.Object) runtime.Object {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	m.SetName("x")
	m.SetLabels(map[string]string{"a": "b"})
	return obj
}
