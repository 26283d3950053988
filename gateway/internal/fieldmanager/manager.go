// Package fieldmanager keeps metadata.managedFields on kgate's writes and
// merges server-side apply patches, with kube-apiserver's own field manager
// (k8s.io/apimachinery/pkg/util/managedfields, structured-merge-diff): one
// upstream FieldManager per served kind and subresource, built as
// k8s.io/apiserver's installer builds it (the kind, the internal hub
// version, the subresource, the fields its strategy resets), over one type
// converter built at startup from upstream's generated OpenAPI definitions.
// Objects go in and come out in the version the resource serves.
//
// What a conflict becomes is upstream's: Apply returns the StatusError
// managedfields builds (409 Conflict, one cause per conflicting field),
// which the gateway's error adapter passes through apierror.Status.
package fieldmanager

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/kgate/kgate/storage/registry"
)

var (
	// ErrDecode is returned (wrapped) for an apply patch that is not a
	// YAML or JSON object.
	ErrDecode = errors.New("fieldmanager: cannot decode the apply patch")
	// ErrUnsupported is returned by Apply for a kind that is not in the
	// scheme (a resource added at run time): its fields are not managed.
	ErrUnsupported = errors.New("fieldmanager: no field manager for the kind")
)

// ResetFieldsFunc returns the fields the strategy of res's subresource
// resets, as upstream's installer hands them to the field manager
// (builtin.Semantics.ResetFields).
type ResetFieldsFunc func(res *registry.Resource, subresource string) (map[fieldpath.APIVersion]fieldpath.Filter, error)

// Config configures a Managers.
type Config struct {
	// Scheme holds upstream's internal and versioned types, their
	// conversions and defaulters (builtin.Semantics.Scheme).
	Scheme *runtime.Scheme
	// TypeConverter is NewTypeConverter(Scheme), built once per process.
	TypeConverter managedfields.TypeConverter
	// ResetFields of a resource's subresource strategy.
	ResetFields ResetFieldsFunc
}

// Managers holds one upstream FieldManager per served kind and
// subresource, made on first use. It is safe for concurrent use.
type Managers struct {
	cfg Config

	mu sync.Mutex // guards managers
	// managers by served kind and subresource ("", "status", "scale",
	// ...); the scale subresource's is of autoscaling/v1 Scale.
	managers map[key]*managedfields.FieldManager
}

type key struct {
	gvk         schema.GroupVersionKind
	subresource string
}

// New returns the field managers of cfg.
func New(cfg Config) (*Managers, error) {
	if cfg.Scheme == nil || cfg.TypeConverter == nil || cfg.ResetFields == nil {
		return nil, errors.New("cannot make field managers: Scheme, TypeConverter and ResetFields are required")
	}
	return &Managers{cfg: cfg, managers: make(map[key]*managedfields.FieldManager)}, nil
}

// managerFor returns the FieldManager of kind gvk written through res's
// subresource: gvk is res's kind, or autoscaling/v1 Scale for "scale".
func (m *Managers) managerFor(res *registry.Resource, subresource string, gvk schema.GroupVersionKind) (*managedfields.FieldManager, error) {
	if !m.cfg.Scheme.Recognizes(gvk) {
		return nil, fmt.Errorf("cannot manage the fields of %s: %w", gvk, ErrUnsupported)
	}
	k := key{gvk: gvk, subresource: subresource}
	m.mu.Lock()
	defer m.mu.Unlock()
	if fm, ok := m.managers[k]; ok {
		return fm, nil
	}
	reset, err := m.cfg.ResetFields(res, subresource)
	if err != nil {
		return nil, fmt.Errorf("cannot make the field manager of %s: %w", gvk, err)
	}
	hub := schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal}
	fm, err := managedfields.NewDefaultFieldManager(m.cfg.TypeConverter, runtime.UnsafeObjectConvertor(m.cfg.Scheme),
		m.cfg.Scheme, m.cfg.Scheme, gvk, hub, subresource, reset)
	if err != nil {
		return nil, fmt.Errorf("cannot make the field manager of %s: %w", gvk, err)
	}
	m.managers[k] = fm
	return fm, nil
}

// kindOf is the kind written through res's subresource.
func kindOf(res *registry.Resource, subresource string) schema.GroupVersionKind {
	if subresource == "scale" {
		return scaleGVK
	}
	return res.GVK()
}

// Update records manager's Update operation on obj, the object about to be
// stored over live (nil for a create), both in the kind written through
// res's subresource, as upstream's create, update and non-apply patch
// handlers do (FieldManager.UpdateNoErrors): the fields obj changes are
// owned by manager; a managedFields list sent empty resets them; one the
// client left out keeps live's. It returns obj with its managedFields set;
// a failure of the field manager keeps live's managedFields, as upstream.
// Objects of a kind the scheme does not know are returned as they are.
func (m *Managers) Update(res *registry.Resource, subresource string, live, obj runtime.Object, manager string) (runtime.Object, error) {
	gvk := kindOf(res, subresource)
	fm, err := m.managerFor(res, subresource, gvk)
	if errors.Is(err, ErrUnsupported) {
		return obj, nil
	}
	if err != nil {
		return nil, err
	}
	if live == nil {
		if live, err = m.cfg.Scheme.New(gvk); err != nil {
			return nil, fmt.Errorf("cannot make an empty %s: %w", gvk, err)
		}
	}
	setKind(obj, gvk)
	setKind(live, gvk)
	return fm.UpdateNoErrors(live, obj, manager), nil
}

// Apply merges patch, an apply configuration in YAML or JSON, into live
// (nil when the object does not exist yet: apply creates it) for manager,
// as upstream's apply patcher does: force takes the fields other managers
// own; without it, a field another manager owns with a different value is
// a conflict (upstream's 409 StatusError, nothing merged). It returns the
// merged object in the kind written through res's subresource, with its
// managedFields.
func (m *Managers) Apply(res *registry.Resource, subresource string, live runtime.Object, patch []byte, manager string, force bool) (runtime.Object, error) {
	gvk := kindOf(res, subresource)
	fm, err := m.managerFor(res, subresource, gvk)
	if err != nil {
		return nil, err
	}
	if live == nil {
		if live, err = m.cfg.Scheme.New(gvk); err != nil {
			return nil, fmt.Errorf("cannot make an empty %s: %w", gvk, err)
		}
	}
	setKind(live, gvk)
	patchObj := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(patch, &patchObj.Object); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	merged, err := fm.Apply(live, patchObj, manager, force)
	if err != nil {
		return nil, err
	}
	out, err := m.cfg.Scheme.ConvertToVersion(merged, gvk.GroupVersion())
	if err != nil {
		return nil, fmt.Errorf("cannot convert the applied %s back: %w", gvk, err)
	}
	return out, nil
}

// StrictCheck reports what upstream's apply patcher reports for
// fieldValidation Strict or Warn: the patch decoded strictly (duplicate
// fields), an error when it is not.
func StrictCheck(patch []byte) error {
	return yaml.UnmarshalStrict(patch, &map[string]any{})
}

// setKind sets the kind of a typed object that has none (objects decoded
// into a Go type or converted may carry an empty TypeMeta); the field
// manager looks the kind up in the type converter by it.
func setKind(obj runtime.Object, gvk schema.GroupVersionKind) {
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
}

// Name returns the manager of a write, as upstream names it: the request's
// fieldManager option, else the user agent up to its first "/", without
// unprintable characters and cut to the longest manager name allowed.
func Name(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	var b strings.Builder
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
