// Package authz decides whether a request may proceed, with kube-apiserver's
// semantics: RBAC evaluated in memory from the Roles, ClusterRoles and
// bindings the gateway watches, the AlwaysAllow and AlwaysDeny modes, a
// Webhook authorizer plugged in from authz/webhook, the Node authorizer
// plugged in from authz/node, the union of the
// modes in --authorization-mode order behind the privileged group
// system:masters, and the privilege-escalation checks for writes of
// roles and bindings.
package authz

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/requestinfo"
)

// Decision is an authorizer's answer. The zero value is NoOpinion.
type Decision int

const (
	// NoOpinion lets the next authorizer decide; a request that no
	// authorizer allows is forbidden.
	NoOpinion Decision = iota
	// Allow admits the request.
	Allow
	// Deny forbids the request without asking the authorizers that follow.
	Deny
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "Allow"
	case Deny:
		return "Deny"
	default:
		return "NoOpinion"
	}
}

// Attributes are what authorization looks at: kube-apiserver's
// authorizer.Attributes.
type Attributes struct {
	User              user.Info
	Verb              string // get, list, ... for resources; the lower-case method otherwise
	Namespace         string
	APIGroup          string
	APIVersion        string
	Resource          string
	Subresource       string
	Name              string
	Path              string // the URL path, matched by nonResourceURLs
	IsResourceRequest bool
	// FieldSelector and LabelSelector are the unparsed selectors of a
	// list, watch or deletecollection; only the webhook looks at them.
	FieldSelector string
	LabelSelector string
}

// AttributesFor builds the attributes of a parsed request made by u, as
// kube-apiserver's GetAuthorizerAttributes does.
func AttributesFor(u user.Info, info *requestinfo.Info) Attributes {
	return Attributes{
		User:              u,
		Verb:              info.Verb,
		Namespace:         info.Namespace,
		APIGroup:          info.APIGroup,
		APIVersion:        info.APIVersion,
		Resource:          info.Resource,
		Subresource:       info.Subresource,
		Name:              info.Name,
		Path:              info.Path,
		IsResourceRequest: info.IsResourceRequest,
	}
}

// Authorizer decides on a request. The reason explains the decision (for
// audit and the Forbidden message) and may be empty.
type Authorizer interface {
	Authorize(a Attributes) (Decision, string)
}

// The --authorization-mode values kgate knows.
const (
	ModeRBAC        = "RBAC"
	ModeAlwaysAllow = "AlwaysAllow"
	ModeAlwaysDeny  = "AlwaysDeny"
	ModeWebhook     = "Webhook"
	ModeNode        = "Node"
)

// ErrUnsupportedMode is returned by New for a mode kube-apiserver has and
// kgate does not (ABAC) or that does not exist.
var ErrUnsupportedMode = errors.New("authz: unsupported authorization mode")

// Config selects the authorizers.
type Config struct {
	// Modes are the --authorization-mode values in the order they are
	// asked. Default: RBAC.
	Modes []string
	// Webhook serves mode Webhook (authz/webhook); required when Modes
	// lists it.
	Webhook Authorizer
	// Node serves mode Node (authz/node); required when Modes lists it.
	Node Authorizer
}

