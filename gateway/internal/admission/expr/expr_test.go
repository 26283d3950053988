package expr_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/expr"
	"github.com/kgate/kgate/storage/registry"
)

var podsRes = &registry.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}

// authz allows verb "get" on pods for user "alice", denies "delete", has
// no opinion otherwise.
type authz struct{ seen *[]authorizer.Attributes }

func (a authz) Authorize(_ context.Context, at authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.seen != nil {
		*a.seen = append(*a.seen, at)
	}
	switch {
	case at.GetUser().GetName() != "alice":
		return authorizer.DecisionNoOpinion, "", nil
	case at.GetVerb() == "get":
		return authorizer.DecisionAllow, "", nil
	case at.GetVerb() == "delete":
		return authorizer.DecisionDeny, "no", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func attrs() *admission.Attributes {
	return &admission.Attributes{
		User:     &user.DefaultInfo{Name: "alice", UID: "1", Groups: []string{"devs"}, Extra: map[string][]string{"scope": {"a", "b"}}},
		Resource: podsRes, Operation: admission.Update, Namespace: "ns", Name: "p", DryRun: true,
		Object: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		},
		OldObject: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "old"}}},
	}
}

func eval(t *testing.T, k expr.Kind, src string, vars map[string]any) (bool, error) {
	t.Helper()
	env, err := expr.Env(k)
	if err != nil {
		t.Fatal(err)
	}
	prg, err := expr.Compile(env, src, cel.BoolType)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return expr.Bool(prg, vars)
}

func TestActivation(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	var seen []authorizer.Attributes
	vars, err := expr.Activation(reg.Scheme(), attrs(), authz{seen: &seen})
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		`object.metadata.labels.app == "web"`,
		`oldObject.metadata.labels.app == "old"`,
		`object.apiVersion == "v1" && object.kind == "Pod"`,
		// Integers are int64, comparable with int literals.
		`object.spec.containers[0].ports[0].containerPort == 8080`,
		`object.spec.containers[0].ports[0].containerPort > 80`,
		`request.operation == "UPDATE" && request.dryRun`,
		`request.namespace == "ns" && request.name == "p" && request.subResource == ""`,
		`request.kind.kind == "Pod" && request.kind.version == "v1" && request.resource.resource == "pods"`,
		`request.requestKind == request.kind && request.requestResource == request.resource`,
		`request.userInfo.username == "alice" && request.userInfo.uid == "1"`,
		`"devs" in request.userInfo.groups && request.userInfo.extra.scope == ["a", "b"]`,
		`authorizer.requestResource.check("get").allowed()`,
		`!authorizer.requestResource.check("delete").allowed()`,
		`authorizer.group("").resource("pods").namespace("ns").check("get").allowed()`,
		`!authorizer.group("").resource("pods").namespace("ns").check("list").allowed()`,
		// ext libraries.
		`"web".upperAscii() == "WEB"`,
		`sets.contains([1, 2, 3], [2])`,
	} {
		ok, err := eval(t, expr.Webhook, src, vars)
		if err != nil || !ok {
			t.Errorf("%s = %v, %v", src, ok, err)
		}
	}
	// The authorizer was asked about the request's own resource.
	found := false
	for _, at := range seen {
		if at.GetResource() == "pods" && at.GetNamespace() == "ns" && at.GetName() == "p" && at.GetVerb() == "get" {
			found = true
		}
	}
	if !found {
		t.Errorf("authorizer not asked about pods/p in ns: %v", seen)
	}
}

func TestActivationWithoutUserOrAuthorizer(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	a := attrs()
	a.User, a.OldObject = nil, nil
	a.Operation, a.DryRun = admission.Create, false
	vars, err := expr.Activation(reg.Scheme(), a, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		`oldObject == null`,
		`request.userInfo == {}`,
		`!request.dryRun`,
		// Without an authorizer, checks have no opinion: neither allowed nor denied.
		`!authorizer.requestResource.check("get").allowed()`,
	} {
		ok, err := eval(t, expr.Webhook, src, vars)
		if err != nil || !ok {
			t.Errorf("%s = %v, %v", src, ok, err)
		}
	}
	// A typed nil object is null as well.
	var nilPod *corev1.Pod
	if v, err := expr.ToValue(reg.Scheme(), nilPod); v != nil || err != nil {
		t.Errorf("typed nil: %v, %v", v, err)
	}
}

