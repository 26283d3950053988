// Package lifecycle is kube-apiserver's NamespaceLifecycle admission
// plugin: nothing is created or updated in a namespace that does not
// exist, nothing is created in a namespace being terminated, and the
// system namespaces cannot be deleted.
package lifecycle

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
)

// ErrNotFound is what Namespaces returns for a namespace that does not
// exist (the gateway maps storage's).
var ErrNotFound = errors.New("lifecycle: namespace not found")

// Namespaces reads namespaces: a namespace created a moment ago through
// another gateway must be seen (upstream looks up live when its informer
// misses; Cached does).
type Namespaces interface {
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

// Immortal are the namespaces that may not be deleted.
var immortal = map[string]bool{metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true}

// Plugin is NamespaceLifecycle.
type Plugin struct{ Namespaces Namespaces }

// Admit implements admission.Mutator, first in the chain as upstream;
// like upstream's it leaves connect requests alone.
func (p Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	gr := a.GVR().GroupResource()
	if gr == corev1.Resource("namespaces") {
		if a.Operation == admission.Delete && immortal[a.Name] {
			return apierror.Forbidden(gr, a.Name, errors.New("this namespace may not be deleted"))
		}
		if o, ok := p.Namespaces.(DeleteObserver); ok && a.Operation == admission.Delete {
			o.Deleting(a.Name)
		}
		return nil
	}
	if !a.Resource.Namespaced || a.Namespace == "" || a.Operation == admission.Delete || a.Operation == admission.Connect {
		return nil
	}
	ns, err := p.Namespaces.Namespace(ctx, a.Namespace)
	if errors.Is(err, ErrNotFound) {
		return apierror.NotFound(corev1.Resource("namespaces"), a.Namespace)
	}
	if err != nil {
		return apierror.InternalError(fmt.Errorf("cannot read namespace %s: %w", a.Namespace, err))
	}
	if a.Operation != admission.Create || (ns.Status.Phase != corev1.NamespaceTerminating && ns.DeletionTimestamp == nil) {
		return nil
	}
	se := apierror.Forbidden(gr, a.Name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.Namespace))
	se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", a.Namespace),
		Field:   "metadata.namespace",
	})
	return se
}
