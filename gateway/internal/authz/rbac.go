package authz

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/user"
)

// ErrNotFound is matched (errors.Is) by the error for a role a binding
// refers to and that does not exist.
var ErrNotFound = errors.New("authz: role not found")

// ErrRoleRefKind is matched by the error for a roleRef whose kind is
// neither Role nor ClusterRole.
var ErrRoleRefKind = errors.New("authz: unsupported role reference kind")

// NotFoundError is a missing Role or ClusterRole. Its message is the one
// kube-apiserver gives: clusterrole.rbac.authorization.k8s.io "x" not found.
type NotFoundError struct {
	Kind      string // Role or ClusterRole
	Namespace string // of a Role
	Name      string
}

func (e *NotFoundError) Error() string {
	if e.Kind == "Role" {
		return fmt.Sprintf("role.rbac.authorization.k8s.io %q not found", e.Name)
	}
	return fmt.Sprintf("clusterrole.rbac.authorization.k8s.io %q not found", e.Name)
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

type nsName struct{ namespace, name string }

// RBAC is kube-apiserver's RBAC authorizer over Roles, ClusterRoles,
// RoleBindings and ClusterRoleBindings held in memory and updated object
// by object. Bindings are indexed by the users, service accounts and
// groups they name, so a decision looks only at the bindings of the
// requesting user and of its groups. Decisions may run concurrently with
// updates; objects handed to RBAC must not be modified afterwards.
type RBAC struct {
	mu sync.RWMutex // guards all fields; decisions hold it for reading

	roles               map[nsName]*rbacv1.Role
	clusterRoles        map[string]*clusterRole
	aggregators         map[string]*clusterRole // the cluster roles with an aggregationRule
	roleBindings        map[nsName]*binding
	clusterRoleBindings map[string]*binding

	cluster    *subjects            // ClusterRoleBindings
	namespaces map[string]*subjects // RoleBindings by namespace
}

// NewRBAC returns an RBAC authorizer with no roles or bindings: it allows
// nothing until fed.
func NewRBAC() *RBAC {
	return &RBAC{
		roles:               map[nsName]*rbacv1.Role{},
		clusterRoles:        map[string]*clusterRole{},
		aggregators:         map[string]*clusterRole{},
		roleBindings:        map[nsName]*binding{},
		clusterRoleBindings: map[string]*binding{},
		cluster:             newSubjects(),
		namespaces:          map[string]*subjects{},
	}
}

// Authorize allows a request that a rule of a role bound to its user (by
// name, service account or group) grants: ClusterRoleBindings for every
// request, RoleBindings of the request's namespace for namespaced ones.
// Otherwise it has no opinion; the reason then lists the roles that
// bindings of the user refer to and that do not exist, if any. A decision
// allocates nothing.
func (r *RBAC) Authorize(a Attributes) (Decision, string) {
	if a.User == nil {
		return NoOpinion, ""
	}
	name, groups := a.User.GetName(), a.User.GetGroups()
	r.mu.RLock()
	defer r.mu.RUnlock()
	dangling := false
	b := r.allowedBy(r.cluster, &a, name, groups, &dangling)
	if b == nil && a.Namespace != "" {
		b = r.allowedBy(r.namespaces[a.Namespace], &a, name, groups, &dangling)
	}
	if b != nil {
		if i := b.firstSubject(name, groups); i >= 0 {
			return Allow, b.reasons[i]
		}
		return Allow, "RBAC: allowed"
	}
	if !dangling {
		return NoOpinion, ""
	}
	_, err := r.rulesFor(name, groups, a.Namespace)
	return NoOpinion, "RBAC: " + err.Error()
}

// allowedBy returns a binding of idx that applies to the user and whose
// role grants a. It sets *dangling when a binding's role is missing.
func (r *RBAC) allowedBy(idx *subjects, a *Attributes, name string, groups []string, dangling *bool) *binding {
	if idx == nil {
		return nil
	}
	for _, b := range idx.users[name] {
		if r.grants(b, a, dangling) {
			return b
		}
	}
	for _, g := range groups {
		for _, b := range idx.groups[g] {
			if r.grants(b, a, dangling) {
				return b
			}
		}
	}
	return nil
}

func (r *RBAC) grants(b *binding, a *Attributes, dangling *bool) bool {
	rules, err := r.roleRules(b.namespace, &b.roleRef)
	if err != nil {
		*dangling = true
		return false
	}
	for i := range rules {
		if RuleAllows(a, &rules[i]) {
			return true
		}
	}
	return false
}

// roleRules resolves a binding's roleRef as upstream's
// GetRoleReferenceRules: a Role in the binding's namespace, or a
// ClusterRole. The error is allocated only when the role is missing.
// r.mu must be held.
func (r *RBAC) roleRules(namespace string, ref *rbacv1.RoleRef) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		if c := r.clusterRoles[ref.Name]; c != nil {
			return c.rules, nil
		}
	case "Role":
		if role := r.roles[nsName{namespace, ref.Name}]; role != nil {
			return role.Rules, nil
		}
	default:
		return nil, fmt.Errorf("%w: %q", ErrRoleRefKind, ref.Kind)
	}
	return nil, &NotFoundError{Kind: ref.Kind, Namespace: namespace, Name: ref.Name}
}

