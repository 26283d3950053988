// Package impersonate applies the Impersonate-* headers of a request as
// kube-apiserver's impersonation filter does: each requested user,
// service account, group, uid and extra value must be authorized with
// verb "impersonate" for the requester; the request then runs as the
// user the headers describe.
package impersonate

import (
	"fmt"
	"net/url"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authz"
)

// Headers gives a request's headers: Peek returns the first value of a
// header, Visit every header (name canonical, as fasthttp keeps them).
// *fasthttp.RequestHeader satisfies it.
type Headers interface {
	Peek(key string) []byte
	VisitAll(f func(key, value []byte))
}

// Forbidden is the attributes an impersonation was refused for and the
// authorizer's reason; the gateway answers it as any other 403.
type Forbidden struct {
	Attributes authz.Attributes
	Reason     string
}

func (f *Forbidden) Error() string {
	return fmt.Sprintf("impersonation of %s %q forbidden", f.Attributes.Resource, f.Attributes.Name)
}

// request is one thing asked for.
type request struct {
	attrs authz.Attributes
	kind  string // ServiceAccount, User, Group, UserExtra, UID
	key   string // of UserExtra
}

// Requested reports whether the request carries impersonation headers.
func Requested(h Headers) bool {
	found := false
	h.VisitAll(func(k, _ []byte) {
		if !found && isImpersonation(string(k)) {
			found = true
		}
	})
	return found
}

func isImpersonation(name string) bool {
	return strings.EqualFold(name, authenticationv1.ImpersonateUserHeader) ||
		strings.EqualFold(name, authenticationv1.ImpersonateGroupHeader) ||
		strings.EqualFold(name, authenticationv1.ImpersonateUIDHeader) ||
		hasFoldPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix)
}

func hasFoldPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// User returns the user the request runs as: requester itself when the
// headers ask for no impersonation; otherwise the impersonated user,
// after checking each part with a. Refusals are *Forbidden; malformed
// headers a 400 Status error.
func User(h Headers, requester user.Info, a authz.Authorizer) (user.Info, error) {
	reqs, err := requests(h)
	if err != nil || len(reqs) == 0 {
		return requester, err
	}
	groupsGiven := false
	for _, r := range reqs {
		if r.kind == "Group" {
			groupsGiven = true
		}
	}
	username, uid := "", ""
	groups := []string{}
	extra := map[string][]string{}
	for _, r := range reqs {
		r.attrs.User = requester
		r.attrs.Verb = "impersonate"
		r.attrs.IsResourceRequest = true
		switch r.kind {
		case "ServiceAccount":
			username = serviceaccount.MakeUsername(r.attrs.Namespace, r.attrs.Name)
			if !groupsGiven {
				groups = serviceaccount.MakeGroupNames(r.attrs.Namespace)
			}
		case "User":
			username = r.attrs.Name
		case "Group":
			groups = append(groups, r.attrs.Name)
		case "UserExtra":
			extra[r.key] = append(extra[r.key], r.attrs.Name)
		case "UID":
			uid = r.attrs.Name
		}
		if d, reason := a.Authorize(r.attrs); d != authz.Allow {
			return nil, &Forbidden{Attributes: r.attrs, Reason: reason}
		}
	}
	if username != user.Anonymous {
		add := true
		for _, g := range groups {
			if g == user.AllAuthenticated || g == user.AllUnauthenticated {
				add = false
			}
		}
		if add {
			groups = append(groups, user.AllAuthenticated)
		}
	} else if !contains(groups, user.AllUnauthenticated) {
		groups = append(groups, user.AllUnauthenticated)
	}
	if len(extra) == 0 {
		extra = nil
	}
	return &user.DefaultInfo{Name: username, UID: uid, Groups: groups, Extra: extra}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var authenticationGroup = authenticationv1.SchemeGroupVersion.Group

// requests is upstream's buildImpersonationRequests.
func requests(h Headers) ([]request, error) {
	var out []request
	hasUser := false
	if u := string(h.Peek(authenticationv1.ImpersonateUserHeader)); u != "" {
		hasUser = true
		if ns, name, err := serviceaccount.SplitUsername(u); err == nil {
			out = append(out, request{kind: "ServiceAccount", attrs: authz.Attributes{Resource: "serviceaccounts", Namespace: ns, Name: name}})
		} else {
			out = append(out, request{kind: "User", attrs: authz.Attributes{Resource: "users", Name: u}})
		}
	}
	var groups, extras []request
	var uid string
	h.VisitAll(func(k, v []byte) {
		name := string(k)
		switch {
		case strings.EqualFold(name, authenticationv1.ImpersonateGroupHeader):
			groups = append(groups, request{kind: "Group", attrs: authz.Attributes{Resource: "groups", Name: string(v)}})
		case hasFoldPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix):
			key := unescapeExtraKey(strings.ToLower(name[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):]))
			extras = append(extras, request{kind: "UserExtra", key: key, attrs: authz.Attributes{
				APIGroup: authenticationGroup, Resource: "userextras", Subresource: key, Name: string(v)}})
		case strings.EqualFold(name, authenticationv1.ImpersonateUIDHeader) && uid == "":
			uid = string(v)
		}
	})
	out = append(out, groups...)
	out = append(out, extras...)
	if uid != "" {
		out = append(out, request{kind: "UID", attrs: authz.Attributes{APIGroup: authenticationGroup, Resource: "uids", Name: uid}})
	}
	if (len(groups) > 0 || len(extras) > 0 || uid != "") && !hasUser {
		var names []string
		for _, r := range out {
			names = append(names, r.kind+" "+r.attrs.Name)
		}
		return nil, apierror.BadRequest(fmt.Sprintf("requested %v without impersonating a user", names))
	}
	return out, nil
}

func unescapeExtraKey(encoded string) string {
	key, err := url.PathUnescape(encoded)
	if err != nil {
		return encoded
	}
	return key
}
