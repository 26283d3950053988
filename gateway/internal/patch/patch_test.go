package patch

import (
	"encoding/json"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"1"}},"spec":{"containers":[{"name":"c1","image":"i1"},{"name":"c2","image":"i2"}]}}`

func TestApply(t *testing.T) {
	f := func(name string, pt types.PatchType, p string, check func(map[string]any) bool, wantErr bool) {
		t.Helper()
		out, err := Apply(pt, []byte(pod), []byte(p), &corev1.Pod{})
		if wantErr {
			if !errors.Is(err, ErrBadPatch) && !errors.Is(err, ErrPatchFailed) {
				t.Errorf("%s: err = %v, want ErrBadPatch or ErrPatchFailed", name, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s: output not JSON: %v", name, err)
		}
		if !check(m) {
			t.Errorf("%s: unexpected result %s", name, out)
		}
	}
	labels := func(m map[string]any) map[string]any {
		return m["metadata"].(map[string]any)["labels"].(map[string]any)
	}
	containers := func(m map[string]any) []any {
		return m["spec"].(map[string]any)["containers"].([]any)
	}
	f("merge adds label", types.MergePatchType, `{"metadata":{"labels":{"b":"2"}}}`,
		func(m map[string]any) bool { return labels(m)["a"] == "1" && labels(m)["b"] == "2" }, false)
	f("merge null deletes", types.MergePatchType, `{"metadata":{"labels":{"a":null}}}`,
		func(m map[string]any) bool { _, ok := labels(m)["a"]; return !ok }, false)
	f("merge replaces lists", types.MergePatchType, `{"spec":{"containers":[{"name":"c3","image":"i3"}]}}`,
		func(m map[string]any) bool { return len(containers(m)) == 1 }, false)
	f("strategic merges lists by key", types.StrategicMergePatchType, `{"spec":{"containers":[{"name":"c2","image":"new"}]}}`,
		func(m map[string]any) bool {
			c := containers(m)
			return len(c) == 2 && c[1].(map[string]any)["image"] == "new"
		}, false)
	f("strategic delete directive", types.StrategicMergePatchType, `{"spec":{"containers":[{"name":"c1","$patch":"delete"}]}}`,
		func(m map[string]any) bool { return len(containers(m)) == 1 }, false)
	f("json patch replace", types.JSONPatchType, `[{"op":"replace","path":"/metadata/labels/a","value":"x"}]`,
		func(m map[string]any) bool { return labels(m)["a"] == "x" }, false)
	f("json patch test fails", types.JSONPatchType, `[{"op":"test","path":"/metadata/labels/a","value":"nope"}]`, nil, true)
	f("json patch bad path", types.JSONPatchType, `[{"op":"remove","path":"/nope/x"}]`, nil, true)
	f("json patch not a list", types.JSONPatchType, `{"op":"add"}`, nil, true)
	f("merge not json", types.MergePatchType, `{nope`, nil, true)
	f("strategic not json", types.StrategicMergePatchType, `[1,2]`, nil, true)
	f("unknown type", types.PatchType("application/x-nope"), `{}`, nil, true)
}

func FuzzApply(f *testing.F) {
	f.Add(uint8(0), `[{"op":"add","path":"/metadata/labels/z","value":"1"}]`)
	f.Add(uint8(1), `{"metadata":{"labels":null}}`)
	f.Add(uint8(2), `{"spec":{"containers":[{"name":"c1","$patch":"replace"}]}}`)
	kinds := []types.PatchType{types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType}
	f.Fuzz(func(t *testing.T, k uint8, p string) {
		out, err := Apply(kinds[int(k)%len(kinds)], []byte(pod), []byte(p), &corev1.Pod{})
		if err == nil && !json.Valid(out) {
			t.Fatalf("patch %q produced invalid JSON %q", p, out)
		}
	})
}
