package authz

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// binding is a RoleBinding or ClusterRoleBinding as the index keeps it.
type binding struct {
	namespace string // "" for a ClusterRoleBinding
	name      string
	roleRef   rbacv1.RoleRef
	subjects  []rbacv1.Subject
	// reasons[i] is the Allow reason when subjects[i] is the subject that
	// matched, made once here so that a decision does not format strings.
	reasons []string
	// keys are the index entries this binding is filed under.
	keys []subjectKey
}

type subjectKey struct {
	group bool   // a Group subject; otherwise a user name (User or ServiceAccount)
	name  string // the user name or group name
}

func newBinding(namespace, name string, roleRef rbacv1.RoleRef, subjects []rbacv1.Subject) *binding {
	b := &binding{namespace: namespace, name: name, roleRef: roleRef, subjects: subjects,
		reasons: make([]string, len(subjects))}
	for i := range subjects {
		s := &subjects[i]
		b.reasons[i] = "RBAC: allowed by " + describeBinding(b, s)
		var k subjectKey
		switch s.Kind {
		case rbacv1.UserKind:
			k = subjectKey{name: s.Name}
		case rbacv1.GroupKind:
			k = subjectKey{group: true, name: s.Name}
		case rbacv1.ServiceAccountKind:
			// A service account without a namespace is one of the
			// binding's namespace; in a ClusterRoleBinding it matches
			// no one.
			ns := s.Namespace
			if ns == "" {
				ns = namespace
			}
			if ns == "" {
				continue
			}
			k = subjectKey{name: serviceaccount.MakeUsername(ns, s.Name)}
		default:
			continue
		}
		dup := false
		for _, have := range b.keys {
			if have == k {
				dup = true
				break
			}
		}
		if !dup {
			b.keys = append(b.keys, k)
		}
	}
	return b
}

// describeBinding is upstream's clusterRoleBindingDescriber and
// roleBindingDescriber.
func describeBinding(b *binding, s *rbacv1.Subject) string {
	subject := fmt.Sprintf("%s %q", s.Kind, s.Name)
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = b.namespace
		}
		subject = fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	if b.namespace == "" {
		return fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.name, b.roleRef.Kind, b.roleRef.Name, subject)
	}
	return fmt.Sprintf("RoleBinding %q of %s %q to %s", b.name+"/"+b.namespace, b.roleRef.Kind, b.roleRef.Name, subject)
}

// firstSubject is the index of the first subject of b that u is, as
// upstream's appliesTo reports it, or -1.
func (b *binding) firstSubject(name string, groups []string) int {
	for i := range b.subjects {
		s := &b.subjects[i]
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == name {
				return i
			}
		case rbacv1.GroupKind:
			for _, g := range groups {
				if g == s.Name {
					return i
				}
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = b.namespace
			}
			if ns != "" && serviceaccount.MatchesUsername(ns, s.Name, name) {
				return i
			}
		}
	}
	return -1
}

// subjects indexes the bindings of one scope (the cluster, or one
// namespace) by the user names and group names they grant to.
type subjects struct {
	users  map[string][]*binding
	groups map[string][]*binding
	count  int // bindings filed here
}

func newSubjects() *subjects {
	return &subjects{users: map[string][]*binding{}, groups: map[string][]*binding{}}
}

func (s *subjects) add(b *binding) {
	for _, k := range b.keys {
		m := s.users
		if k.group {
			m = s.groups
		}
		m[k.name] = append(m[k.name], b)
	}
	s.count++
}

func (s *subjects) remove(b *binding) {
	for _, k := range b.keys {
		m := s.users
		if k.group {
			m = s.groups
		}
		list := m[k.name]
		for i, have := range list {
			if have == b {
				// Readers never see list while a writer holds the lock,
				// so it is changed in place.
				copy(list[i:], list[i+1:])
				list[len(list)-1] = nil
				list = list[:len(list)-1]
				break
			}
		}
		if len(list) == 0 {
			delete(m, k.name)
		} else {
			m[k.name] = list
		}
	}
	s.count--
}
