package rest

import (
	"errors"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kgate/kgate/storage/registry"
)

func pods(t *testing.T) *registry.Resource {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Lookup(corev1.SchemeGroupVersion.WithResource("pods"))
	if !ok {
		t.Fatal("pods not registered")
	}
	return res
}

func TestParseListOptions(t *testing.T) {
	res := pods(t)
	tok, err := encodeContinue(res, "/registry/pods/ns/p1", 42)
	if err != nil {
		t.Fatal(err)
	}
	f := func(query string, watch bool, wantCode int) {
		t.Helper()
		var args fasthttp.Args
		args.Parse(query)
		_, err := parseListOptions(&args, res, watch)
		code := http.StatusOK
		if err != nil {
			var se apierrors.APIStatus
			if !errors.As(err, &se) {
				t.Fatalf("%q: error is not a Status: %v", query, err)
			}
			code = int(se.Status().Code)
		}
		if code != wantCode {
			t.Errorf("%q (watch %v): code %d, want %d (%v)", query, watch, code, wantCode, err)
		}
	}
	f("", false, 200)
	f("labelSelector=app%3Dweb,tier+in+(a,b)&fieldSelector=spec.nodeName%3Dn1,status.phase!%3DRunning", false, 200)
	f("labelSelector=a%3D%3D%3Db", false, 400)
	f("fieldSelector=spec.unknown%3Dx", false, 400)
	f("fieldSelector=metadata.name%3Dx", false, 200)
	f("resourceVersion=abc", false, 400)
	f("resourceVersion=-3", false, 400)
	f("resourceVersionMatch=Exact", false, 422)                   // needs a resourceVersion
	f("resourceVersion=0&resourceVersionMatch=Exact", false, 422) // exact 0 is forbidden
	f("resourceVersion=5&resourceVersionMatch=Exact", false, 200)
	f("resourceVersion=5&resourceVersionMatch=Newest", false, 422)
	f("limit=10&continue="+tok, false, 200)
	f("continue="+tok+"&resourceVersion=7", false, 422)
	f("continue=not-base64!", false, 400)
	f("sendInitialEvents=true", false, 422) // list
	f("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", true, 200)
	f("sendInitialEvents=true&resourceVersionMatch=NotOlderThan", true, 422) // bookmarks required
	f("sendInitialEvents=true", true, 422)                                   // match required
	f("resourceVersionMatch=NotOlderThan&resourceVersion=4", true, 422)      // only with sendInitialEvents
	f("timeoutSeconds=x", true, 400)
	f("shardSelector=x", false, 400)
}

func TestContinueTokens(t *testing.T) {
	res := pods(t)
	tok, err := encodeContinue(res, "/registry/pods/ns/p1", 42)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeContinue(tok, res)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != 42 || got.afterKey(res) != "/registry/pods/ns/p1" {
		t.Fatalf("decoded %+v after %q", got, got.afterKey(res))
	}
	fresh, err := got.fresh()
	if err != nil {
		t.Fatal(err)
	}
	again, err := decodeContinue(fresh, res)
	if err != nil {
		t.Fatalf("fresh token does not decode: %v", err)
	}
	if again.ResourceVersion != latestContinue || again.afterKey(res) != got.afterKey(res) {
		t.Fatalf("fresh token %+v", again)
	}
	for _, bad := range []string{
		"", "e30", // {}
		"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MCwic3RhcnQiOiJ4In0",     // rv 0
		"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Mywic3RhcnQiOiIvZXRjIn0", // absolute start key
	} {
		if _, err := decodeContinue(bad, res); err == nil {
			t.Errorf("token %q accepted", bad)
		}
	}
}

func FuzzDecodeContinue(f *testing.F) {
	res := &registry.Resource{Resource: "pods", Prefix: "/registry/pods", Namespaced: true}
	tok, _ := encodeContinue(res, "/registry/pods/ns/p", 9)
	f.Add(tok)
	f.Add("e30")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeContinue(s, res)
		if err != nil {
			return
		}
		// A token that decodes resumes inside the resource's keys.
		if k := tok.afterKey(res); len(k) <= len(res.Prefix) || k[:len(res.Prefix)+1] != res.Prefix+"/" {
			t.Fatalf("token %q resumes at %q", s, k)
		}
	})
}
