package cachenode_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cachenodetest"
	"github.com/kgate/kgate/cachenode/health"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/storagetest"
)

// heldTable is a range table whose first read blocks until released: it
// holds a starting node between "running" and its first placement.
type heldTable struct {
	*ranges.Table
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (h *heldTable) Current() *ranges.Table {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	return h.Table
}

// TestNotReadyBeforePlaced: a node that runs but has not yet started the
// reflectors of its ranges is not ready. (It once was, with no reflector
// to wait for: a test that wrote right after WaitReady lost the events
// written before the reflector's list — "received 124 of 126 events".)
func TestNotReadyBeforePlaced(t *testing.T) {
	storagetest.CheckGoroutines(t)
	e := cachenodetest.Start(t)
	held := &heldTable{Table: e.Ranges, entered: make(chan struct{}), release: make(chan struct{})}
	n, err := cachenode.New(cachenode.Config{Etcd: e.Etcd, NATS: e.NATS, Registry: e.Registry, Codec: e.Codec, Ranges: held})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runNode(t, ctx, n)
	select {
	case <-held.entered:
	case <-ctx.Done():
		t.Fatal("Run never read the range table")
	}
	if n.Ready() {
		t.Error("ready before any reflector was started")
	}
	close(held.release)
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	st := n.Status()
	if len(st) != len(e.Ranges.All()) {
		t.Fatalf("ready with %d ranges reflected, want %d", len(st), len(e.Ranges.All()))
	}
	for _, s := range st {
		if !s.Ready {
			t.Errorf("ready with range %s not synced", s.ID)
		}
	}
}

// TestReadyzReportsStall: while etcd's watches bring nothing, /readyz
// fails with a line per stalled range and the watches are started again;
// when etcd answers again, /readyz passes.
func TestReadyzReportsStall(t *testing.T) {
	storagetest.CheckGoroutines(t)
	e := cachenodetest.Start(t)
	// A client of its own: the freezer is installed before anything uses it.
	etcd, err := clientv3.New(clientv3.Config{Endpoints: e.Etcd.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	freezer := storagetest.FreezeWatches(etcd)
	reg := prometheus.NewRegistry()
	n, err := cachenode.New(cachenode.Config{
		Etcd: etcd, NATS: e.NATS, Logger: storagetest.Logger(t), Registry: e.Registry, Codec: e.Codec, Ranges: e.Ranges,
		ProgressInterval: 100 * time.Millisecond, StallAfter: time.Second, Metrics: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runNode(t, ctx, n)
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(health.Handler(n.Ready, n.Checks, reg))
	defer srv.Close()
	readyz := func() (int, string) {
		resp, err := http.Get(srv.URL + "/readyz?verbose")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusOK || !strings.Contains(body, "[+]range pods ok") {
		t.Fatalf("/readyz?verbose before the freeze = %d\n%s", code, body)
	}

	freezer.Freeze()
	// A write the frozen watches do not bring: etcd moves past what the
	// ranges have seen (an idle etcd is no stall).
	pods, ok := e.Ranges.ByID("pods")
	if !ok {
		t.Fatal("no pods range")
	}
	value, err := e.Codec.EncodeJSON(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Etcd.Put(ctx, pods.Resource.Key("ns", "p"), string(value)); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 20*time.Second, "/readyz failing on a stalled range", func() error {
		code, body := readyz()
		if code != http.StatusInternalServerError || !strings.Contains(body, "[-]range pods failed: stalled: nothing from etcd for") {
			return fmt.Errorf("%d\n%s", code, body)
		}
		return nil
	})
	storagetest.Eventually(t, 20*time.Second, "a stalled watch started again", func() error {
		if got, _ := storagetest.Metric(t, reg, "kgate_cachenode_watch_stalls_total", "range", "pods"); got < 1 {
			return fmt.Errorf("kgate_cachenode_watch_stalls_total{range=pods} = %v", got)
		}
		return nil
	})

	freezer.Thaw()
	storagetest.Eventually(t, 20*time.Second, "/readyz passing after the thaw", func() error {
		if code, body := readyz(); code != http.StatusOK {
			return fmt.Errorf("%d\n%s", code, body)
		}
		return nil
	})
}

// runNode runs n under ctx until the test ends, then closes it and
// checks that Run returned cleanly.
func runNode(t *testing.T, ctx context.Context, n *cachenode.Node) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}
