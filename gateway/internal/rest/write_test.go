package rest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/storage"
)

func TestCreate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		uri       string
		body      string
		ctype     string
		wantCode  int
		wantAdm   []string
		wantStore bool
	}{{
		name: "json", uri: "/api/v1/namespaces/ns/configmaps",
		body:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}`,
		wantCode: 201, wantAdm: []string{"admit CREATE ns/c dry=false", "validate CREATE", "finish ok"}, wantStore: true,
	}, {
		name: "yaml", uri: "/api/v1/namespaces/ns/configmaps", ctype: "application/yaml",
		body:     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n",
		wantCode: 201, wantAdm: []string{"admit CREATE ns/c dry=false", "validate CREATE", "finish ok"}, wantStore: true,
	}, {
		name: "dry run", uri: "/api/v1/namespaces/ns/configmaps?dryRun=All",
		body:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
		wantCode: 201, wantAdm: []string{"admit CREATE ns/c dry=true", "validate CREATE"},
	}, {
		name: "unknown dry run", uri: "/api/v1/namespaces/ns/configmaps?dryRun=Some",
		body:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
		wantCode: 422,
	}, {
		name: "namespace mismatch", uri: "/api/v1/namespaces/ns/configmaps",
		body:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"other"}}`,
		wantCode: 400,
	}, {
		name: "kind mismatch", uri: "/api/v1/namespaces/ns/configmaps",
		body:     `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"c"}}`,
		wantCode: 400,
	}, {
		name: "invalid name", uri: "/api/v1/namespaces/ns/configmaps",
		body:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_Valid"}}`,
		wantCode: 422, wantAdm: []string{"admit CREATE ns/Not_Valid dry=false"},
	}, {
		name: "empty body", uri: "/api/v1/namespaces/ns/configmaps", body: "",
		wantCode: 400,
	}, {
		name: "malformed json", uri: "/api/v1/namespaces/ns/configmaps", body: `{"apiVersion":`,
		wantCode: 400,
	}, {
		name: "unknown field strict", uri: "/api/v1/namespaces/ns/configmaps?fieldValidation=Strict",
		body:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"nope":1}`,
		wantCode: 400,
	}, {
		name: "unsupported content type", uri: "/api/v1/namespaces/ns/configmaps", ctype: "text/plain",
		body: `x`, wantCode: http.StatusUnsupportedMediaType,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var hdr []string
			if tc.ctype != "" {
				hdr = []string{"Content-Type", tc.ctype}
			}
			body := []byte(tc.body)
			if tc.body == "" {
				body = []byte{}
			}
			r := e.do("POST", tc.uri, body, hdr...)
			if r.code != tc.wantCode {
				t.Fatalf("code %d, want %d (%+v)", r.code, tc.wantCode, r.status)
			}
			if got := e.adm.got(); !slices.Equal(got, tc.wantAdm) {
				t.Errorf("admission %q, want %q", got, tc.wantAdm)
			}
			if e.store.called("create") != tc.wantStore {
				t.Errorf("stored %v, want %v", e.store.called("create"), tc.wantStore)
			}
			if tc.wantCode == 201 {
				var cm corev1.ConfigMap
				r.decode(t, &cm)
				if cm.Name != "c" || cm.Namespace != "ns" {
					t.Errorf("answered %s/%s", cm.Namespace, cm.Name)
				}
				if tc.wantStore && (cm.ResourceVersion == "" || cm.UID == "") {
					t.Errorf("stored object without rv or uid: %+v", cm.ObjectMeta)
				}
				if !tc.wantStore && e.stored(configmapsGVR, "ns", "c") != nil {
					t.Error("dry run stored")
				}
			}
		})
	}
}

func TestCreateErrors(t *testing.T) {
	body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`)
	t.Run("already exists", func(t *testing.T) {
		e := newEnv(t)
		e.seed(configmapsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}})
		r := e.do("POST", "/api/v1/namespaces/ns/configmaps", body)
		if r.code != 409 || r.reason() != metav1.StatusReasonAlreadyExists || r.status.Details.Name != "c" {
			t.Errorf("got %d %s %+v", r.code, r.reason(), r.status.Details)
		}
		// Admission learns the write failed (a quota charge is undone).
		if got := e.adm.got(); got[len(got)-1] != "finish error" {
			t.Errorf("admission %q", got)
		}
	})
	t.Run("admission refuses", func(t *testing.T) {
		e := newEnv(t)
		e.adm.validateErr = fmt.Errorf("denied: %w", storage.ErrConflict)
		r := e.do("POST", "/api/v1/namespaces/ns/configmaps", body)
		if r.code != 409 || e.store.called("create") {
			t.Errorf("got %d, stored %v", r.code, e.store.called("create"))
		}
	})
	t.Run("mutation and warnings", func(t *testing.T) {
		e := newEnv(t)
		e.adm.label, e.adm.warning = "admitted", `say "hi"`
		r := e.do("POST", "/api/v1/namespaces/ns/configmaps", body)
		var cm corev1.ConfigMap
		r.decode(t, &cm)
		if cm.Labels["admitted"] != "yes" {
			t.Error("the mutating phase's change was not stored")
		}
		if w := string(r.header.Peek("Warning")); w != `299 - "say \"hi\""` {
			t.Errorf("Warning %q", w)
		}
	})
	t.Run("unavailable", func(t *testing.T) {
		e := newEnv(t)
		e.store.createErr = fmt.Errorf("cannot create: %w", storage.ErrUnavailable)
		if r := e.do("POST", "/api/v1/namespaces/ns/configmaps", body); r.code != 503 {
			t.Errorf("got %d", r.code)
		}
	})
}

