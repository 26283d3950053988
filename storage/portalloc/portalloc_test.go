package portalloc

import (
	"context"
	"errors"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{{}, {Client: &clientv3.Client{}, Range: "32000-31000"}, {Client: &clientv3.Client{}, Range: "x"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// TestAllocate: on real etcd, with two allocators (two gateways) over one
// key: ports asked for are reserved once, the next free ones never
// collide, a full range says so, released ports come back, and the key
// holds a v1 RangeAllocation as kube-apiserver writes it.
func TestAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	cli := storagetest.StartEtcd(t)
	a1, err := New(Config{Client: cli, Range: "30000-30019"})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := New(Config{Client: cli, Range: "30000-30019"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a1.Allocate(ctx, 30005); err != nil {
		t.Fatal(err)
	}
	if err := a2.Allocate(ctx, 30005); !errors.Is(err, ErrAllocated) || err == nil {
		t.Errorf("second Allocate(30005) = %v, want ErrAllocated", err)
	}
	if err := a2.Allocate(ctx, 29999); !errors.Is(err, ErrNotInRange) {
		t.Errorf("Allocate(29999) = %v, want ErrNotInRange", err)
	}
	var mu sync.Mutex
	got := map[int]bool{30005: true}
	var wg sync.WaitGroup
	for i := range 19 {
		a := a1
		if i%2 == 1 {
			a = a2
		}
		wg.Go(func() {
			port, err := a.AllocateNext(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if got[port] {
				t.Errorf("port %d handed out twice", port)
			}
			got[port] = true
		})
	}
	wg.Wait()
	if _, err := a1.AllocateNext(ctx); !errors.Is(err, ErrFull) {
		t.Errorf("AllocateNext on a full range = %v, want ErrFull", err)
	}
	if err := a2.Release(ctx, 30005, 30007); err != nil {
		t.Fatal(err)
	}
	used, rev, err := a1.Allocated(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(used) != 18 || used[30005] || used[30007] || rev == 0 {
		t.Errorf("after release: %d allocated (30005 %v, 30007 %v), rev %d", len(used), used[30005], used[30007], rev)
	}
	if err := a1.Allocate(ctx, 30005); err != nil {
		t.Errorf("a released port cannot be allocated again: %v", err)
	}
	// The key as kube-apiserver stores it.
	resp, err := cli.Get(ctx, Key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("key %s: %v %v", Key, resp, err)
	}
	scheme, _ := registry.NewScheme()
	ra := &corev1.RangeAllocation{}
	if err := codec.New(scheme).Decode(resp.Kvs[0].Value, ra); err != nil {
		t.Fatal(err)
	}
	if ra.Range != "30000-30019" || len(ra.Data) == 0 {
		t.Errorf("stored RangeAllocation %+v", ra)
	}
	// Replace is a compare-and-swap.
	if ok, err := a1.Replace(ctx, rev, []int{30001}); err != nil || ok {
		t.Errorf("Replace at a stale revision = %v, %v; want refused", ok, err)
	}
}