// RoleRefRules returns the rules of the role a binding in namespace ("" for
// a ClusterRoleBinding) refers to. The rules are shared: do not modify them.
func (r *RBAC) RoleRefRules(namespace string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.roleRules(namespace, &ref)
}

// ClusterRoleRules returns the rules a ClusterRole grants (for an
// aggregated one, the aggregated rules) and whether it exists. The rules
// are shared: do not modify them.
func (r *RBAC) ClusterRoleRules(name string) ([]rbacv1.PolicyRule, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := r.clusterRoles[name]
	if c == nil {
		return nil, false
	}
	return c.rules, true
}

// RulesFor returns every rule granted to u in namespace ("" for the
// cluster-wide rules only): those of its ClusterRoleBindings, then those
// of its RoleBindings in namespace, each binding in name order. The
// error lists the roles that bindings refer to and that do not exist; the
// rules are complete otherwise. It serves SelfSubjectRulesReview and the
// escalation checks. The rules' slices are shared: do not modify them.
func (r *RBAC) RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	if u == nil {
		return nil, nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.rulesFor(u.GetName(), u.GetGroups(), namespace)
}

func (r *RBAC) rulesFor(name string, groups []string, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	visit := func(idx *subjects) {
		for _, b := range applying(idx, name, groups) {
			rs, err := r.roleRules(b.namespace, &b.roleRef)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rules = append(rules, rs...)
		}
	}
	visit(r.cluster)
	if namespace != "" {
		visit(r.namespaces[namespace])
	}
	return rules, utilerrors.NewAggregate(errs)
}

// applying returns the bindings of idx that apply to the user, each once,
// sorted by name.
func applying(idx *subjects, name string, groups []string) []*binding {
	if idx == nil {
		return nil
	}
	seen := map[*binding]bool{}
	var out []*binding
	add := func(bs []*binding) {
		for _, b := range bs {
			if !seen[b] {
				seen[b] = true
				out = append(out, b)
			}
		}
	}
	add(idx.users[name])
	for _, g := range groups {
		add(idx.groups[g])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// UpsertRole adds or replaces a Role.
func (r *RBAC) UpsertRole(obj *rbacv1.Role) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roles[nsName{obj.Namespace, obj.Name}] = obj
}

// DeleteRole removes a Role; removing one that is not there is harmless.
func (r *RBAC) DeleteRole(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.roles, nsName{namespace, name})
}

// UpsertClusterRole adds or replaces a ClusterRole and updates the rules
// of the aggregated ClusterRoles it (or its previous version) feeds.
func (r *RBAC) UpsertClusterRole(obj *rbacv1.ClusterRole) {
	c := newClusterRole(obj)
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.clusterRoles[obj.Name]
	r.putClusterRole(c)
	if r.affectsAggregation(old) || r.affectsAggregation(c) {
		r.aggregate()
	}
}

func (r *RBAC) putClusterRole(c *clusterRole) {
	r.clusterRoles[c.obj.Name] = c
	if c.aggregated() {
		r.aggregators[c.obj.Name] = c
	} else {
		delete(r.aggregators, c.obj.Name)
	}
}

// DeleteClusterRole removes a ClusterRole and updates the aggregated
// ClusterRoles it fed.
func (r *RBAC) DeleteClusterRole(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.clusterRoles[name]
	if old == nil {
		return
	}
	affects := r.affectsAggregation(old)
	delete(r.clusterRoles, name)
	delete(r.aggregators, name)
	if affects {
		r.aggregate()
	}
}

// UpsertRoleBinding adds or replaces a RoleBinding.
func (r *RBAC) UpsertRoleBinding(obj *rbacv1.RoleBinding) {
	b := newBinding(obj.Namespace, obj.Name, obj.RoleRef, obj.Subjects)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.putRoleBinding(b)
}

func (r *RBAC) putRoleBinding(b *binding) {
	key := nsName{b.namespace, b.name}
	idx := r.namespaces[b.namespace]
	if idx == nil {
		idx = newSubjects()
		r.namespaces[b.namespace] = idx
	}
	if old := r.roleBindings[key]; old != nil {
		idx.remove(old)
	}
	r.roleBindings[key] = b
	idx.add(b)
}

