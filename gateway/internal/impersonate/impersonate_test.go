package impersonate

import (
	"errors"
	"slices"
	"testing"

	"github.com/valyala/fasthttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/authz"
)

// allowList allows exactly the attributes it holds (verb, group,
// resource, subresource, namespace, name).
type allowList []authz.Attributes

func (l allowList) Authorize(a authz.Attributes) (authz.Decision, string) {
	for _, x := range l {
		if x.Verb == a.Verb && x.APIGroup == a.APIGroup && x.Resource == a.Resource && x.Subresource == a.Subresource &&
			x.Namespace == a.Namespace && x.Name == a.Name && a.IsResourceRequest {
			return authz.Allow, ""
		}
	}
	return authz.NoOpinion, "not on the list"
}

func headers(kv ...string) *fasthttp.RequestHeader {
	var h fasthttp.RequestHeader
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &h
}

func imp(resource, group, ns, name string) authz.Attributes {
	return authz.Attributes{Verb: "impersonate", Resource: resource, APIGroup: group, Namespace: ns, Name: name}
}

func TestUser(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}
	rules := allowList{
		imp("users", "", "", "bob"),
		imp("users", "", "", user.Anonymous),
		imp("groups", "", "", "devs"),
		imp("serviceaccounts", "", "ns", "builder"),
		imp("uids", "authentication.k8s.io", "", "uid-1"),
		{Verb: "impersonate", APIGroup: "authentication.k8s.io", Resource: "userextras", Subresource: "scopes", Name: "view"},
	}
	type want struct {
		name, uid string
		groups    []string
		extra     map[string][]string
		forbidden string // resource/name refused
		bad       bool   // 400
	}
	f := func(name string, h *fasthttp.RequestHeader, w want) {
		t.Run(name, func(t *testing.T) {
			u, err := User(h, alice, rules)
			var fb *Forbidden
			switch {
			case w.bad:
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("err %v, want 400", err)
				}
				return
			case w.forbidden != "":
				if !errors.As(err, &fb) || fb.Attributes.Resource+"/"+fb.Attributes.Name != w.forbidden || fb.Attributes.User != alice {
					t.Fatalf("err %v, want forbidden %s", err, w.forbidden)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if u.GetName() != w.name || u.GetUID() != w.uid || !slices.Equal(u.GetGroups(), w.groups) {
				t.Errorf("user %+v, want %+v", u, w)
			}
			for k, v := range w.extra {
				if !slices.Equal(u.GetExtra()[k], v) {
					t.Errorf("extra %s = %q, want %q", k, u.GetExtra()[k], v)
				}
			}
		})
	}
	f("none", headers("Accept", "x"), want{name: "alice", groups: []string{"system:authenticated"}})
	f("user", headers("Impersonate-User", "bob"), want{name: "bob", groups: []string{"system:authenticated"}})
	f("user and group", headers("Impersonate-User", "bob", "Impersonate-Group", "devs"), want{name: "bob", groups: []string{"devs", "system:authenticated"}})
	f("service account", headers("Impersonate-User", "system:serviceaccount:ns:builder"),
		want{name: "system:serviceaccount:ns:builder", groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"}})
	f("service account with groups", headers("Impersonate-User", "system:serviceaccount:ns:builder", "Impersonate-Group", "devs"),
		want{name: "system:serviceaccount:ns:builder", groups: []string{"devs", "system:authenticated"}})
	f("uid and extra", headers("Impersonate-User", "bob", "Impersonate-Uid", "uid-1", "Impersonate-Extra-Scopes", "view"),
		want{name: "bob", uid: "uid-1", groups: []string{"system:authenticated"}, extra: map[string][]string{"scopes": {"view"}}})
	f("anonymous", headers("Impersonate-User", user.Anonymous), want{name: user.Anonymous, groups: []string{user.AllUnauthenticated}})
	f("user refused", headers("Impersonate-User", "carol"), want{forbidden: "users/carol"})
	f("group refused", headers("Impersonate-User", "bob", "Impersonate-Group", "system:masters"), want{forbidden: "groups/system:masters"})
	f("service account refused", headers("Impersonate-User", "system:serviceaccount:kube-system:default"), want{forbidden: "serviceaccounts/default"})
	f("extra refused", headers("Impersonate-User", "bob", "Impersonate-Extra-Scopes", "admin"), want{forbidden: "userextras/admin"})
	f("uid refused", headers("Impersonate-User", "bob", "Impersonate-Uid", "uid-2"), want{forbidden: "uids/uid-2"})
	f("group without user", headers("Impersonate-Group", "devs"), want{bad: true})
	f("uid without user", headers("Impersonate-Uid", "uid-1"), want{bad: true})

	if Requested(headers("Accept", "x")) || !Requested(headers("impersonate-extra-foo", "x")) {
		t.Error("Requested")
	}
}
