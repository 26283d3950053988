package revision

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/storagetest"
)

// fakeKV answers Get with the number of Get calls so far, after calling
// hook when set.
type fakeKV struct {
	clientv3.KV
	calls atomic.Int64
	hook  func(ctx context.Context, call int64) error
}

func (f *fakeKV) Get(ctx context.Context, _ string, _ ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	n := f.calls.Add(1)
	if f.hook != nil {
		if err := f.hook(ctx, n); err != nil {
			return nil, err
		}
	}
	return &clientv3.GetResponse{Header: &etcdserverpb.ResponseHeader{Revision: n}}, nil
}

func newOracle(t testing.TB, kv clientv3.KV) *Oracle {
	t.Helper()
	o, err := New(Config{KV: kv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func TestNewValidates(t *testing.T) {
	f := func(name string, cfg Config) {
		t.Run(name, func(t *testing.T) {
			if _, err := New(cfg); err == nil {
				t.Fatal("New: no error")
			}
		})
	}
	logger := slog.New(slog.DiscardHandler)
	f("no KV", Config{Logger: logger})
	f("no logger", Config{KV: &fakeKV{}})
	f("negative timeout", Config{KV: &fakeKV{}, Logger: logger, Timeout: -time.Second})
}

// TestCallersDuringFlightWaitForNextCall checks that a caller arriving
// while a call is in flight is served by the next call, never by the one
// in flight, and that all such callers share that next call.
func TestCallersDuringFlightWaitForNextCall(t *testing.T) {
	storagetest.CheckGoroutines(t)
	started := make(chan int64, 10)
	release := make(chan struct{})
	kv := &fakeKV{hook: func(ctx context.Context, n int64) error {
		started <- n
		if n == 1 {
			<-release
		}
		return nil
	}}
	o := newOracle(t, kv)
	ctx := context.Background()

	first := make(chan int64)
	go func() {
		rev, err := o.Current(ctx)
		if err != nil {
			t.Errorf("Current: %v", err)
		}
		first <- rev
	}()
	if n := <-started; n != 1 {
		t.Fatalf("first call is call %d", n)
	}

	const late = 20
	var wg sync.WaitGroup
	revs := make(chan int64, late)
	for range late {
		wg.Go(func() {
			rev, err := o.Current(ctx)
			if err != nil {
				t.Errorf("Current: %v", err)
			}
			revs <- rev
		})
	}
	// Wait until all late callers have joined the pending batch, which
	// only the next call serves.
	storagetest.Eventually(t, 5*time.Second, "the late callers join the pending batch", storagetest.Holds(func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.pending != nil && o.pending.waiters == late
	}))
	close(release)
	if rev := <-first; rev != 1 {
		t.Errorf("first caller got %d, want 1", rev)
	}
	wg.Wait()
	close(revs)
	for rev := range revs {
		if rev < 2 {
			t.Errorf("a caller arriving during call 1 got its result %d", rev)
		}
	}
	if calls := kv.calls.Load(); calls != 2 {
		t.Errorf("%d etcd calls for %d callers, want 2", calls, late+1)
	}
}

func TestErrors(t *testing.T) {
	storagetest.CheckGoroutines(t)
	boom := errors.New("boom")
	kv := &fakeKV{hook: func(ctx context.Context, n int64) error { return boom }}
	o := newOracle(t, kv)
	_, err := o.Current(context.Background())
	if !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, boom) {
		t.Errorf("etcd failure: got %v, want ErrUnavailable wrapping the cause", err)
	}

	block := make(chan struct{})
	defer close(block)
	o2 := newOracle(t, &fakeKV{hook: func(ctx context.Context, n int64) error {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return ctx.Err()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := o2.Current(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("caller timeout: got %v, want DeadlineExceeded", err)
	}
	if err := o2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := o2.Current(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: got %v, want ErrClosed", err)
	}
}

// countingKV counts the Get calls reaching etcd.
type countingKV struct {
	clientv3.KV
	calls atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.calls.Add(1)
	return c.KV.Get(ctx, key, opts...)
}

// TestConcurrentAgainstEtcd has many callers ask while a writer writes:
// every answer is at least the revision of every write acknowledged before
// the caller asked, and the callers share far fewer etcd calls.
func TestConcurrentAgainstEtcd(t *testing.T) {
	storagetest.CheckGoroutines(t)
	client := storagetest.StartEtcd(t)
	kv := &countingKV{KV: client.KV}
	o := newOracle(t, kv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var acked atomic.Int64 // highest revision of an acknowledged write
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := client.Put(ctx, "/oracle-test/k", "v")
			if err != nil {
				t.Errorf("Put: %v", err)
				return
			}
			for {
				cur := acked.Load()
				if resp.Header.Revision <= cur || acked.CompareAndSwap(cur, resp.Header.Revision) {
					break
				}
			}
		}
	})

	const callers, perCaller = 64, 20
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range perCaller {
				floor := acked.Load()
				rev, err := o.Current(ctx)
				if err != nil {
					t.Errorf("Current: %v", err)
					return
				}
				if rev < floor {
					t.Errorf("Current = %d, below acknowledged write %d", rev, floor)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	writer.Wait()

	calls := kv.calls.Load()
	t.Logf("%d Current calls, %d etcd calls", callers*perCaller, calls)
	if calls*4 > callers*perCaller {
		t.Errorf("%d etcd calls for %d Current calls: not batched", calls, callers*perCaller)
	}
}

func BenchmarkCurrentFake(b *testing.B) {
	o := newOracle(b, &fakeKV{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := o.Current(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCurrentEtcd(b *testing.B) {
	client := storagetest.StartEtcd(b)
	kv := &countingKV{KV: client.KV}
	o := newOracle(b, kv)
	ctx := context.Background()
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := o.Current(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(kv.calls.Load())/float64(b.N), "etcd-calls/op")
}
