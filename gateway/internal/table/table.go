// Package table renders objects as metav1.Table for server-side printing
// (kubectl get asks for "application/json;as=Table;v=v1;g=meta.k8s.io")
// with kube-apiserver's own printers: the objects are converted to
// upstream's internal types (the scheme of builtin.Semantics) and printed by
// k8s.io/kubernetes/pkg/printers/internalversion through
// pkg/printers/storage.TableConvertor, as kube-apiserver's registries do.
// CustomResourceDefinitions are printed by apiextensions-apiserver's own
// convertor (Scope, Versions, Established, ...), as its CRD registry does.
// A kind upstream has no printer for (Role, ClusterRole, LimitRange, the
// kinds added at run time) gets kube-apiserver's default table, Name and
// Created At (k8s.io/apiserver/pkg/registry/rest.NewDefaultTableConvertor).
//
// Like kube-apiserver, every row carries all columns, the "wide" ones
// (priority 1) included: kubectl hides them unless asked for -o wide.
// Ages are relative to the wall clock, as upstream's printers compute them.
package table

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	"reflect"

	crdtable "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition/tableconvertor"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
	printerstorage "k8s.io/kubernetes/pkg/printers/storage"

	"github.com/kgate/kgate/storage/registry"
)

// ErrIncludeObject is returned for an includeObject value other than
// None, Metadata, Object or empty; kube-apiserver answers it with 400
// BadRequest ("unrecognized includeObject value").
var ErrIncludeObject = errors.New("table: unrecognized includeObject value")

// ErrObjectType is returned when an object is not of the Go type the
// resource is served as.
var ErrObjectType = errors.New("table: object of unexpected type")

// Converter prints objects with upstream's printers. It is immutable
// after New and safe for concurrent use.
type Converter struct {
	scheme *runtime.Scheme
	// printers is kube-apiserver's table convertor for the kinds with a
	// printer; printed holds the internal types (objects and lists) it
	// has a printer for.
	printers printerstorage.TableConvertor
	printed  map[reflect.Type]bool
	// own are the table convertors upstream registries configure for
	// kinds outside the printers, by group and kind; they print the
	// internal type too.
	own map[schema.GroupKind]genericrest.TableConvertor
}

// New builds upstream's table generator, once for all calls, over s, a
// scheme with upstream's internal types and their conversions
// (builtin.Semantics.Scheme), which it only reads.
func New(s *runtime.Scheme) (*Converter, error) {
	if s == nil {
		return nil, errors.New("cannot make table converter: a scheme is required")
	}
	gen := printers.NewTableGenerator()
	rec := &recorder{gen: gen, types: make(map[reflect.Type]bool)}
	printersinternal.AddHandlers(rec)
	if rec.err != nil {
		return nil, fmt.Errorf("cannot make table converter: %w", rec.err)
	}
	return &Converter{scheme: s, printers: printerstorage.TableConvertor{TableGenerator: gen}, printed: rec.types,
		own: map[schema.GroupKind]genericrest.TableConvertor{
			{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: crdtable.New(),
		}}, nil
}

// recorder registers upstream's print handlers with the generator and
// notes the types they print.
type recorder struct {
	gen   *printers.HumanReadableGenerator
	types map[reflect.Type]bool
	err   error
}

func (r *recorder) TableHandler(columns []metav1.TableColumnDefinition, printFunc any) error {
	if err := r.gen.TableHandler(columns, printFunc); err != nil {
		r.err = errors.Join(r.err, err)
		return err
	}
	r.types[reflect.TypeOf(printFunc).In(0)] = true
	return nil
}

// Convert renders objs, a list of objects of resource res as decoded with
// the registry's scheme (the served kind's Go type: *appsv1.Deployment for
// deployments), as a Table, with upstream's printer of the list (which
// may differ from printing each object: the list of StorageClasses marks
// the effective default).
//
// includeObject selects what each row's object holds, as in
// kube-apiserver: "Metadata" (or empty, the default) a
// meta.k8s.io/v1 PartialObjectMetadata, "Object" the full object with its
// apiVersion and kind set (a copy: objs are not modified), "None" nothing.
//
// The caller sets the Table's resourceVersion, continue and
// remainingItemCount from the list it printed.
func (c *Converter) Convert(objs []runtime.Object, res *registry.Resource, includeObject string) (*metav1.Table, error) {
	return c.convert(objs, true, res, includeObject)
}

// ConvertObject renders one object, as kube-apiserver does for a get, a
// create or update response and each watch event. For a watch,
// kube-apiserver sends the column definitions with the first event only:
// the caller clears ColumnDefinitions on later events. The caller sets the
// Table's resourceVersion.
func (c *Converter) ConvertObject(obj runtime.Object, res *registry.Resource, includeObject string) (*metav1.Table, error) {
	return c.convert([]runtime.Object{obj}, false, res, includeObject)
}

func (c *Converter) convert(objs []runtime.Object, list bool, res *registry.Resource, includeObject string) (*metav1.Table, error) {
	policy := metav1.IncludeObjectPolicy(includeObject)
	switch policy {
	case "", metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
	default:
		return nil, fmt.Errorf("%w: %q", ErrIncludeObject, includeObject)
	}
	t, err := c.generate(objs, list, res)
	if err != nil {
		return nil, fmt.Errorf("cannot print %s: %w", res.Resource, err)
	}
	if len(t.Rows) != len(objs) {
		return nil, fmt.Errorf("cannot print %s: %d rows for %d objects", res.Resource, len(t.Rows), len(objs))
	}
	t.TypeMeta = metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "Table"}
	for i := range t.Rows {
		row := &t.Rows[i]
		switch policy {
		case metav1.IncludeNone:
			row.Object = runtime.RawExtension{}
		case metav1.IncludeObject:
			// kube-apiserver converts the printed object back to the
			// served version: the object as decoded, with its kind.
			out := objs[i].DeepCopyObject()
			out.GetObjectKind().SetGroupVersionKind(res.GVK())
			row.Object = runtime.RawExtension{Object: out}
		default:
			m, err := meta.Accessor(row.Object.Object)
			if err != nil {
				return nil, fmt.Errorf("cannot read metadata of %T: %w", row.Object.Object, err)
			}
			partial := meta.AsPartialObjectMetadata(m)
			partial.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
			row.Object = runtime.RawExtension{Object: partial}
		}
	}
	return t, nil
}

