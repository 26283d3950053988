// Package registry describes the API resources kgate serves: for each
// group/version/resource its kind, scope, names, subresources, the etcd key
// prefix kube-apiserver uses for it, and the fields its field selectors
// support. It also owns the runtime.Scheme of the built-in types.
//
// The set of resources is data that changes at run time: built-ins first,
// then custom resources and aggregated APIs as they come and go. Readers
// take lock-free immutable snapshots and follow changes through
// Registry.Changed.
package registry

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource describes one served resource.
type Resource struct {
	Group    string
	Version  string
	Resource string // plural, lower case: "deployments"
	Kind     string // "Deployment"
	Singular string // "deployment"

	Namespaced   bool
	ShortNames   []string
	Categories   []string
	Subresources []string // "status", "scale", "binding", ...
	// Verbs lists the verbs the main resource supports; empty means all of
	// create, delete, deletecollection, get, list, patch, update, watch.
	Verbs []string

	// Prefix is the etcd key prefix, without trailing slash, identical to
	// kube-apiserver's: "/registry/minions" for nodes. Empty for a
	// create-only resource that stores nothing (the review APIs).
	Prefix string

	// StorageKind is the group/version/kind the objects are stored as in
	// etcd when it differs from the served one (events.k8s.io/v1 Event is
	// stored as core/v1 Event). Zero means the served kind.
	StorageKind schema.GroupVersionKind

	// FieldSelectors lists the field names a field selector may use beyond
	// metadata.name and metadata.namespace.
	FieldSelectors []string
	// Fields returns the values of FieldSelectors for an object of this
	// kind (typed, as decoded with the registry's scheme). Nil when
	// FieldSelectors is empty.
	Fields func(obj runtime.Object) fields.Set
	// FieldLabels, when set, are the field labels clients select on
	// (beyond metadata.name and metadata.namespace) and the field of
	// FieldSelectors each stands for, as upstream's field label
	// conversions rename them (events.k8s.io's regarding.kind is
	// involvedObject.kind of the core Event it is stored as). Nil: the
	// labels are FieldSelectors.
	FieldLabels map[string]string

	// CRD is the CustomResourceDefinition a custom resource is served
	// from (nil for every other resource): its objects are
	// *unstructured.Unstructured, not Go types of the scheme, stored as
	// JSON, and their semantics (schema, defaults, CEL rules,
	// subresources) come from it. Shared and read-only.
	CRD *apiextensionsv1.CustomResourceDefinition
}

// Unstructured reports whether objects of the resource are
// *unstructured.Unstructured (a custom resource).
func (r *Resource) Unstructured() bool { return r.CRD != nil }

// AllVerbs is the verb list of an ordinary resource.
var AllVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// GVR returns the resource's group/version/resource.
func (r *Resource) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// GVK returns the served group/version/kind.
func (r *Resource) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// StorageGVK returns the group/version/kind stored in etcd.
func (r *Resource) StorageGVK() schema.GroupVersionKind {
	if r.StorageKind.Kind != "" {
		return r.StorageKind
	}
	return r.GVK()
}

// ListKind is the kind of a list of this resource: "DeploymentList".
func (r *Resource) ListKind() string { return r.Kind + "List" }

// APIVersion is "v1" for the core group and "group/version" otherwise.
func (r *Resource) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// CreateOnly reports whether create is the resource's only verb (bindings
// and the review APIs).
func (r *Resource) CreateOnly() bool {
	return len(r.Verbs) == 1 && r.Verbs[0] == "create"
}

// HasSubresource reports whether sub is served for this resource.
func (r *Resource) HasSubresource(sub string) bool {
	for _, s := range r.Subresources {
		if s == sub {
			return true
		}
	}
	return false
}

// SupportedVerbs returns Verbs or AllVerbs.
func (r *Resource) SupportedVerbs() []string {
	if len(r.Verbs) > 0 {
		return r.Verbs
	}
	return AllVerbs
}

// Key returns the etcd key of one object: prefix/namespace/name for
// namespaced resources, prefix/name otherwise.
func (r *Resource) Key(namespace, name string) string {
	if r.Namespaced {
		return r.Prefix + "/" + namespace + "/" + name
	}
	return r.Prefix + "/" + name
}

// ListPrefix returns the etcd key prefix (with trailing slash) holding all
// objects of the resource in namespace, or in all namespaces when namespace
// is empty.
func (r *Resource) ListPrefix(namespace string) string {
	if r.Namespaced && namespace != "" {
		return r.Prefix + "/" + namespace + "/"
	}
	return r.Prefix + "/"
}

// SplitKey returns the namespace and name encoded in key, which must start
// with ListPrefix(""). ok is false for a key of another shape.
func (r *Resource) SplitKey(key string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(key, r.Prefix+"/")
	if !found || rest == "" {
		return "", "", false
	}
	if !r.Namespaced {
		if strings.Contains(rest, "/") {
			return "", "", false
		}
		return "", rest, true
	}
	namespace, name, found = strings.Cut(rest, "/")
	if !found || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return namespace, name, true
}

// ConvertFieldLabel returns the field of FieldSelectors a client's field
// label selects on, and whether the resource takes the label at all.
func (r *Resource) ConvertFieldLabel(label string) (string, bool) {
	if r.FieldLabels == nil || label == "metadata.name" || label == "metadata.namespace" {
		return label, r.SupportsField(label)
	}
	f, ok := r.FieldLabels[label]
	return f, ok
}

// SupportsField reports whether a field selector may use field (one of
// the fields the cache holds, after ConvertFieldLabel).
func (r *Resource) SupportsField(field string) bool {
	if field == "metadata.name" || (field == "metadata.namespace" && r.Namespaced) {
		return true
	}
	for _, f := range r.FieldSelectors {
		if f == field {
			return true
		}
	}
	return false
}