// TestCreateGenerateName: a name is generated from generateName before
// validation, and generated again (and the object validated again) when
// storage finds it taken, at most generateNameAttempts times, as
// upstream's registry store does.
func TestCreateGenerateName(t *testing.T) {
	body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"gen-"}}`)
	for _, tc := range []struct {
		name     string
		clashes  int
		wantCode int
	}{
		{"free", 0, 201},
		{"taken twice", 2, 201},
		{"always taken", generateNameAttempts, 409},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.store.clashes = tc.clashes
			r := e.do("POST", "/api/v1/namespaces/ns/configmaps", body)
			if r.code != tc.wantCode {
				t.Fatalf("code %d, want %d (%+v)", r.code, tc.wantCode, r.status)
			}
			tried := e.store.tried
			if want := min(tc.clashes+1, generateNameAttempts); len(tried) != want {
				t.Fatalf("storage saw %d creates %q, want %d", len(tried), tried, want)
			}
			for i, n := range tried {
				if !strings.HasPrefix(n, "gen-") || len(n) != len("gen-")+5 || slices.Index(tried, n) != i {
					t.Errorf("attempt %d named %q: want a new name gen-xxxxx each time (%q)", i, n, tried)
				}
			}
			if tc.wantCode == 409 {
				if r.reason() != metav1.StatusReasonAlreadyExists {
					t.Errorf("reason %s", r.reason())
				}
				return
			}
			var cm corev1.ConfigMap
			r.decode(t, &cm)
			if cm.Name != tried[len(tried)-1] || cm.GenerateName != "gen-" {
				t.Errorf("answered %q (generateName %q), want %q", cm.Name, cm.GenerateName, tried[len(tried)-1])
			}
		})
	}
}

func TestCreatePodPrepared(t *testing.T) {
	e := newEnv(t)
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},
		"spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Running"}}`
	r := e.do("POST", "/api/v1/namespaces/ns/pods", []byte(body))
	if r.code != 201 {
		t.Fatalf("%d %v", r.code, r.status)
	}
	// Upstream's pod strategy: the status a client sends is dropped.
	created := e.store.created.(*corev1.Pod)
	if created.Status.Phase != corev1.PodPending || created.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("create stored %+v %+v", created.ObjectMeta, created.Status)
	}
	// Defaults were applied before storage.
	if created.Spec.RestartPolicy != corev1.RestartPolicyAlways || created.Spec.Containers[0].TerminationMessagePath == "" {
		t.Errorf("pod not defaulted: %+v", created.Spec)
	}
	// Upstream refuses a create that sets the resourceVersion (its storage
	// does: the message is etcd3's); kgate answers 400, never 500.
	withRV := strings.Replace(body, `"name":"p"`, `"name":"q","resourceVersion":"5"`, 1)
	if r := e.do("POST", "/api/v1/namespaces/ns/pods", []byte(withRV)); r.code != 400 || !strings.Contains(r.status.Message, "resourceVersion should not be set on objects to be created") {
		t.Errorf("create with a resourceVersion: %d %v", r.code, r.status)
	}
}

