package storage

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage/registry"
)

// typeInfo is what generation tracking needs to know about a Go type.
type typeInfo struct {
	// compared are the indexes of the struct fields outside type meta,
	// metadata and status: a change there bumps the generation.
	compared []int
}

// info returns the typeInfo of obj's type, computed once per type.
func (s *Store) info(obj runtime.Object) *typeInfo {
	t := reflect.TypeOf(obj)
	if ti, ok := s.types.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := &typeInfo{}
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		st := t.Elem()
		for i := 0; i < st.NumField(); i++ {
			f := st.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Anonymous || name == "-" || !f.IsExported():
				// TypeMeta (inline) and fields not serialized
			case name == "metadata" || name == "status":
			default:
				ti.compared = append(ti.compared, i)
			}
		}
	}
	actual, _ := s.types.LoadOrStore(t, ti)
	return actual.(*typeInfo)
}

// tracksGeneration reports whether obj tracks metadata.generation: typed
// objects of resources whose strategy does so upstream, custom resources
// (upstream's custom resource strategy sets 1 on every create), other
// unstructured objects with a spec.
func (s *Store) tracksGeneration(res *registry.Resource, obj runtime.Object) bool {
	if res.Unstructured() {
		return true
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object["spec"] != nil
	}
	return res.Generation
}

// specChanged reports whether anything outside metadata and status differs
// between two objects of the same type.
func (s *Store) specChanged(old, cur runtime.Object) bool {
	if u, ok := cur.(*unstructured.Unstructured); ok {
		o, ok := old.(*unstructured.Unstructured)
		return !ok || !equality.Semantic.DeepEqual(withoutMeta(o.Object), withoutMeta(u.Object))
	}
	if reflect.TypeOf(old) != reflect.TypeOf(cur) {
		return true
	}
	a, b := reflect.ValueOf(old).Elem(), reflect.ValueOf(cur).Elem()
	for _, i := range s.info(cur).compared {
		if !equality.Semantic.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			return true
		}
	}
	return false
}

// withoutMeta returns a shallow copy of an unstructured object without
// apiVersion, kind, metadata and status.
func withoutMeta(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		default:
			out[k] = v
		}
	}
	return out
}
