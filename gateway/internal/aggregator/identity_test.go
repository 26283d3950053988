package aggregator

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/user"
)

// backendUser is who an extension server built on k8s.io/apiserver
// takes the request to be from: its request-header authenticator over
// the header, with kube-apiserver's default header names.
func backendUser(t *testing.T, h http.Header) user.Info {
	t.Helper()
	a, err := headerrequest.New([]string{"X-Remote-User"}, []string{"X-Remote-Uid"}, []string{"X-Remote-Group"}, []string{"X-Remote-Extra-"})
	if err != nil {
		t.Fatal(err)
	}
	resp, ok, err := a.AuthenticateRequest(&http.Request{Header: h.Clone()})
	if err != nil || !ok {
		t.Fatalf("the backend authenticates nobody from %v: %v", h, err)
	}
	return resp.User
}

// clientCredential reports whether h still holds a header only a client
// could have put there: a credential, an impersonation or a spoofed
// identity (every X-Remote-* value must be the gateway's).
func clientCredential(h http.Header, u user.Info) string {
	for name := range h {
		n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
		switch {
		case n == "authorization", n == "proxy-authorization", strings.HasPrefix(n, "impersonate-"):
			return name
		case strings.HasPrefix(n, "x-remote-"):
			switch http.CanonicalHeaderKey(name) {
			case "X-Remote-User", "X-Remote-Group", "X-Remote-Uid":
			default:
				if !strings.HasPrefix(http.CanonicalHeaderKey(name), "X-Remote-Extra-") {
					return name
				}
			}
		}
	}
	return ""
}

func TestOutbound(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice", UID: "u-1", Groups: []string{"dev", "system:authenticated"},
		Extra: map[string][]string{"scopes.example.com/Team": {"a", "b"}}}
	f := func(name string, in http.Header, u user.Info, sendUID bool, check func(t *testing.T, out http.Header)) {
		t.Run(name, func(t *testing.T) {
			out := Outbound(in, u, sendUID)
			if c := clientCredential(out, u); c != "" {
				t.Errorf("client header %s reaches the backend: %v", c, out)
			}
			got := backendUser(t, out)
			if got.GetName() != u.GetName() || !slices.Equal(got.GetGroups(), u.GetGroups()) {
				t.Errorf("backend sees %s %v, want %s %v", got.GetName(), got.GetGroups(), u.GetName(), u.GetGroups())
			}
			for k, v := range u.GetExtra() {
				if !slices.Equal(got.GetExtra()[strings.ToLower(k)], v) {
					t.Errorf("backend extra %s = %v, want %v (all: %v)", k, got.GetExtra()[strings.ToLower(k)], v, got.GetExtra())
				}
			}
			if check != nil {
				check(t, out)
			}
		})
	}
	f("plain", http.Header{"Accept": {"application/json"}}, alice, false, func(t *testing.T, out http.Header) {
		if out.Get("Accept") != "application/json" {
			t.Errorf("Accept lost: %v", out)
		}
		if out.Get("X-Remote-Uid") != "" {
			t.Errorf("uid sent without the gate: %v", out)
		}
	})
	f("uid with the gate", http.Header{}, alice, true, func(t *testing.T, out http.Header) {
		if out.Get("X-Remote-Uid") != "u-1" {
			t.Errorf("X-Remote-Uid = %q", out.Get("X-Remote-Uid"))
		}
	})
	f("client credentials", http.Header{
		"Authorization":       {"Bearer secret"},
		"Proxy-Authorization": {"Basic x"},
		"Impersonate-User":    {"admin"},
		"Impersonate-Group":   {"system:masters"},
	}, alice, false, nil)
	f("spoofed identity", http.Header{
		"X-Remote-User":             {"admin"},
		"X-Remote-Group":            {"system:masters"},
		"X-Remote-Uid":              {"0"},
		"X-Remote-Extra-Scopes":     {"all"},
		"x_remote_user":             {"admin"},
		"X-Remote_Group":            {"system:masters"},
		"X-REMOTE-EXTRA-FOO":        {"bar"},
		"X-Stream-Protocol-Version": {"v4.channel.k8s.io"},
	}, alice, false, func(t *testing.T, out http.Header) {
		if out.Get("X-Stream-Protocol-Version") == "" {
			t.Errorf("an ordinary header was dropped: %v", out)
		}
	})
	f("header smuggling", http.Header{"X-Note": {"a\r\nX-Remote-User: admin"}, "X-Bad\nName": {"v"}}, alice, false, func(t *testing.T, out http.Header) {
		if len(out["X-Note"]) != 0 || len(out["X-Bad\nName"]) != 0 {
			t.Errorf("unsafe header kept: %q", out)
		}
	})
	f("no groups", http.Header{"X-Remote-Group": {"system:masters"}}, &user.DefaultInfo{Name: "bob"}, false, nil)
}

// FuzzOutbound: whatever header a client sends, the backend receives no
// client credential or identity header, and its request-header
// authenticator sees exactly the gateway's user.
func FuzzOutbound(f *testing.F) {
	f.Add("X-Remote-User", "admin", "alice", "dev")
	f.Add("x_remote_group", "system:masters", "alice", "dev")
	f.Add("Authorization", "Bearer secret", "bob", "")
	f.Add("X-Remote-Extra-Scopes", "all", "carol", "ops")
	f.Add("Impersonate-User", "admin", "dave", "system:authenticated")
	f.Add("X-Note", "a\r\nX-Remote-User: admin", "erin", "x")
	f.Fuzz(func(t *testing.T, name, value, userName, group string) {
		if userName == "" {
			return // the gateway never proxies for an empty user
		}
		u := &user.DefaultInfo{Name: userName}
		if group != "" {
			u.Groups = []string{group}
		}
		out := Outbound(http.Header{name: {value}}, u, false)
		if c := clientCredential(out, u); c != "" {
			t.Fatalf("client header %q reaches the backend: %q", c, out)
		}
		if got := out.Values("X-Remote-User"); len(got) != 1 || got[0] != userName {
			t.Fatalf("X-Remote-User %q, want [%q]", got, userName)
		}
		if got := out.Values("X-Remote-Group"); !slices.Equal(got, u.Groups) {
			t.Fatalf("X-Remote-Group %q, want %q", got, u.Groups)
		}
		for k := range out {
			if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Remote-Extra-") {
				t.Fatalf("extra header %q for a user without extras", k)
			}
		}
	})
}
