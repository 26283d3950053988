package chaos

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kgate/kgate/deploy/watchcheck"
)

// informer is a client-go ConfigMap informer of the workload's namespace,
// as controllers run them, behind the gateways: each of its lists and
// watches goes to the next gateway, as through a load balancer, so that a
// gateway's failure is a watch resumed on another one. kgate promises it
// never has to list again unless a fault lost every replica of a range.
type informer struct {
	id   int
	lw   *watchcheck.CountingLW
	inf  cache.SharedIndexInformer
	next atomic.Int64 // the gateway of the next request
}

func newInformer(id int, gws *gateways, rec *recorder) *informer {
	in := &informer{id: id}
	in.next.Store(int64(id))
	// through runs call on the next gateway (another while one is down)
	// and records the request.
	through := func(kind string, pick func(int) kubernetes.Interface, call func(kubernetes.Interface) error) error {
		start := time.Now()
		gw, err := gws.doWith(int(in.next.Add(1)-1)%gws.n(), pick, call)
		rec.request(kind, gw, start, err)
		return err
	}
	list := func(ctx context.Context, o metav1.ListOptions) (l *corev1.ConfigMapList, err error) {
		err = through("informer list", gws.client, func(cs kubernetes.Interface) (err error) {
			l, err = cs.CoreV1().ConfigMaps(Namespace).List(ctx, o)
			return err
		})
		return l, err
	}
	watchFn := func(ctx context.Context, o metav1.ListOptions) (w watch.Interface, err error) {
		err = through("informer watch", gws.watcher, func(cs kubernetes.Interface) (err error) {
			w, err = cs.CoreV1().ConfigMaps(Namespace).Watch(ctx, o)
			return err
		})
		return w, err
	}
	in.lw = watchcheck.NewCountingLWFuncs(list, watchFn, gws.client(0))
	in.inf = cache.NewSharedIndexInformer(in.lw.ListerWatcher(), &corev1.ConfigMap{}, 0, cache.Indexers{})
	return in
}

func (in *informer) desc() string { return fmt.Sprintf("informer %d", in.id) }

// run runs the informer until ctx ends.
func (in *informer) run(ctx context.Context) { in.inf.RunWithContext(ctx) }

// synced: the first sync is done.
func (in *informer) synced() bool { return in.inf.HasSynced() }

// relists are the syncs after the first, as findings.
func (in *informer) relists() []finding {
	var out []finding
	syncs, watches, expired := in.lw.Syncs(), in.lw.Counts().Watches, len(in.lw.Expired())
	for k := 1; k < len(syncs); k++ {
		out = append(out, finding{syncs[k], fmt.Sprintf("%s listed again (sync #%d; its watches: %d, 410s: %d)", in.desc(), k+1, watches, expired)})
	}
	return out
}

// differs describes how the informer's store differs from want, "" when it
// does not.
func (in *informer) differs(want map[string]*watchcheck.Object) string {
	got, err := watchcheck.StoreState(in.inf.GetStore())
	if err != nil {
		return fmt.Sprintf("%s: %v", in.desc(), err)
	}
	if d := watchcheck.DiffStates(want, got); d != "" {
		return fmt.Sprintf("%s: store differs from etcd: %s", in.desc(), d)
	}
	return ""
}
