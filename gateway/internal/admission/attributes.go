// Package admission runs kube-apiserver's admission chain on the
// gateway's writes: the built-in plugins (NamespaceLifecycle,
// LimitRanger, ServiceAccount, ResourceQuota), admission webhooks and
// ValidatingAdmissionPolicy, in kube-apiserver's order. The REST handler
// calls Admit (mutating phase, after defaulting), then Validate
// (validating phase, after the object's own validation), then Finish
// once the write is stored or failed.
package admission

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/storage/registry"
)

// Operation is the admission operation of a request.
type Operation string

// Operations, as admission.k8s.io/v1 spells them.
const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// Attributes describe one write for the admission chain.
type Attributes struct {
	User        user.Info // nil when unknown
	Resource    *registry.Resource
	Subresource string
	// Kind is the kind of Object when it is not the resource's: a
	// subresource's (autoscaling/v1 Scale for scale, v1 Binding for
	// pods/binding). Empty means the resource's kind.
	Kind      schema.GroupVersionKind
	Operation Operation
	Namespace string
	Name      string
	// Object is the object to store (nil on delete); mutating plugins may
	// replace it. OldObject is the stored object (update, delete).
	Object    runtime.Object
	OldObject runtime.Object
	// Options are the operation's options (CreateOptions, ...), may be nil.
	Options runtime.Object
	DryRun  bool

	mu       sync.Mutex // guards warnings and undo
	warnings []string
	undo     []func()
}

// GVR returns the resource's group, version and resource.
func (a *Attributes) GVR() schema.GroupVersionResource { return a.Resource.GVR() }

// GVK returns the kind of the object: Kind, or the resource's.
func (a *Attributes) GVK() schema.GroupVersionKind {
	if !a.Kind.Empty() {
		return a.Kind
	}
	return a.Resource.GVK()
}

// AddWarning records a warning for the client (a Warning header).
func (a *Attributes) AddWarning(w string) {
	a.mu.Lock()
	a.warnings = append(a.warnings, w)
	a.mu.Unlock()
}

// Warnings returns the warnings recorded, and forgets them.
func (a *Attributes) Warnings() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.warnings
	a.warnings = nil
	return w
}

// OnFailure records f to undo what a plugin charged (quota) when the
// write is not stored.
func (a *Attributes) OnFailure(f func()) {
	a.mu.Lock()
	a.undo = append(a.undo, f)
	a.mu.Unlock()
}

func (a *Attributes) failed() {
	a.mu.Lock()
	undo := a.undo
	a.undo = nil
	a.mu.Unlock()
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
}