func TestUpdate(t *testing.T) {
	cm := func(rv, value string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","resourceVersion":%q},"data":{"a":%q}}`, rv, value)
	}
	for _, tc := range []struct {
		name      string
		uri       string
		body      []byte
		conflicts int
		wantCode  int
		wantPre   int64
		wantAdm   []string
		wantValue string
	}{
		{"unconditional", "/api/v1/namespaces/ns/configmaps/c", cm("", "new"), 0, 200, 0,
			[]string{"admit UPDATE ns/c dry=false", "validate UPDATE", "finish ok"}, "new"},
		{"at the current version", "/api/v1/namespaces/ns/configmaps/c", cm("101", "new"), 0, 200, 101,
			[]string{"admit UPDATE ns/c dry=false", "validate UPDATE", "finish ok"}, "new"},
		{"at an old version", "/api/v1/namespaces/ns/configmaps/c", cm("50", "new"), 0, 409, 50, nil, "old"},
		{"bad version", "/api/v1/namespaces/ns/configmaps/c", cm("x", "new"), 0, 422, 0, nil, "old"},
		{"name mismatch", "/api/v1/namespaces/ns/configmaps/other", cm("", "new"), 0, 400, 0, nil, "old"},
		// Storage retries after a conflict: admission's first attempt is
		// finished (its charge undone) before the second one is stored.
		{"retried", "/api/v1/namespaces/ns/configmaps/c", cm("", "new"), 1, 200, 0,
			[]string{"admit UPDATE ns/c dry=false", "validate UPDATE", "finish retried", "admit UPDATE ns/c dry=false", "validate UPDATE", "finish ok"}, "new"},
		{"dry run", "/api/v1/namespaces/ns/configmaps/c?dryRun=All", cm("", "new"), 0, 200, 0,
			[]string{"admit UPDATE ns/c dry=true", "validate UPDATE"}, "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed(configmapsGVR, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: map[string]string{"a": "old"}})
			e.store.conflicts = tc.conflicts
			r := e.do("PUT", tc.uri, tc.body)
			if r.code != tc.wantCode {
				t.Fatalf("code %d, want %d (%+v)", r.code, tc.wantCode, r.status)
			}
			if e.store.lastPre.ResourceVersion != tc.wantPre {
				t.Errorf("precondition %d, want %d", e.store.lastPre.ResourceVersion, tc.wantPre)
			}
			if tc.wantAdm != nil {
				if got := e.adm.got(); !slices.Equal(got, tc.wantAdm) {
					t.Errorf("admission\n got %q\nwant %q", got, tc.wantAdm)
				}
			}
			stored := e.stored(configmapsGVR, "ns", "c").(*corev1.ConfigMap)
			if stored.Data["a"] != tc.wantValue {
				t.Errorf("stored %q, want %q", stored.Data["a"], tc.wantValue)
			}
			if tc.wantCode == 200 {
				var got corev1.ConfigMap
				r.decode(t, &got)
				if got.Data["a"] != "new" || got.UID != "uid-c" {
					t.Errorf("answered %+v", got)
				}
			}
		})
	}
}

