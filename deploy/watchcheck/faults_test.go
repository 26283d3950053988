package watchcheck

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/cachenode/event"

	"github.com/kgate/kgate/storage/storagetest"
)

// Targeted reproductions of what the randomized runs found (and, for the
// lost last event, of a gap the maintainers closed in dd004af: kept as a
// regression test). Each fails while its bug is there.

// A watch that ends from the server side (its timeout, a 410, an error)
// must leave the connection usable, or closed: Go clients put it back in
// their pool and send the next request on it.
func TestRequestAfterWatchEnds(t *testing.T) {
	parallel(t)
	c := startCluster(t)
	cfg, err := c.RESTConfig("watchcheck/reuse", false)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg) // no closeAfterWatch: connections are reused
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	timeout := int64(1)
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: "0", TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	for range w.ResultChan() {
	}
	w.Stop()
	// The next request goes out on the connection the watch used.
	gctx, gcancel := context.WithTimeout(ctx, 3*time.Second)
	defer gcancel()
	start := time.Now()
	if _, err := cs.CoreV1().Namespaces().Get(gctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("GET after a watch ended on its own: %v after %v (the gateway's stream.Close waits for the client to close a connection fasthttp never closes, while the client reuses it)", err, time.Since(start).Round(time.Millisecond))
	}
}

// A watcher that catches up from the window must not fail, or stall,
// because the bookmark timer fires during the window read: streamWatch
// bounds each Next by the next bookmark, and a catch-up inside Next
// inherits that deadline.
func TestCatchUpAcrossBookmarkTick(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Window reads take 100ms (a proxy holds them), bookmarks tick every
	// 20ms.
	c, err := Start(ctx, Config{
		Dir: t.TempDir(), Logger: testLogger(), BookmarkInterval: 20 * time.Millisecond,
		ReadDelay: func(path string) time.Duration {
			if strings.Contains(path, "events") {
				return 100 * time.Millisecond
			}
			return 0
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cs := clientset(t, c, "watchcheck/catchup", false)
	createNamespaces(ctx, t, cs, "ns-0")
	var first int64
	const n = 20
	for i := range n {
		cm, err := cs.CoreV1().ConfigMaps("ns-0").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(i)}, Data: map[string]string{"v": "x"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first, _ = strconv.ParseInt(cm.ResourceVersion, 10, 64)
		}
	}
	// A watcher at the head keeps the range's feed there; the one from
	// the first revision then catches up from the window on its own.
	watchers := c.Counter("kgate_gateway_watchers")
	head, err := cs.CoreV1().ConfigMaps("ns-0").Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer head.Stop()
	waitWatchers(t, c, watchers+1) // the head watcher joined its feed
	w, err := cs.CoreV1().ConfigMaps("ns-0").Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(first, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := 0
	deadline := time.After(5 * time.Second)
	for got < n-1 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %d of %d events", got, n-1)
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch from %d ended after %d of %d events with %v", first, got, n-1, statusOf(ev))
			}
			got++
		case <-deadline:
			t.Fatalf("watch from %d delivered %d of %d events in 5s", first, got, n-1)
		}
	}
}

// waitWatchers waits until c's gateway has at least n watchers: a watch
// stream is answered before its watcher joins the range's feed.
func waitWatchers(t *testing.T, c *Cluster, n float64) {
	t.Helper()
	storagetest.Eventually(t, 30*time.Second, "the watcher joins its feed", func() error {
		if got := c.Counter("kgate_gateway_watchers"); got < n {
			return fmt.Errorf("%.0f watchers, want %.0f", got, n)
		}
		return nil
	})
}

func statusOf(ev watch.Event) string {
	if st, ok := ev.Object.(*metav1.Status); ok {
		return strconv.Itoa(int(st.Code)) + " " + st.Message
	}
	return string(ev.Type)
}

// A lost NATS message must be repaired even when the range then goes
// quiet: here the last event is lost, and nothing else happens in etcd.
func TestLostLastEventIsDelivered(t *testing.T) {
	parallel(t)
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := clientset(t, c, "watchcheck/lost", false)
	createNamespaces(ctx, t, cs, "ns-0")
	cm, err := cs.CoreV1().ConfigMaps("ns-0").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"v": "1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watchers := c.Counter("kgate_gateway_watchers")
	w, err := cs.CoreV1().ConfigMaps("ns-0").Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	waitWatchers(t, c, watchers+1) // the feed is subscribed, the watcher at its head

	var lost, progress atomic.Int64
	c.SetDrop(func(ev *event.Event) bool {
		switch {
		case ev.Range != c.RangeID:
			return false
		case ev.Type == event.Progress:
			progress.Add(1)
			return false
		}
		return lost.CompareAndSwap(0, ev.Revision)
	})
	cm.Data["v"] = "2"
	upd, err := cs.CoreV1().ConfigMaps("ns-0").Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if got := ev.Object.(*corev1.ConfigMap).ResourceVersion; ev.Type != watch.Modified || got != upd.ResourceVersion {
			t.Fatalf("got %s at %s, want MODIFIED at %s", ev.Type, got, upd.ResourceVersion)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the update at %s never came: NATS lost its event (%d), and the range published %d progress messages after it",
			upd.ResourceVersion, lost.Load(), progress.Load())
	}
}
