package watchcheck

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Reads across split ranges (ConfigMaps in three ranges, one starting at
// the key of ns-1/cm-06), found wrong by TestScaleOutContract and
// TestListDuringRebalance and reproduced here.
func TestSplitRanges(t *testing.T) {
	parallel(t)
	m := startMulti(t, MultiConfig{CacheNodes: 1, Gateways: 1, Replicas: 1, Splits: configMapSplits})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, err := m.RESTConfig(m.GatewayAddr(0), "watchcheck/split", false)
	if err != nil {
		t.Fatal(err)
	}
	cs := newClientset(t, cfg)
	createNamespaces(ctx, t, cs, "ns-0", "ns-1", "ns-2") // ns-1 is cut in two
	t.Run("merged-watch", func(t *testing.T) { testMergedWatchWithSelector(ctx, t, m, cs) })
	t.Run("page-at-range-boundary", func(t *testing.T) { testPageAtRangeBoundary(ctx, t, cs) })
}

// A watch across ranges (here all namespaces) releases an event of one
// range only once the others are known complete up to its revision. A
// watcher whose selector drops the other ranges' events must still learn
// how far they are: such watches stalled forever — after the last write
// when it fell on another range (quiet), and for as long as another range
// kept changing (busy).
func testMergedWatchWithSelector(ctx context.Context, t *testing.T, m *Multi, cs kubernetes.Interface) {
	create := func(ns, name string) string {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Error(err) // also called from a goroutine: no Fatal
			return ""
		}
		return cm.ResourceVersion
	}
	for _, busy := range []bool{false, true} {
		name := "quiet"
		if busy {
			name = "busy"
		}
		t.Run(name, func(t *testing.T) {
			_, rev, err := m.ConfigMaps(ctx, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{
				ResourceVersion: fmt.Sprint(rev), FieldSelector: "metadata.name=match-" + name, AllowWatchBookmarks: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			want := create("ns-2", "match-"+name)
			if want == "" {
				return
			}
			// Then only the other range changes: once (quiet), or every
			// 20ms (busy).
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					create("ns-0", fmt.Sprintf("other-%s-%d", name, i))
					if !busy {
						return
					}
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			defer func() { close(stop); <-done }()
			start := time.Now()
			deadline := time.After(5 * time.Second)
			marks := 0
			for {
				select {
				case ev := <-w.ResultChan():
					switch ev.Type {
					case watch.Bookmark:
						marks++
						continue
					case watch.Added:
						if got := ev.Object.(*corev1.ConfigMap).ResourceVersion; got != want {
							t.Fatalf("ADDED at %s, want %s", got, want)
						}
						t.Logf("ADDED ns-2/match-%s at %s delivered after %v", name, want, time.Since(start).Round(time.Millisecond))
						return
					}
					t.Fatalf("unexpected %s", statusOf(ev))
				case <-deadline:
					t.Fatalf("ADDED ns-2/match-%s at %s not delivered in 5s (%d bookmarks came): the merge waits for configmaps-0, whose events the selector drops", name, want, marks)
				}
			}
		})
	}
}

// A page that fills up exactly at the end of a range continues at the
// next range, whose first key may be an object's (a split at "ns/name"):
// that object must not be skipped, by a paginated LIST nor by the initial
// events of a watch (read 500 at a time).
func testPageAtRangeBoundary(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	// ns-1's ConfigMaps below cm-06 are in configmaps-0, with nothing
	// else (ns-0 is empty); cm-06 is the first key of configmaps-1.
	const below = 500
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range 8 {
		wg.Go(func() {
			for i := w; i <= below; i += 8 {
				name := fmt.Sprintf("cm-%05d", i)
				if i == below {
					name = "cm-06"
				}
				if _, err := cs.CoreV1().ConfigMaps("ns-1").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	got, _, pages, err := listPaged(ctx, cs, "ns-1", below)
	if err != nil {
		t.Fatal(err)
	}
	if !got["ns-1/cm-06"] || len(got) != below+1 {
		t.Errorf("LIST of ns-1, %d at a time: %d items in %d pages, ns-1/cm-06 there: %v; want %d with it", below, len(got), pages, got["ns-1/cm-06"], below+1)
	}
	timeout := int64(10)
	w, err := cs.CoreV1().ConfigMaps("ns-1").Watch(ctx, metav1.ListOptions{
		SendInitialEvents: ptr(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks: true, TimeoutSeconds: &timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	initial := map[string]bool{}
	for ev := range w.ResultChan() {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			t.Fatalf("unexpected %s", statusOf(ev))
		}
		if ev.Type == watch.Bookmark && cm.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
			break
		}
		initial[cm.Namespace+"/"+cm.Name] = true
	}
	if !initial["ns-1/cm-06"] || len(initial) != below+1 {
		t.Errorf("WatchList of ns-1: %d initial events, ns-1/cm-06 among them: %v; want %d with it", len(initial), initial["ns-1/cm-06"], below+1)
	}
}

// listPaged lists namespace ns (all for "") limit at a time and returns
// the namespace/name of the items, the resourceVersion and the pages.
func listPaged(ctx context.Context, cs kubernetes.Interface, ns string, limit int64) (map[string]bool, string, int, error) {
	got := map[string]bool{}
	opts := metav1.ListOptions{Limit: limit}
	pages := 0
	for {
		l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
		if err != nil {
			return nil, "", pages, err
		}
		pages++
		for _, cm := range l.Items {
			got[cm.Namespace+"/"+cm.Name] = true
		}
		if l.Continue == "" {
			return got, l.ResourceVersion, pages, nil
		}
		opts.Continue = l.Continue
	}
}

func ptr[T any](v T) *T { return &v }
