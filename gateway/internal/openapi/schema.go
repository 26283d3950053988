package openapi

import (
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// dialect is the OpenAPI version a set of definitions is written for.
type dialect int

const (
	// v2 (Swagger 2.0): references are "#/definitions/<name>" and carry
	// their description beside "$ref".
	v2 dialect = iota
	// v3 (OpenAPI 3.0): references are "#/components/schemas/<name>"; a
	// described reference is wrapped in allOf, as kube-apiserver does,
	// because JSON Schema ignores siblings of "$ref".
	v3
)

func (d dialect) refPrefix() string {
	if d == v2 {
		return "#/definitions/"
	}
	return "#/components/schemas/"
}

// definitions builds the OpenAPI schema of Go API types by reflection: one
// definition per named struct (and per type with its own JSON form, such
// as Time or Quantity), named like kube-apiserver names them
// ("io.k8s.api.apps.v1.Deployment"). Field descriptions come from the
// types' generated SwaggerDoc methods, merge strategies from their
// patchStrategy/patchMergeKey tags and from listTypes, kinds from the
// scheme. It does not publish "required" (see New).
type definitions struct {
	dialect dialect
	schemas map[string]*spec.Schema
	names   map[reflect.Type]string
	gvks    map[reflect.Type][]schema.GroupVersionKind
	lists   *listTypes
}

func newDefinitions(d dialect, gvks map[reflect.Type][]schema.GroupVersionKind, lists *listTypes) *definitions {
	return &definitions{
		dialect: d,
		schemas: map[string]*spec.Schema{},
		names:   map[reflect.Type]string{},
		gvks:    gvks,
		lists:   lists,
	}
}

// Types whose JSON form is not their Go structure and that implement no
// OpenAPISchemaType method.
var (
	rawExtensionType = reflect.TypeFor[runtime.RawExtension]()
	fieldsV1Type     = reflect.TypeFor[metav1.FieldsV1]()
)

// schemaTyper is implemented by types with a custom JSON form (Time,
// MicroTime, Duration, Quantity, IntOrString).
type schemaTyper interface {
	OpenAPISchemaType() []string
	OpenAPISchemaFormat() string
}

// oneOfTyper is implemented by types whose JSON form has several types
// (Quantity, IntOrString); OpenAPI v3 publishes them as oneOf.
type oneOfTyper interface {
	OpenAPIV3OneOfTypes() []string
}

type swaggerDocer interface {
	SwaggerDoc() map[string]string
}

// isDefinition reports whether t gets a definition of its own rather than
// an inline schema.
func isDefinition(t reflect.Type) bool {
	if t == rawExtensionType || t == fieldsV1Type {
		return true
	}
	if _, ok := reflect.Zero(t).Interface().(schemaTyper); ok && t.Name() != "" {
		return true
	}
	return t.Kind() == reflect.Struct && t.Name() != ""
}

// modelName is the definition name kube-apiserver uses for t.
func modelName(t reflect.Type) string {
	if n, ok := reflect.Zero(t).Interface().(util.OpenAPIModelNamer); ok {
		return n.OpenAPIModelName()
	}
	return util.ToRESTFriendlyName(t.PkgPath() + "." + t.Name())
}

func swaggerDoc(t reflect.Type) map[string]string {
	if d, ok := reflect.Zero(t).Interface().(swaggerDocer); ok {
		return d.SwaggerDoc()
	}
	return nil
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// define makes sure t has a definition and returns its name.
func (d *definitions) define(t reflect.Type) string {
	t = deref(t)
	if name, ok := d.names[t]; ok {
		return name
	}
	name := modelName(t)
	d.names[t] = name
	s := &spec.Schema{}
	d.schemas[name] = s // before building: types may refer to themselves
	*s = d.build(t, name)
	return name
}

// ref returns a reference to the definition name.
func (d *definitions) ref(name string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(d.dialect.refPrefix() + name)}}
}

