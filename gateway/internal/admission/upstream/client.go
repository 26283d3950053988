package upstream

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// Objects reads one stored object fresh (from etcd): what upstream
// plugins ask their client for when their lister does not have it yet
// (a ServiceAccount, RuntimeClass or Namespace created a moment ago).
// A missing object is apimachinery's NotFound error.
type Objects interface {
	Object(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error)
}

// readTimeout bounds one read of the plugins' client.
const readTimeout = 10 * time.Second

// newClient returns the clientset upstream plugins are given in place of
// kube-apiserver's loopback client: client-go's typed clients over a
// reaction chain that answers gets from objs. The plugins kgate runs
// only get; any other verb is an error.
func newClient(objs Objects) kubernetes.Interface {
	cs := &fake.Clientset{}
	cs.AddReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		get, ok := a.(clienttesting.GetAction)
		if !ok || a.GetSubresource() != "" {
			return true, nil, fmt.Errorf("cannot %s %s: the admission client only reads objects", a.GetVerb(), a.GetResource().Resource)
		}
		// Reactions get no context: bound the read as a request would be.
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		obj, err := objs.Object(ctx, a.GetResource(), get.GetNamespace(), get.GetName())
		return true, obj, err
	})
	return cs
}
