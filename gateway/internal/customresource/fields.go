package customresource

import (
	"errors"
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/kgate/kgate/gateway/internal/fieldmanager"
	"github.com/kgate/kgate/storage/registry"
)

// Fields is the field manager of every other resource
// (fieldmanager.Managers).
type Fields interface {
	Update(res *registry.Resource, subresource string, live, obj runtime.Object, manager string) (runtime.Object, error)
	Apply(res *registry.Resource, subresource string, live runtime.Object, patch []byte, manager string, force bool) (runtime.Object, error)
}

// FieldManagers keeps managedFields and serves server-side apply of custom
// resources with upstream's CRD field manager
// (managedfields.NewDefaultCRDFieldManager, the strategy's reset fields),
// and passes other resources to the field manager it wraps. Its type
// converter is upstream's, from the CRD's OpenAPI models
// (applyTypeConverter).
type FieldManagers struct {
	next Fields
	sem  *Semantics

	mu sync.Mutex // guards managers and converters
	// managers by CRD value, version and subresource; dropped with the
	// CRD's semantics (Semantics.prune) on the next new entry.
	managers map[fieldsKey]*managedfields.FieldManager
	// converters by CRD value: one type converter serves every version
	// and subresource of a CRD, as upstream builds one per CRD (its
	// models hold every version; building them is the costly part).
	converters map[*apiextensionsv1.CustomResourceDefinition]managedfields.TypeConverter
}

type fieldsKey struct {
	crd         *apiextensionsv1.CustomResourceDefinition
	version     string
	subresource string
}

// NewFieldManagers returns the field managers of sem's custom resources
// over next.
func NewFieldManagers(sem *Semantics, next Fields) (*FieldManagers, error) {
	if sem == nil || next == nil {
		return nil, errors.New("cannot make custom resource field managers: semantics and the built-in field managers are required")
	}
	return &FieldManagers{
		next: next, sem: sem,
		managers:   map[fieldsKey]*managedfields.FieldManager{},
		converters: map[*apiextensionsv1.CustomResourceDefinition]managedfields.TypeConverter{},
	}, nil
}

// Update records manager's Update operation on obj over live (nil: a
// create), as upstream's handlers do (UpdateNoErrors).
func (f *FieldManagers) Update(res *registry.Resource, subresource string, live, obj runtime.Object, manager string) (runtime.Object, error) {
	if !res.Unstructured() || subresource == "scale" {
		// A scale subresource writes autoscaling/v1 Scales, whose
		// field manager is the built-in one (without reset fields, as
		// upstream's scale field manager of custom resources).
		return f.next.Update(res, subresource, live, obj, manager)
	}
	fm, err := f.managerFor(res, subresource)
	if err != nil {
		return nil, err
	}
	if live == nil {
		live = empty(res.GVK())
	}
	return fm.UpdateNoErrors(live, obj, manager), nil
}

// Apply merges an apply patch into live (nil: apply creates) for manager,
// as upstream's apply patcher does: conflicts are upstream's 409 unless
// force.
func (f *FieldManagers) Apply(res *registry.Resource, subresource string, live runtime.Object, patch []byte, manager string, force bool) (runtime.Object, error) {
	if !res.Unstructured() || subresource == "scale" {
		return f.next.Apply(res, subresource, live, patch, manager, force)
	}
	fm, err := f.managerFor(res, subresource)
	if err != nil {
		return nil, err
	}
	if live == nil {
		live = empty(res.GVK())
	}
	// Integers decode as int64, as they come out of etcd: the
	// strategy's CEL rules refuse a float64 where the schema says
	// integer.
	patchObj := &unstructured.Unstructured{Object: map[string]any{}}
	j, err := yaml.YAMLToJSON(patch)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", fieldmanager.ErrDecode, err)
	}
	if err := utiljson.Unmarshal(j, &patchObj.Object); err != nil {
		return nil, fmt.Errorf("%w: %w", fieldmanager.ErrDecode, err)
	}
	return fm.Apply(live, patchObj, manager, force)
}

func empty(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u
}

// managerFor returns the field manager of res's subresource ("" or
// "status"), made once per CRD value.
func (f *FieldManagers) managerFor(res *registry.Resource, subresource string) (*managedfields.FieldManager, error) {
	k := fieldsKey{res.CRD, res.Version, subresource}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.managers[k]; ok {
		return fm, nil
	}
	v, err := f.sem.version(res.CRD, res.Version)
	if err != nil {
		return nil, err
	}
	strat := v.main
	if subresource == "status" && v.status != nil {
		strat = v.status
	}
	var reset map[fieldpath.APIVersion]fieldpath.Filter
	if r, ok := strat.(interface {
		GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set
	}); ok {
		reset = fieldpath.NewExcludeFilterSetMap(r.GetResetFields())
	}
	gvk := res.GVK()
	tc, ok := f.converters[res.CRD]
	if !ok {
		if tc, err = applyTypeConverter(res.CRD); err != nil {
			return nil, fmt.Errorf("cannot make the field manager of %v: %w", gvk, err)
		}
		f.converters[res.CRD] = tc
	}
	fm, err := managedfields.NewDefaultCRDFieldManager(tc, noneConvertor{},
		defaulter{v}, creater{}, gvk, gvk.GroupVersion(), subresource, reset)
	if err != nil {
		return nil, fmt.Errorf("cannot make the field manager of %v: %w", gvk, err)
	}
	live := map[*apiextensionsv1.CustomResourceDefinition]bool{}
	for _, r := range f.sem.reg.Resources() {
		if r.CRD != nil {
			live[r.CRD] = true
		}
	}
	for old := range f.managers {
		if !live[old.crd] {
			delete(f.managers, old)
		}
	}
	for old := range f.converters {
		if !live[old] {
			delete(f.converters, old)
		}
	}
	f.managers[k] = fm
	return fm, nil
}

// noneConvertor converts custom resources between versions as upstream's
// "None" conversion strategy does (conversion.nopConverter): only
// apiVersion changes.
type noneConvertor struct{}

func (noneConvertor) Convert(in, out, _ any) error {
	u, ok1 := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	gvk := o.GroupVersionKind()
	o.Object = u.DeepCopy().Object
	if !gvk.Empty() {
		o.SetAPIVersion(gvk.GroupVersion().String())
	}
	return nil
}

func (noneConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("cannot convert %v to %v", u.GroupVersionKind(), target)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(gvk)
	return out, nil
}

func (noneConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// defaulter applies a version's schema defaults, as upstream's
// unstructuredDefaulter does for its field manager.
type defaulter struct{ v *version }

func (d defaulter) Default(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		d.v.defaults(u)
	}
}

// creater makes empty custom resources (upstream's unstructuredCreator).
type creater struct{}

func (creater) New(kind schema.GroupVersionKind) (runtime.Object, error) { return empty(kind), nil }