// DeleteRoleBinding removes a RoleBinding.
func (r *RBAC) DeleteRoleBinding(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := nsName{namespace, name}
	old := r.roleBindings[key]
	if old == nil {
		return
	}
	delete(r.roleBindings, key)
	idx := r.namespaces[namespace]
	idx.remove(old)
	if idx.count == 0 {
		delete(r.namespaces, namespace)
	}
}

// UpsertClusterRoleBinding adds or replaces a ClusterRoleBinding.
func (r *RBAC) UpsertClusterRoleBinding(obj *rbacv1.ClusterRoleBinding) {
	b := newBinding("", obj.Name, obj.RoleRef, obj.Subjects)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.putClusterRoleBinding(b)
}

func (r *RBAC) putClusterRoleBinding(b *binding) {
	if old := r.clusterRoleBindings[b.name]; old != nil {
		r.cluster.remove(old)
	}
	r.clusterRoleBindings[b.name] = b
	r.cluster.add(b)
}

// DeleteClusterRoleBinding removes a ClusterRoleBinding.
func (r *RBAC) DeleteClusterRoleBinding(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.clusterRoleBindings[name]; old != nil {
		delete(r.clusterRoleBindings, name)
		r.cluster.remove(old)
	}
}

// ReplaceRoles replaces all Roles, as after a (re)list.
func (r *RBAC) ReplaceRoles(objs []*rbacv1.Role) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roles = make(map[nsName]*rbacv1.Role, len(objs))
	for _, obj := range objs {
		r.roles[nsName{obj.Namespace, obj.Name}] = obj
	}
}

// ReplaceClusterRoles replaces all ClusterRoles, as after a (re)list,
// computing aggregation once.
func (r *RBAC) ReplaceClusterRoles(objs []*rbacv1.ClusterRole) {
	crs := make([]*clusterRole, len(objs))
	for i, obj := range objs {
		crs[i] = newClusterRole(obj)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clusterRoles = make(map[string]*clusterRole, len(objs))
	r.aggregators = map[string]*clusterRole{}
	for _, c := range crs {
		r.putClusterRole(c)
	}
	r.aggregate()
}

// ReplaceRoleBindings replaces all RoleBindings, as after a (re)list.
func (r *RBAC) ReplaceRoleBindings(objs []*rbacv1.RoleBinding) {
	bs := make([]*binding, len(objs))
	for i, obj := range objs {
		bs[i] = newBinding(obj.Namespace, obj.Name, obj.RoleRef, obj.Subjects)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roleBindings = make(map[nsName]*binding, len(objs))
	r.namespaces = map[string]*subjects{}
	for _, b := range bs {
		r.putRoleBinding(b)
	}
}

// ReplaceClusterRoleBindings replaces all ClusterRoleBindings, as after a
// (re)list.
func (r *RBAC) ReplaceClusterRoleBindings(objs []*rbacv1.ClusterRoleBinding) {
	bs := make([]*binding, len(objs))
	for i, obj := range objs {
		bs[i] = newBinding("", obj.Name, obj.RoleRef, obj.Subjects)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clusterRoleBindings = make(map[string]*binding, len(objs))
	r.cluster = newSubjects()
	for _, b := range bs {
		r.putClusterRoleBinding(b)
	}
}

// Upsert adds or replaces a *rbacv1.Role, ClusterRole, RoleBinding or
// ClusterRoleBinding, as a watch event delivers it.
func (r *RBAC) Upsert(obj runtime.Object) error {
	switch o := obj.(type) {
	case *rbacv1.Role:
		r.UpsertRole(o)
	case *rbacv1.ClusterRole:
		r.UpsertClusterRole(o)
	case *rbacv1.RoleBinding:
		r.UpsertRoleBinding(o)
	case *rbacv1.ClusterRoleBinding:
		r.UpsertClusterRoleBinding(o)
	default:
		return fmt.Errorf("authz: cannot hold a %T", obj)
	}
	return nil
}

// Delete removes a *rbacv1.Role, ClusterRole, RoleBinding or
// ClusterRoleBinding (only its namespace and name are read).
func (r *RBAC) Delete(obj runtime.Object) error {
	switch o := obj.(type) {
	case *rbacv1.Role:
		r.DeleteRole(o.Namespace, o.Name)
	case *rbacv1.ClusterRole:
		r.DeleteClusterRole(o.Name)
	case *rbacv1.RoleBinding:
		r.DeleteRoleBinding(o.Namespace, o.Name)
	case *rbacv1.ClusterRoleBinding:
		r.DeleteClusterRoleBinding(o.Name)
	default:
		return fmt.Errorf("authz: cannot hold a %T", obj)
	}
	return nil
}