// New builds the authorizer kube-apiserver builds: members of
// system:masters are allowed everything, then each mode is asked in order
// and the first Allow or Deny wins. rbac serves mode RBAC and may be nil
// when Modes does not list it.
func New(cfg Config, rbac *RBAC) (Authorizer, error) {
	modes := cfg.Modes
	if len(modes) == 0 {
		modes = []string{ModeRBAC}
	}
	u := Union{PrivilegedGroups(user.SystemPrivilegedGroup)}
	seen := make(map[string]bool, len(modes))
	for _, m := range modes {
		if seen[m] {
			return nil, fmt.Errorf("authz: authorization mode %q is specified more than once", m)
		}
		seen[m] = true
		switch m {
		case ModeRBAC:
			if rbac == nil {
				return nil, errors.New("authz: mode RBAC needs an RBAC authorizer")
			}
			u = append(u, rbac)
		case ModeAlwaysAllow:
			u = append(u, AlwaysAllow{})
		case ModeAlwaysDeny:
			u = append(u, AlwaysDeny{})
		case ModeWebhook:
			if cfg.Webhook == nil {
				return nil, errors.New("authz: mode Webhook needs a webhook authorizer")
			}
			u = append(u, cfg.Webhook)
		case ModeNode:
			if cfg.Node == nil {
				return nil, errors.New("authz: mode Node needs a Node authorizer")
			}
			u = append(u, cfg.Node)
		default:
			return nil, fmt.Errorf("%w: %q", ErrUnsupportedMode, m)
		}
	}
	return u, nil
}

// Evaluator is an Authorizer that can fail to decide (the webhook, when
// its service does not answer). Authorize then has no opinion; Evaluate
// also returns why.
type Evaluator interface {
	Authorizer
	Evaluate(a Attributes) (Decision, string, error)
}

// Evaluate asks z, with the error of an Evaluator. A request that no
// authorizer allows and that one failed to decide is kube-apiserver's
// 500, not 403; access reviews report the error as evaluationError.
func Evaluate(z Authorizer, a Attributes) (Decision, string, error) {
	if e, ok := z.(Evaluator); ok {
		return e.Evaluate(a)
	}
	d, reason := z.Authorize(a)
	return d, reason, nil
}

// Union asks its authorizers in order; the first Allow or Deny is the
// decision. Otherwise it has no opinion, with the reasons given joined by
// newlines and the errors of those that failed (k8s.io/apiserver's union
// authorizer).
type Union []Authorizer

// Authorize implements Authorizer.
func (u Union) Authorize(a Attributes) (Decision, string) {
	d, reason, _ := u.Evaluate(a)
	return d, reason
}

// Evaluate implements Evaluator.
func (u Union) Evaluate(a Attributes) (Decision, string, error) {
	var first string
	var rest []string
	var errs []error
	for _, z := range u {
		d, reason, err := Evaluate(z, a)
		if d != NoOpinion {
			return d, reason, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
		switch {
		case reason == "":
		case first == "":
			first = reason
		default:
			rest = append(rest, reason)
		}
	}
	if len(rest) == 0 {
		return NoOpinion, first, errors.Join(errs...)
	}
	return NoOpinion, first + "\n" + strings.Join(rest, "\n"), errors.Join(errs...)
}

// AlwaysAllow allows every request (mode AlwaysAllow).
type AlwaysAllow struct{}

// Authorize implements Authorizer.
func (AlwaysAllow) Authorize(Attributes) (Decision, string) { return Allow, "" }

// AlwaysDeny has no opinion on any request, so a chain of only AlwaysDeny
// forbids everything (mode AlwaysDeny; kube-apiserver answers NoOpinion
// too, so a later mode may still allow).
type AlwaysDeny struct{}

// Authorize implements Authorizer.
func (AlwaysDeny) Authorize(Attributes) (Decision, string) {
	return NoOpinion, "Everything is forbidden."
}

// PrivilegedGroups allows every request of a member of one of groups and
// has no opinion on others.
func PrivilegedGroups(groups ...string) Authorizer { return privileged(groups) }

type privileged []string

func (p privileged) Authorize(a Attributes) (Decision, string) {
	if a.User == nil {
		return NoOpinion, ""
	}
	for _, g := range a.User.GetGroups() {
		for _, pg := range p {
			if g == pg {
				return Allow, ""
			}
		}
	}
	return NoOpinion, ""
}

// inGroup reports whether u is a member of group.
func inGroup(u user.Info, group string) bool {
	for _, g := range u.GetGroups() {
		if g == group {
			return true
		}
	}
	return false
}