// generate prints objs, as a list or the one object, with upstream's
// printer of the kind, given the internal type as kube-apiserver's
// registry gives it, or with the default table if upstream has none.
func (c *Converter) generate(objs []runtime.Object, list bool, res *registry.Resource) (*metav1.Table, error) {
	if res.Unstructured() {
		return customResourceTable(objs, list, res)
	}
	kind := res.Kind
	if list {
		kind += "List"
	}
	var conv genericrest.TableConvertor = c.printers
	own, isOwn := c.own[schema.GroupKind{Group: res.Group, Kind: res.Kind}]
	if isOwn {
		conv = own
	}
	out, err := c.scheme.New(schema.GroupVersionKind{Group: res.Group, Version: runtime.APIVersionInternal, Kind: kind})
	if err != nil || (!isOwn && !c.printed[reflect.TypeOf(out)]) {
		gr := schema.GroupResource{Group: res.Group, Resource: res.Resource}
		if !list {
			return genericrest.NewDefaultTableConvertor(gr).ConvertToTable(context.Background(), objs[0], nil)
		}
		items := make([]runtime.RawExtension, len(objs))
		for i, o := range objs {
			items[i].Object = o
		}
		in := &metav1.List{Items: items}
		return genericrest.NewDefaultTableConvertor(gr).ConvertToTable(context.Background(), in, nil)
	}
	if !list {
		if err := c.scheme.Convert(objs[0], out, nil); err != nil {
			return nil, fmt.Errorf("%w: cannot convert %T to the internal type: %w", ErrObjectType, objs[0], err)
		}
		return conv.ConvertToTable(context.Background(), out, nil)
	}
	ptr, err := meta.GetItemsPtr(out)
	if err != nil {
		return nil, err
	}
	items := reflect.ValueOf(ptr).Elem()
	items.Set(reflect.MakeSlice(items.Type(), len(objs), len(objs)))
	for i, o := range objs {
		if err := c.scheme.Convert(o, items.Index(i).Addr().Interface(), nil); err != nil {
			return nil, fmt.Errorf("%w: cannot convert %T to the internal type: %w", ErrObjectType, o, err)
		}
	}
	return conv.ConvertToTable(context.Background(), out, nil)
}

// customResourceTable prints custom resources with the CRD's
// additionalPrinterColumns (Name and Age when it has none) through
// apiextensions-apiserver's table convertor, falling back to the default
// table when the columns do not parse, as kube-apiserver does.
func customResourceTable(objs []runtime.Object, list bool, res *registry.Resource) (*metav1.Table, error) {
	gr := schema.GroupResource{Group: res.Group, Resource: res.Resource}
	var tc interface {
		ConvertToTable(context.Context, runtime.Object, runtime.Object) (*metav1.Table, error)
	} = genericrest.NewDefaultTableConvertor(gr)
	if columns, err := crdColumns(res); err == nil {
		if t, err := tableconvertor.New(columns); err == nil {
			tc = t
		}
	}
	if !list {
		return tc.ConvertToTable(context.Background(), objs[0], nil)
	}
	items := make([]runtime.RawExtension, len(objs))
	for i, o := range objs {
		items[i].Object = o
	}
	return tc.ConvertToTable(context.Background(), &metav1.List{Items: items}, nil)
}

// crdColumns returns the columns of res's version as upstream serves
// them (apiextensions.GetColumnsForVersion: Age added when there are
// none), through the internal types upstream's helper takes.
func crdColumns(res *registry.Resource) ([]apiextensionsv1.CustomResourceColumnDefinition, error) {
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(res.CRD, internal, nil); err != nil {
		return nil, err
	}
	cols, err := apiextensions.GetColumnsForVersion(internal, res.Version)
	if err != nil {
		return nil, err
	}
	out := make([]apiextensionsv1.CustomResourceColumnDefinition, len(cols))
	for i := range cols {
		if err := apiextensionsv1.Convert_apiextensions_CustomResourceColumnDefinition_To_v1_CustomResourceColumnDefinition(&cols[i], &out[i], nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}