// build returns the definition of t.
func (d *definitions) build(t reflect.Type, name string) spec.Schema {
	var s spec.Schema
	s.Description = swaggerDoc(t)[""]
	zero := reflect.Zero(t).Interface()
	switch {
	case t == rawExtensionType || t == fieldsV1Type:
		s.Type = spec.StringOrArray{"object"}
	case isSchemaTyper(zero):
		typer := zero.(schemaTyper)
		s.Format = typer.OpenAPISchemaFormat()
		if oneOf, ok := zero.(oneOfTyper); ok && d.dialect == v3 {
			for _, typ := range oneOf.OpenAPIV3OneOfTypes() {
				s.OneOf = append(s.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}}})
			}
		} else {
			s.Type = spec.StringOrArray(typer.OpenAPISchemaType())
		}
	default:
		s.Type = spec.StringOrArray{"object"}
		s.Properties = map[string]spec.Schema{}
		d.addFields(&s, t, name)
		if d.lists.atomicStruct(name) {
			s.AddExtension("x-kubernetes-map-type", "atomic")
		}
	}
	if gvks := d.gvks[t]; len(gvks) > 0 {
		var list []any
		for _, gvk := range gvks {
			list = append(list, map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
		}
		s.AddExtension("x-kubernetes-group-version-kind", list)
	}
	return s
}

func isSchemaTyper(v any) bool {
	_, ok := v.(schemaTyper)
	return ok
}

// addFields adds the JSON fields of struct t, flattening inlined embedded
// structs, to s, the definition owner.
func (d *definitions) addFields(s *spec.Schema, t reflect.Type, owner string) {
	docs := swaggerDoc(t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if name == "" && (f.Anonymous || hasOpt(opts, "inline")) {
			if ft := deref(f.Type); ft.Kind() == reflect.Struct {
				d.addFields(s, ft, owner)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		prop := d.property(f.Type, docs[name])
		if v := f.Tag.Get("patchStrategy"); v != "" {
			prop.AddExtension("x-kubernetes-patch-strategy", v)
		}
		if v := f.Tag.Get("patchMergeKey"); v != "" {
			prop.AddExtension("x-kubernetes-patch-merge-key", v)
		}
		for k, v := range d.lists.field(owner, name) {
			prop.AddExtension(k, v)
		}
		s.Properties[name] = prop
	}
}

func hasOpt(opts, want string) bool {
	for opt := range strings.SplitSeq(opts, ",") {
		if opt == want {
			return true
		}
	}
	return false
}

// property returns the schema of a field of type t described by desc.
func (d *definitions) property(t reflect.Type, desc string) spec.Schema {
	t = deref(t)
	if isDefinition(t) {
		ref := d.ref(d.define(t))
		if desc == "" {
			return ref
		}
		if d.dialect == v3 {
			return spec.Schema{SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{ref}, Description: desc}}
		}
		ref.Description = desc
		return ref
	}
	s := d.inline(t)
	s.Description = desc
	return s
}

// inline returns the schema of a type without a definition of its own.
func (d *definitions) inline(t reflect.Type) spec.Schema {
	t = deref(t)
	if isDefinition(t) {
		return d.ref(d.define(t))
	}
	typed := func(typ, format string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, Format: format}}
	}
	switch t.Kind() {
	case reflect.String:
		return typed("string", "")
	case reflect.Bool:
		return typed("boolean", "")
	case reflect.Int64, reflect.Uint64:
		return typed("integer", "int64")
	case reflect.Int, reflect.Int32, reflect.Int16, reflect.Int8, reflect.Uint, reflect.Uint32, reflect.Uint16:
		return typed("integer", "int32")
	case reflect.Float64:
		return typed("number", "double")
	case reflect.Float32:
		return typed("number", "float")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return typed("string", "byte")
		}
		items := d.inline(t.Elem())
		s := typed("array", "")
		s.Items = &spec.SchemaOrArray{Schema: &items}
		return s
	case reflect.Map:
		elem := d.inline(t.Elem())
		s := typed("object", "")
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &elem}
		return s
	}
	// interface{} and anything else: any JSON value.
	return spec.Schema{VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}}}
}

// closure returns the names of the definitions reachable from roots,
// sorted.
func (d *definitions) closure(roots []string) []string {
	seen := map[string]bool{}
	var visit func(name string)
	var walk func(s *spec.Schema)
	walk = func(s *spec.Schema) {
		if s == nil {
			return
		}
		if r := s.Ref.String(); r != "" {
			visit(strings.TrimPrefix(r, d.dialect.refPrefix()))
		}
		for _, p := range s.Properties {
			walk(&p)
		}
		for i := range s.AllOf {
			walk(&s.AllOf[i])
		}
		for i := range s.OneOf {
			walk(&s.OneOf[i])
		}
		if s.Items != nil {
			walk(s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Schema)
		}
	}
	visit = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		walk(d.schemas[name])
	}
	for _, r := range roots {
		visit(r)
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
