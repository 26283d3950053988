package crconvert

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/util/proxy"
	listersv1 "k8s.io/client-go/listers/core/v1"
)

// Services reads a Service (from etcd, fresh: a webhook's Service may
// have been created just before its CRD).
type Services interface {
	Service(ctx context.Context, namespace, name string) (*corev1.Service, error)
}

// resolveTimeout bounds the read of a webhook's Service.
const resolveTimeout = 5 * time.Second

// serviceResolver resolves a conversion webhook's service reference as
// kube-apiserver's default resolver does (the aggregator's
// ClusterIPServiceResolver: apiserver's proxy.ResolveCluster, the
// Service's cluster IP and the port of its spec named by the
// reference's port; an ExternalName's host).
type serviceResolver struct {
	services Services
}

var errNoServices = errors.New("service references of conversion webhooks are not supported here")

// ResolveEndpoint implements apiserver's webhook.ServiceResolver.
func (r serviceResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if r.services == nil {
		return nil, errNoServices
	}
	return proxy.ResolveCluster(serviceLister{r.services}, namespace, name, port)
}

// serviceLister is the one Get of a ServiceLister that ResolveCluster
// calls, over Services; it lists nothing.
type serviceLister struct {
	services Services
}

func (l serviceLister) List(labels.Selector) ([]*corev1.Service, error) {
	return nil, errors.New("cannot list services: not supported")
}

func (l serviceLister) Services(namespace string) listersv1.ServiceNamespaceLister {
	return namespacedLister{l.services, namespace}
}

type namespacedLister struct {
	services  Services
	namespace string
}

func (l namespacedLister) List(labels.Selector) ([]*corev1.Service, error) {
	return nil, errors.New("cannot list services: not supported")
}

func (l namespacedLister) Get(name string) (*corev1.Service, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	svc, err := l.services.Service(ctx, l.namespace, name)
	if err != nil {
		return nil, fmt.Errorf("cannot read service %s/%s: %w", l.namespace, name, err)
	}
	return svc, nil
}
