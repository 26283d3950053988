package authz

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// ErrEscalation is matched (errors.Is) by the errors of the escalation
// checks: the write would grant permissions its author does not hold. The
// gateway answers 403 Forbidden with the error's message.
var ErrEscalation = errors.New("authz: attempt to grant permissions not held")

// EscalationError says which permissions a write of a role or binding
// would grant that its author does not hold.
type EscalationError struct {
	User   string
	Groups []string
	// Missing are the permissions not held, compacted.
	Missing []rbacv1.PolicyRule
	// Resolution, when not nil, lists roles the author's bindings refer to
	// that do not exist (so the author may hold less than intended).
	Resolution error
	// AggregationRule is set when the write sets an aggregationRule, which
	// needs every permission ("*" on everything).
	AggregationRule bool
}

// Error gives kube-apiserver's message.
func (e *EscalationError) Error() string {
	if e.AggregationRule {
		return "must have cluster-admin privileges to use the aggregationRule"
	}
	seen := map[string]bool{}
	var descs []string
	for _, r := range e.Missing {
		if d := compactString(r); !seen[d] {
			seen[d] = true
			descs = append(descs, d)
		}
	}
	sort.Strings(descs)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		e.User, e.Groups, strings.Join(descs, "\n"))
	if e.Resolution != nil {
		msg += fmt.Sprintf("; resolution errors: [%v]", e.Resolution)
	}
	return msg
}

// Is makes errors.Is(err, ErrEscalation) true.
func (e *EscalationError) Is(target error) bool { return target == ErrEscalation }

// Escalation prevents privilege escalation through the RBAC API, as
// kube-apiserver's policy-based storage for roles and bindings does. Each
// check passes for members of system:masters, then for users explicitly
// authorized to "escalate" (roles) or "bind" (bindings), then for users
// who already hold every permission the write would grant.
type Escalation struct {
	authz Authorizer // decides "escalate" and "bind": the gateway's whole chain
	rbac  *RBAC      // the rules users hold and the rules of referenced roles
}

// NewEscalation returns the checks; a is the authorizer the gateway uses
// for requests (as kube-apiserver asks its own), rbac the source of rules.
func NewEscalation(a Authorizer, rbac *RBAC) *Escalation {
	return &Escalation{authz: a, rbac: rbac}
}

const rbacGroup = rbacv1.GroupName

// CheckRoleEscalation checks a create or update of a Role (namespace set)
// or ClusterRole (namespace "") named name with rules, made by u. Writes
// that only change fields the garbage collector needs (finalizers, owner
// references) are not checked by kube-apiserver; the caller skips those.
func (e *Escalation) CheckRoleEscalation(u user.Info, namespace, name string, rules []rbacv1.PolicyRule) error {
	if e.mayEscalate(u, namespace, name) {
		return nil
	}
	return e.confirmNoEscalation(u, namespace, rules)
}

// CheckAggregationRule checks a write of ClusterRole name that sets,
// changes or removes an aggregationRule (the new or the old object has
// one): since it gathers whatever is labelled, it needs every permission.
// Call it after CheckRoleEscalation.
func (e *Escalation) CheckAggregationRule(u user.Info, name string) error {
	if e.mayEscalate(u, "", name) {
		return nil
	}
	if err := e.confirmNoEscalation(u, "", fullAuthority); err != nil {
		var ee *EscalationError
		if errors.As(err, &ee) {
			ee.AggregationRule = true
		}
		return err
	}
	return nil
}

var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{rbacv1.VerbAll}, APIGroups: []string{rbacv1.APIGroupAll}, Resources: []string{rbacv1.ResourceAll}},
	{Verbs: []string{rbacv1.VerbAll}, NonResourceURLs: []string{rbacv1.NonResourceAll}},
}

// CheckBindingAllowed checks a create or update of a RoleBinding in
// namespace (or a ClusterRoleBinding: namespace "") referring to roleRef,
// made by u: u must be authorized to "bind" the role there, or hold all of
// its rules. A missing role is an error matching ErrNotFound.
func (e *Escalation) CheckBindingAllowed(u user.Info, namespace string, roleRef rbacv1.RoleRef) error {
	if u == nil {
		return fmt.Errorf("%w: no user", ErrEscalation)
	}
	if inGroup(u, user.SystemPrivilegedGroup) {
		return nil
	}
	a := Attributes{User: u, Verb: "bind", Namespace: namespace, APIGroup: roleRef.APIGroup,
		Name: roleRef.Name, IsResourceRequest: true}
	switch roleRef.Kind {
	case "ClusterRole":
		a.Resource = "clusterroles"
	case "Role":
		a.Resource = "roles"
	}
	if a.Resource != "" {
		if d, _ := e.authz.Authorize(a); d == Allow {
			return nil
		}
	}
	rules, err := e.rbac.RoleRefRules(namespace, roleRef)
	if err != nil {
		return err
	}
	return e.confirmNoEscalation(u, namespace, rules)
}

// mayEscalate: u is in system:masters or may "escalate" the role.
func (e *Escalation) mayEscalate(u user.Info, namespace, name string) bool {
	if u == nil {
		return false
	}
	if inGroup(u, user.SystemPrivilegedGroup) {
		return true
	}
	resource := "clusterroles"
	if namespace != "" {
		resource = "roles"
	}
	d, _ := e.authz.Authorize(Attributes{User: u, Verb: "escalate", Namespace: namespace,
		APIGroup: rbacGroup, Resource: resource, Name: name, IsResourceRequest: true})
	return d == Allow
}

// confirmNoEscalation is upstream's ConfirmNoEscalation: the rules u holds
// in namespace must cover rules.
func (e *Escalation) confirmNoEscalation(u user.Info, namespace string, rules []rbacv1.PolicyRule) error {
	if u == nil {
		return fmt.Errorf("%w: no user", ErrEscalation)
	}
	owner, resolution := e.rbac.RulesFor(u, namespace)
	covered, missing := validation.Covers(owner, rules)
	if covered {
		return nil
	}
	return &EscalationError{User: u.GetName(), Groups: u.GetGroups(), Missing: compactRules(missing), Resolution: resolution}
}

type simpleResource struct {
	group, resource string
	hasName         bool
	name            string
}

// compactRules merges the verbs of rules that differ only in verbs and
// name one group, one resource and at most one resource name (upstream's
// CompactRules), for shorter messages.
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	simple := map[simpleResource]int{}
	for _, r := range rules {
		if len(r.APIGroups) != 1 || len(r.Resources) != 1 || len(r.NonResourceURLs) != 0 || len(r.ResourceNames) > 1 {
			out = append(out, r)
			continue
		}
		k := simpleResource{group: r.APIGroups[0], resource: r.Resources[0]}
		if len(r.ResourceNames) == 1 {
			k.hasName, k.name = true, r.ResourceNames[0]
		}
		if i, ok := simple[k]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		simple[k] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

// compactString is upstream's CompactString of a rule.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	var args []any
	add := func(field string, v []string) {
		if len(v) > 0 {
			parts = append(parts, field+":%q")
			args = append(args, v)
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return fmt.Sprintf("{"+strings.Join(parts, ", ")+"}", args...)
}
