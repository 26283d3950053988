package feed

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage/registry"
)

// Store holds the objects of one resource, as a feed left them. Readers
// must not change the objects they get.
type Store struct {
	res      *registry.Resource
	rangeIDs []string

	mu   sync.RWMutex              // guards objs and gen
	objs map[string]runtime.Object // by namespace/name
	gen  uint64                    // bumped on each change
}

// NewStore returns a store of res holding objs, for tests of plugins.
func NewStore(res *registry.Resource, objs ...runtime.Object) *Store {
	s := &Store{res: res, objs: map[string]runtime.Object{}}
	s.replace(objs)
	return s
}

func key(obj runtime.Object) (string, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	return m.GetNamespace() + "/" + m.GetName(), true
}

func (s *Store) replace(objs []runtime.Object) {
	m := make(map[string]runtime.Object, len(objs))
	for _, o := range objs {
		if k, ok := key(o); ok {
			m[k] = o
		}
	}
	s.mu.Lock()
	s.objs = m
	s.gen++
	s.mu.Unlock()
}

func (s *Store) upsert(obj runtime.Object) {
	k, ok := key(obj)
	if !ok {
		return
	}
	s.mu.Lock()
	s.objs[k] = obj
	s.gen++
	s.mu.Unlock()
}

func (s *Store) delete(obj runtime.Object) {
	k, ok := key(obj)
	if !ok {
		return
	}
	s.mu.Lock()
	delete(s.objs, k)
	s.gen++
	s.mu.Unlock()
}

// Upsert adds or replaces obj (tests; the feed's own changes).
func (s *Store) Upsert(obj runtime.Object) { s.upsert(obj) }

// Generation changes whenever the store does: callers may cache what
// they derive from List.
func (s *Store) Generation() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gen
}

// List returns the objects in namespace ns ("" for every object), by
// namespace and name.
func (s *Store) List(ns string) []runtime.Object {
	s.mu.RLock()
	keys := make([]string, 0, len(s.objs))
	out := make([]runtime.Object, 0, len(s.objs))
	for k := range s.objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o := s.objs[k]
		if ns != "" {
			if m, err := meta.Accessor(o); err != nil || m.GetNamespace() != ns {
				continue
			}
		}
		out = append(out, o)
	}
	s.mu.RUnlock()
	return out
}
