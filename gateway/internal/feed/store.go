package feed

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Store holds the objects of one resource, as a feed left them: the Sink
// of Config.Resources. Readers must not change the objects they get.
type Store struct {
	mu   sync.RWMutex              // guards objs and gen
	objs map[string]runtime.Object // by namespace/name
	gen  uint64                    // bumped on each change
}

// NewStore returns a store holding objs (tests of plugins; the feed's
// own stores start empty).
func NewStore(objs ...runtime.Object) *Store {
	s := &Store{objs: map[string]runtime.Object{}}
	s.Replace(objs)
	return s
}

func key(obj runtime.Object) (string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	return m.GetNamespace() + "/" + m.GetName(), nil
}

// Replace holds objs instead of what the store held; objects without
// metadata are left out.
func (s *Store) Replace(objs []runtime.Object) {
	m := make(map[string]runtime.Object, len(objs))
	for _, o := range objs {
		if k, err := key(o); err == nil {
			m[k] = o
		}
	}
	s.mu.Lock()
	s.objs = m
	s.gen++
	s.mu.Unlock()
}

// Upsert adds or replaces obj.
func (s *Store) Upsert(obj runtime.Object) error {
	k, err := key(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.objs[k] = obj
	s.gen++
	s.mu.Unlock()
	return nil
}

// Delete removes obj.
func (s *Store) Delete(obj runtime.Object) error {
	k, err := key(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.objs, k)
	s.gen++
	s.mu.Unlock()
	return nil
}

// Get returns the object namespace/name ("" for cluster-scoped).
func (s *Store) Get(namespace, name string) (runtime.Object, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objs[namespace+"/"+name]
	return o, ok
}

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