func TestUpdateStatusSubresource(t *testing.T) {
	e := newEnv(t)
	e.seed(deploymentsGVR, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", Labels: map[string]string{"v": "1"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
	})
	body := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{"v":"2"}},
		"spec":{"replicas":9,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}},"status":{"replicas":5}}`
	r := e.do("PUT", "/apis/apps/v1/namespaces/ns/deployments/d/status", []byte(body))
	if r.code != 200 {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	d := e.stored(deploymentsGVR, "ns", "d").(*appsv1.Deployment)
	if d.Status.Replicas != 5 || *d.Spec.Replicas != 2 || d.Labels["v"] != "1" {
		t.Errorf("status update stored replicas %d spec %d labels %v", d.Status.Replicas, *d.Spec.Replicas, d.Labels)
	}
	// And the main resource keeps the status.
	body = strings.Replace(body, `"status":{"replicas":5}`, `"status":{"replicas":77}`, 1)
	if r := e.do("PUT", "/apis/apps/v1/namespaces/ns/deployments/d", []byte(body)); r.code != 200 {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	d = e.stored(deploymentsGVR, "ns", "d").(*appsv1.Deployment)
	if d.Status.Replicas != 5 || *d.Spec.Replicas != 9 {
		t.Errorf("main update stored status %d spec %d", d.Status.Replicas, *d.Spec.Replicas)
	}
	// Verbs a subresource does not serve.
	if r := e.do("DELETE", "/apis/apps/v1/namespaces/ns/deployments/d/status", nil); r.code != http.StatusMethodNotAllowed {
		t.Errorf("delete status: %d", r.code)
	}
	if r := e.do("GET", "/api/v1/namespaces/ns/configmaps/c/status", nil); r.code != 404 {
		t.Errorf("configmaps/status: %d", r.code)
	}
}

func TestPatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ctype    string
		body     string
		wantCode int
		check    func(t *testing.T, p *corev1.Pod)
	}{
		{"merge", "application/merge-patch+json", `{"metadata":{"labels":{"b":"2","a":null}}}`, 200, func(t *testing.T, p *corev1.Pod) {
			if p.Labels["b"] != "2" || p.Labels["a"] != "" {
				t.Errorf("labels %v", p.Labels)
			}
		}},
		{"json", "application/json-patch+json", `[{"op":"replace","path":"/metadata/labels/a","value":"9"}]`, 200, func(t *testing.T, p *corev1.Pod) {
			if p.Labels["a"] != "9" {
				t.Errorf("labels %v", p.Labels)
			}
		}},
		// Strategic merge patches lists by key: the container is updated, not replaced.
		{"strategic", "application/strategic-merge-patch+json", `{"spec":{"containers":[{"name":"c","image":"new"}]}}`, 200, func(t *testing.T, p *corev1.Pod) {
			if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "new" || p.Spec.Containers[0].TerminationMessagePath == "" {
				t.Errorf("containers %+v", p.Spec.Containers)
			}
		}},
		{"json test fails", "application/json-patch+json", `[{"op":"test","path":"/metadata/labels/a","value":"no"}]`, 422, nil},
		{"malformed", "application/merge-patch+json", `{`, 400, nil},
		{"apply", "application/apply-patch+yaml", `{}`, http.StatusUnsupportedMediaType, nil},
		{"unknown type", "application/json", `{}`, http.StatusUnsupportedMediaType, nil},
		{"empty", "application/merge-patch+json", ``, 400, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			p := pod("ns", "p", map[string]string{"a": "1"})
			p.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
			e.seed(podsGVR, p)
			r := e.do("PATCH", "/api/v1/namespaces/ns/pods/p", []byte(tc.body), "Content-Type", tc.ctype)
			if r.code != tc.wantCode {
				t.Fatalf("code %d, want %d (%+v)", r.code, tc.wantCode, r.status)
			}
			stored := e.stored(podsGVR, "ns", "p").(*corev1.Pod)
			if tc.check == nil {
				if stored.ResourceVersion != "101" {
					t.Errorf("a failed patch stored rv %s", stored.ResourceVersion)
				}
				return
			}
			tc.check(t, stored)
			var got corev1.Pod
			r.decode(t, &got)
			tc.check(t, &got)
		})
	}
}

// TestDelete: deletes go through upstream's rest.BeforeDelete and
// registry rules (builtin.Semantics.Delete) and answer as upstream's
// delete handler: the object for resources whose store returns it (pods),
// a Success Status naming the object otherwise (configmaps), the object
// with its deletionTimestamp when deletion is pending (200; 202 only for
// orphanDependents=false).
func TestDelete(t *testing.T) {
	bound := func(finalizers ...string) runtime.Object {
		p := pod("ns", "p", nil)
		p.Spec.NodeName = "n1"
		p.Finalizers = finalizers
		return p
	}
	unbound := func() runtime.Object { return pod("ns", "p", nil) }
	cm := func(finalizers ...string) runtime.Object {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Finalizers: finalizers}}
	}
	type want struct {
		code    int
		deleted bool
		answer  string // "object", "status", "" (an error)
		grace   *int64 // deletionGracePeriodSeconds of the answered object
		final   []string
	}
	for _, tc := range []struct {
		name string
		gvr  schema.GroupVersionResource
		obj  runtime.Object
		uri  string
		body string
		want want
	}{
		{"unbound pod", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/p", "", want{200, true, "object", nil, nil}},
		{"bound pod: graceful", podsGVR, bound(), "/api/v1/namespaces/ns/pods/p", "", want{200, false, "object", ptr.To[int64](30), nil}},
		{"bound pod: grace from the query", podsGVR, bound(), "/api/v1/namespaces/ns/pods/p?gracePeriodSeconds=7", "", want{200, false, "object", ptr.To[int64](7), nil}},
		{"bound pod: grace 0", podsGVR, bound(), "/api/v1/namespaces/ns/pods/p?gracePeriodSeconds=0", "", want{200, true, "object", nil, nil}},
		{"pod with a finalizer", podsGVR, bound("example.com/f"), "/api/v1/namespaces/ns/pods/p?gracePeriodSeconds=0", "", want{200, false, "object", ptr.To[int64](0), []string{"example.com/f"}}},
		{"configmap", configmapsGVR, cm(), "/api/v1/namespaces/ns/configmaps/p", "", want{200, true, "status", nil, nil}},
		{"configmap with a finalizer", configmapsGVR, cm("example.com/f"), "/api/v1/namespaces/ns/configmaps/p", "", want{200, false, "object", ptr.To[int64](0), []string{"example.com/f"}}},
		{"configmap foreground", configmapsGVR, cm(), "/api/v1/namespaces/ns/configmaps/p?propagationPolicy=Foreground", "", want{200, false, "object", ptr.To[int64](0), []string{metav1.FinalizerDeleteDependents}}},
		{"configmap orphan", configmapsGVR, cm(), "/api/v1/namespaces/ns/configmaps/p?orphanDependents=true", "", want{200, false, "object", ptr.To[int64](0), []string{metav1.FinalizerOrphanDependents}}},
		{"orphanDependents=false pending", configmapsGVR, cm("example.com/f"), "/api/v1/namespaces/ns/configmaps/p?orphanDependents=false", "", want{202, false, "object", ptr.To[int64](0), []string{"example.com/f"}}},
		{"background removes the orphan finalizer", configmapsGVR, cm(metav1.FinalizerOrphanDependents), "/api/v1/namespaces/ns/configmaps/p?propagationPolicy=Background", "", want{200, true, "status", nil, nil}},
		{"body preconditions hold", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/p",
			`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"uid-p","resourceVersion":"101"}}`, want{200, true, "object", nil, nil}},
		{"uid precondition fails", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/p", `{"preconditions":{"uid":"other"}}`, want{409, false, "", nil, nil}},
		{"resourceVersion precondition fails", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/p", `{"preconditions":{"resourceVersion":"x"}}`, want{409, false, "", nil, nil}},
		{"both orphan and propagation", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/p?orphanDependents=true&propagationPolicy=Orphan", "", want{422, false, "", nil, nil}},
		{"unknown propagation", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/p?propagationPolicy=Later", "", want{422, false, "", nil, nil}},
		{"bad grace period", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/p?gracePeriodSeconds=x", "", want{400, false, "", nil, nil}},
		{"malformed body", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/p", `{`, want{400, false, "", nil, nil}},
		{"missing", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/gone", "", want{404, false, "", nil, nil}},
		{"dry run pod", podsGVR, unbound(), "/api/v1/namespaces/ns/pods/p?dryRun=All", "", want{200, false, "object", nil, nil}},
		{"dry run configmap", configmapsGVR, cm(), "/api/v1/namespaces/ns/configmaps/p?dryRun=All", "", want{200, false, "status", nil, nil}},
		{"dry run pending", podsGVR, bound(), "/api/v1/namespaces/ns/pods/p?dryRun=All", "", want{200, false, "object", ptr.To[int64](30), nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed(tc.gvr, tc.obj)
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r := e.do("DELETE", tc.uri, body)
			if r.code != tc.want.code {
				t.Fatalf("code %d, want %d (%+v)", r.code, tc.want.code, r.status)
			}
			after := e.stored(tc.gvr, "ns", "p")
			if gone := after == nil; gone != tc.want.deleted {
				t.Errorf("deleted %v, want %v", gone, tc.want.deleted)
			}
			if strings.Contains(tc.uri, "dryRun") {
				if e.store.called("delete") {
					t.Error("dry run deleted")
				}
				if got := e.adm.got(); !slices.Equal(got, []string{"admit DELETE ns/p dry=true", "validate DELETE"}) {
					t.Errorf("admission %q", got)
				}
			}
			switch tc.want.answer {
			case "status":
				var st metav1.Status
				r.decode(t, &st)
				if st.Kind != "Status" || st.Status != metav1.StatusSuccess || st.Details == nil ||
					st.Details.Name != "p" || st.Details.Kind != tc.gvr.Resource || st.Details.Group != tc.gvr.Group || st.Details.UID != "uid-p" || st.Code != 0 {
					t.Errorf("answered %s, want upstream's Success Status naming the object", r.body)
				}
			case "object":
				var got metav1.PartialObjectMetadata
				r.decode(t, &got)
				if got.Name != "p" || got.Kind == "Status" {
					t.Fatalf("answered %s, want the object", r.body)
				}
				if !ptr.Equal(got.DeletionGracePeriodSeconds, tc.want.grace) {
					t.Errorf("deletionGracePeriodSeconds %v, want %v", ptr.Deref(got.DeletionGracePeriodSeconds, -1), ptr.Deref(tc.want.grace, -1))
				}
				if (tc.want.grace != nil) != (got.DeletionTimestamp != nil) {
					t.Errorf("deletionTimestamp %v with grace %v", got.DeletionTimestamp, tc.want.grace)
				}
				if !slices.Equal(got.Finalizers, tc.want.final) {
					t.Errorf("finalizers %q, want %q", got.Finalizers, tc.want.final)
				}
				if !tc.want.deleted && !strings.Contains(tc.uri, "dryRun") {
					// What was answered is what is stored.
					m, _ := objectMeta(after)
					if !ptr.Equal(m.GetDeletionGracePeriodSeconds(), got.DeletionGracePeriodSeconds) || !slices.Equal(m.GetFinalizers(), got.Finalizers) {
						t.Errorf("stored %+v, answered %+v", m, got.ObjectMeta)
					}
				}
			}
		})
	}
}

func TestDeleteCollection(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ListPageSize = 2 })
	var objs []runtime.Object
	for i := range 5 {
		objs = append(objs, pod("ns", fmt.Sprint("p", i), map[string]string{"odd": fmt.Sprint(i%2 == 1)}))
	}
	objs = append(objs, pod("other", "p9", map[string]string{"odd": "true"}))
	e.seed(podsGVR, objs...)
	r := e.do("DELETE", "/api/v1/namespaces/ns/pods?labelSelector=odd%3Dtrue", nil)
	var l corev1.PodList
	r.decode(t, &l)
	if len(l.Items) != 2 {
		t.Errorf("deleted %d, want 2", len(l.Items))
	}
	// The answer is the list as listed, at the first page's revision.
	if l.ResourceVersion == "" || l.ResourceVersion == "0" {
		t.Errorf("list resourceVersion %q", l.ResourceVersion)
	}
	for _, p := range l.Items {
		if p.DeletionTimestamp != nil || p.Labels["odd"] != "true" {
			t.Errorf("answered %s with %v, %v", p.Name, p.DeletionTimestamp, p.Labels)
		}
	}
	// Namespaces have no deletecollection upstream.
	if r := e.do("DELETE", "/api/v1/namespaces", nil); r.code != http.StatusMethodNotAllowed || r.reason() != metav1.StatusReasonMethodNotAllowed {
		t.Errorf("deletecollection of namespaces: %d %s", r.code, r.reason())
	}
	for i := range 5 {
		if gone := e.stored(podsGVR, "ns", fmt.Sprint("p", i)) == nil; gone != (i%2 == 1) {
			t.Errorf("p%d deleted %v", i, gone)
		}
	}
	if e.stored(podsGVR, "other", "p9") == nil {
		t.Error("deleted in another namespace")
	}
	// Pages continue at the first page's revision.
	if len(e.store.lastList) < 3 || e.store.lastList[1].Revision == 0 || e.store.lastList[1].After == "" {
		t.Errorf("pages %+v", e.store.lastList)
	}
}

func TestScale(t *testing.T) {
	e := newEnv(t)
	e.seed(deploymentsGVR, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
		Status: appsv1.DeploymentStatus{Replicas: 1},
	})
	var s autoscalingv1.Scale
	e.do("GET", "/apis/apps/v1/namespaces/ns/deployments/d/scale", nil).decode(t, &s)
	if s.Kind != "Scale" || s.APIVersion != "autoscaling/v1" || s.Spec.Replicas != 2 || s.Status.Replicas != 1 || s.Status.Selector != "a=b" {
		t.Fatalf("scale %+v", s)
	}
	s.Spec.Replicas = 4
	s.ResourceVersion = ""
	r := e.do("PUT", "/apis/apps/v1/namespaces/ns/deployments/d/scale", mustJSON(t, &s))
	if r.code != 200 {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	if d := e.stored(deploymentsGVR, "ns", "d").(*appsv1.Deployment); *d.Spec.Replicas != 4 {
		t.Errorf("replicas %d after update", *d.Spec.Replicas)
	}
	r = e.do("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", []byte(`{"spec":{"replicas":7}}`), "Content-Type", "application/merge-patch+json")
	var got autoscalingv1.Scale
	r.decode(t, &got)
	if got.Spec.Replicas != 7 {
		t.Errorf("patched scale %d", got.Spec.Replicas)
	}
	if d := e.stored(deploymentsGVR, "ns", "d").(*appsv1.Deployment); *d.Spec.Replicas != 7 {
		t.Errorf("replicas %d after patch", *d.Spec.Replicas)
	}
	// A stale resourceVersion conflicts.
	s.Spec.Replicas, s.ResourceVersion = 1, "3"
	if r := e.do("PUT", "/apis/apps/v1/namespaces/ns/deployments/d/scale", mustJSON(t, &s)); r.code != 409 {
		t.Errorf("stale scale update: %d", r.code)
	}
	if r := e.do("GET", "/apis/apps/v1/namespaces/ns/deployments/gone/scale", nil); r.code != 404 {
		t.Errorf("scale of a missing deployment: %d", r.code)
	}
}

func TestMethodNotSupported(t *testing.T) {
	e := newEnv(t)
	// Bindings are create-only.
	if r := e.do("GET", "/api/v1/namespaces/ns/bindings/b", nil); r.code != http.StatusMethodNotAllowed || r.reason() != metav1.StatusReasonMethodNotAllowed {
		t.Errorf("get binding: %d %s", r.code, r.reason())
	}
}

// TestPodSubresources: pods/ephemeralcontainers changes only the
// ephemeral containers, as upstream's EphemeralContainersStrategy lets it;
// a spec change of the main resource through it is dropped.
func TestPodSubresources(t *testing.T) {
	e := newEnv(t)
	pods := podsGVR
	e.seed(pods, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	})
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},
		"spec":{"containers":[{"name":"c","image":"changed"}],
		"ephemeralContainers":[{"name":"debug","image":"busybox","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}]}}`
	r := e.do("PUT", "/api/v1/namespaces/ns/pods/p/ephemeralcontainers", []byte(body))
	if r.code != 200 {
		t.Fatalf("PUT ephemeralcontainers: %d %+v", r.code, r.status)
	}
	p := e.stored(pods, "ns", "p").(*corev1.Pod)
	if len(p.Spec.EphemeralContainers) != 1 || p.Spec.EphemeralContainers[0].Name != "debug" {
		t.Errorf("ephemeral containers %+v", p.Spec.EphemeralContainers)
	}
	if p.Spec.Containers[0].Image != "i" {
		t.Errorf("container image changed through ephemeralcontainers: %q", p.Spec.Containers[0].Image)
	}
	if r := e.do("GET", "/api/v1/namespaces/ns/pods/p/resize", nil); r.code != 200 {
		t.Errorf("GET resize: %d %+v", r.code, r.status)
	}
	if r := e.do("DELETE", "/api/v1/namespaces/ns/pods/p/ephemeralcontainers", nil); r.code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE ephemeralcontainers: %d", r.code)
	}
}
