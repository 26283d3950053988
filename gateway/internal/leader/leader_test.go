package leader

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
}

// probe is a controller that counts how many candidates run it at once.
type probe struct {
	running, most atomic.Int32
	started       chan string // identity of the candidate that started it
	stopped       chan string
}

func newProbe() *probe {
	return &probe{started: make(chan string, 16), stopped: make(chan string, 16)}
}

func (p *probe) controller(identity string) Controller {
	return Controller{Name: "probe", Run: func(ctx context.Context) {
		n := p.running.Add(1)
		for {
			m := p.most.Load()
			if n <= m || p.most.CompareAndSwap(m, n) {
				break
			}
		}
		p.started <- identity
		<-ctx.Done()
		p.running.Add(-1)
		p.stopped <- identity
	}}
}

func wait(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not within 30s", what)
		return ""
	}
}

// TestTwoCandidates runs two electors on real etcd: exactly one runs the
// controller; when it closes, the other takes over; when the Lease is
// taken from the leader (another holder written behind its back), it stops
// its controllers within the renew deadline.
func TestTwoCandidates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	storagetest.CheckGoroutines(t)
	cli := storagetest.StartEtcd(t)
	log := storagetest.Logger(t)
	b, err := backend.Open(backend.Config{Etcd: cli, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	p := newProbe()
	electors := map[string]*Elector{}
	for _, id := range []string{"a", "b"} {
		e, err := New(Config{
			Store: b.Store, Registry: b.Registry, Identity: id, Logger: log.With("candidate", id),
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		}, p.controller(id))
		if err != nil {
			t.Fatal(err)
		}
		electors[id] = e
		e.Start()
		t.Cleanup(e.Close)
	}
	first := wait(t, p.started, "a leader")
	other := "b"
	if first == "b" {
		other = "a"
	}
	if !electors[first].Leading() {
		t.Errorf("%s runs the controller but does not say it leads", first)
	}
	// The other candidate sees the holder through the Lease, and does
	// not lead.
	storagetest.Eventually(t, 10*time.Second, "the other candidate sees the leader", storagetest.Holds(func() bool {
		return electors[other].Leader() == first
	}))
	if electors[other].Leading() {
		t.Errorf("both %s and %s lead", first, other)
	}
	lease := getLease(t, b)
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != first {
		t.Errorf("lease holder %v, want %s", lease.Spec.HolderIdentity, first)
	}

	// The leader stops: its controller ends, it releases the Lease, and
	// the other takes over.
	electors[first].Close()
	if id := wait(t, p.stopped, "the first leader's controller to stop"); id != first {
		t.Fatalf("%s stopped, want %s", id, first)
	}
	if id := wait(t, p.started, "the second leader"); id != other {
		t.Fatalf("%s leads after %s closed, want %s", id, first, other)
	}

	// The Lease is taken from the second leader: it stops its
	// controllers and does not lead while the intruder holds it.
	takeLease(t, b, "intruder")
	if id := wait(t, p.stopped, "the deposed leader's controller to stop"); id != other {
		t.Fatalf("%s stopped, want %s", id, other)
	}
	storagetest.Eventually(t, 10*time.Second, "the deposed leader says it does not lead", storagetest.Holds(func() bool {
		return !electors[other].Leading()
	}))
	if most := p.most.Load(); most != 1 {
		t.Errorf("%d candidates ran the controller at once, want 1", most)
	}
	select {
	case id := <-p.started:
		t.Errorf("%s started leading while the intruder holds the lease", id)
	default:
	}
}

func leasesResource(t *testing.T, b *backend.Backend) *registry.Resource {
	t.Helper()
	res, ok := b.Registry.Lookup(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"})
	if !ok {
		t.Fatal("leases not served")
	}
	return res
}

func getLease(t *testing.T, b *backend.Backend) *coordinationv1.Lease {
	t.Helper()
	obj, err := b.Store.Get(t.Context(), leasesResource(t, b), DefaultNamespace, DefaultName, 0)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*coordinationv1.Lease)
}

// takeLease writes another holder with a long lease into the Lease.
func takeLease(t *testing.T, b *backend.Backend, holder string) {
	t.Helper()
	_, err := b.Store.Update(t.Context(), leasesResource(t, b), DefaultNamespace, DefaultName, storage.Preconditions{},
		func(cur runtime.Object) (runtime.Object, error) {
			l := cur.(*coordinationv1.Lease)
			now := metav1.NewMicroTime(time.Now())
			l.Spec.HolderIdentity = ptr.To(holder)
			l.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
			l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
			return l, nil
		})
	if err != nil {
		t.Fatal(err)
	}
}