func TestEnvKinds(t *testing.T) {
	webhook, err := expr.Env(expr.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := expr.Env(expr.Policy)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{`params.x == 1`, `namespaceObject.metadata.name == "ns"`, `variables.v == 1`} {
		if _, err := expr.Compile(webhook, src, cel.BoolType); err == nil {
			t.Errorf("%s compiles for a webhook", src)
		}
		if _, err := expr.Compile(policy, src, cel.BoolType); err != nil {
			t.Errorf("%s does not compile for a policy: %v", src, err)
		}
	}
}

func TestCompile(t *testing.T) {
	env, err := expr.Env(expr.Policy)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src  string
		want string // error fragment; "" compiles
	}{
		{`1 == 1`, ""},
		{`object.x`, ""}, // dyn: checked when evaluated
		{`"a" + "b"`, "must evaluate to bool"},
		{`1 +`, "compilation failed"},
		{`nope == 1`, "compilation failed"},
	} {
		_, err := expr.Compile(env, tc.src, cel.BoolType)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.src, err, tc.want)
		}
	}
	prg, err := expr.Compile(env, `object.x`, cel.BoolType)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := expr.Bool(prg, map[string]any{expr.Object: map[string]any{"x": "str"}}); err == nil {
		t.Error("a string result is a bool")
	}
	if _, err := expr.Bool(prg, map[string]any{expr.Object: map[string]any{}}); err == nil {
		t.Error("a missing field evaluates")
	}
}

func TestCostLimit(t *testing.T) {
	env, err := expr.Env(expr.Policy)
	if err != nil {
		t.Fatal(err)
	}
	prg, err := expr.Compile(env, `object.items.all(a, object.items.all(b, object.items.all(c, a + b + c >= 0)))`, cel.BoolType)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 200)
	for i := range items {
		items[i] = int64(i)
	}
	_, err = expr.Bool(prg, map[string]any{expr.Object: map[string]any{"items": items}})
	if err == nil || !strings.Contains(err.Error(), "cost") {
		t.Errorf("8M comparisons: error %v, want the cost limit", err)
	}
}

func TestFromJSON(t *testing.T) {
	v, err := expr.FromJSON([]byte(`{"i":3,"f":1.5,"big":9007199254740993,"l":[1,{"n":2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["i"] != int64(3) || m["f"] != 1.5 || m["big"] != int64(9007199254740993) {
		t.Errorf("numbers %#v", m)
	}
	l := m["l"].([]any)
	if l[0] != int64(1) || l[1].(map[string]any)["n"] != int64(2) {
		t.Errorf("nested numbers %#v", l)
	}
	if _, err := expr.FromJSON([]byte(`{`)); err == nil {
		t.Error("bad JSON decoded")
	}
}

func TestMatch(t *testing.T) {
	env, err := expr.Env(expr.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	mc := func(name, src string) admissionregistrationv1.MatchCondition {
		return admissionregistrationv1.MatchCondition{Name: name, Expression: src}
	}
	vars := map[string]any{expr.Object: map[string]any{"a": int64(1)}}
	for _, tc := range []struct {
		name    string
		conds   []admissionregistrationv1.MatchCondition
		want    bool
		wantErr string
	}{
		{"none", nil, true, ""},
		{"all true", []admissionregistrationv1.MatchCondition{mc("one", `object.a == 1`), mc("two", `true`)}, true, ""},
		{"one false", []admissionregistrationv1.MatchCondition{mc("one", `object.a == 1`), mc("two", `false`)}, false, ""},
		{"false wins over an error", []admissionregistrationv1.MatchCondition{mc("bad", `object.missing == 1`), mc("no", `false`)}, false, ""},
		{"false wins over a compile error", []admissionregistrationv1.MatchCondition{mc("broken", `1 +`), mc("no", `false`)}, false, ""},
		{"evaluation error", []admissionregistrationv1.MatchCondition{mc("bad", `object.missing == 1`), mc("yes", `true`)}, false, `matchCondition "bad": expression 'object.missing == 1' resulted in error`},
		{"compile error", []admissionregistrationv1.MatchCondition{mc("broken", `1 +`)}, false, `matchCondition "broken": compilation failed`},
		{"not a bool", []admissionregistrationv1.MatchCondition{mc("str", `"x"`)}, false, `matchCondition "str": must evaluate to bool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := expr.CompileConditions(env, tc.conds)
			if len(conds) != len(tc.conds) {
				t.Fatalf("%d conditions compiled of %d", len(conds), len(tc.conds))
			}
			got, err := expr.Match(conds, vars)
			if got != tc.want {
				t.Errorf("match %v, want %v", got, tc.want)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
	// Compile errors are kept on the condition.
	conds := expr.CompileConditions(env, []admissionregistrationv1.MatchCondition{mc("broken", `1 +`), mc("ok", `true`)})
	if conds[0].Err() == nil || conds[1].Err() != nil {
		t.Errorf("Err: %v, %v", conds[0].Err(), conds[1].Err())
	}
}
