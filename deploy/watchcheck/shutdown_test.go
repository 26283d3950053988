package watchcheck

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestStopEndsWatches stops a gateway while watches are open: each ends,
// those that asked for bookmarks with a last bookmark, and once Run has
// returned no watch stream runs in the process any more (fasthttp's
// Shutdown does not wait for hijacked connections; the gateway's Close
// waits for them).
func TestStopEndsWatches(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := clientset(t, c, "watchcheck/stop", false)
	cms := cs.CoreV1().ConfigMaps("default")
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := c.Counter("kgate_gateway_watchers")
	const n = 6
	var ws []watch.Interface
	for i := range n {
		opts := metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: i%2 == 0}
		if i == n-1 {
			opts.ResourceVersion = "" // one streaming its initial events first
		}
		w, err := cms.Watch(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w)
	}
	waitWatchers(t, c, before+n)
	if streams := watchStreams(); streams < n {
		t.Fatalf("%d goroutines of watch streams run, want at least %d", streams, n)
	}

	if err := c.StopGateway(); err != nil {
		t.Fatal(err)
	}
	if streams := watchStreams(); streams != 0 {
		t.Fatalf("%d goroutines of watch streams still run after the gateway stopped", streams)
	}
	for i, w := range ws {
		var last watch.EventType
		for ev := range w.ResultChan() {
			last = ev.Type
		}
		if i%2 == 0 && last != watch.Bookmark {
			t.Errorf("watch %d (bookmarks) ended after %q, want a last bookmark", i, last)
		}
		if last == watch.Error {
			t.Errorf("watch %d ended with an ERROR event", i)
		}
	}
}

// watchStreams counts the goroutines of the watches streaming on
// hijacked connections: rest's streamWatch and the goroutines it starts.
func watchStreams() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("rest.(*Handler).streamWatch")) {
			count++
		}
	}
	return count
}
