// Package bootstrap creates the objects every cluster has from its first
// start, as kube-apiserver's bootstrap controllers do: the system
// namespaces. Every gateway runs it; creating what exists is harmless.
package bootstrap

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/strategy"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// SystemNamespaces are the namespaces kube-apiserver creates.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

type creator interface {
	Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error)
}

// Ensure creates the system namespaces that do not exist.
func Ensure(ctx context.Context, store creator, reg *registry.Registry) error {
	res, ok := reg.Lookup(corev1.SchemeGroupVersion.WithResource("namespaces"))
	if !ok {
		return errors.New("cannot bootstrap: namespaces are not registered")
	}
	for _, name := range SystemNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		strategy.PrepareForCreate(res, ns)
		if _, err := store.Create(ctx, res, ns); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
			return fmt.Errorf("cannot create namespace %s: %w", name, err)
		}
	}
	return nil
}
