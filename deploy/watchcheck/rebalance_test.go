package watchcheck

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/storage/ranges"

	"github.com/kgate/kgate/storage/storagetest"
)

// flagRebalances is how many join-and-leave cycles TestListDuringRebalance
// runs.
var flagRebalances = flag.Int("watchcheck.rebalances", envInt("WATCHCHECK_REBALANCES", 3), "join-and-leave cycles of the cache nodes in TestListDuringRebalance")

// TestListDuringRebalance lists ConfigMaps of all namespaces — three
// ranges, one of them cutting ns-1 in two — while writers change them and
// the cache nodes rebalance, cycle after cycle: a new node joins (replicas
// move to it, the old owners serving until it is ready), then the oldest
// leaves (gracefully, or killed every other cycle). Each list, whole or
// page by page, consistent or at resourceVersion "0", must be exactly
// etcd's state at the resourceVersion it reports.
func TestListDuringRebalance(t *testing.T) {
	parallel(t)
	splits := ranges.Config{Splits: map[string][]string{"configmaps": {"ns-1/obj-00030", "ns-3"}}}
	m := startMulti(t, MultiConfig{CacheNodes: 2, Gateways: 1, Replicas: 2, Splits: splits})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg, err := m.RESTConfig(m.GatewayAddr(0), "watchcheck/rebalance", true)
	if err != nil {
		t.Fatal(err)
	}
	cs := newClientset(t, cfg)
	namespaces := []string{"ns-0", "ns-1", "ns-2", "ns-3"}
	createNamespaces(ctx, t, cs, namespaces...)
	const perNS = 60
	var wg sync.WaitGroup
	var seedErr atomic.Value
	for i := range 8 {
		wg.Go(func() {
			for j := i; j < perNS*len(namespaces); j += 8 {
				ns := namespaces[j%len(namespaces)]
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("obj-%05d", j/len(namespaces))}, Data: map[string]string{"v": "0"}}
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					seedErr.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := seedErr.Load().(error); err != nil {
		t.Fatalf("cannot create the ConfigMaps: %v", err)
	}
	before := map[string][]string{}
	for _, id := range m.ConfigMapRanges {
		before[id] = m.Owners(id)
	}

	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var writes atomic.Int64
	writersDone := make(chan error, len(namespaces))
	for _, ns := range namespaces {
		go func() { writersDone <- churn(work, cs, ns, perNS, &writes) }()
	}
	var (
		mu        sync.Mutex // guards the counts below
		rebalance atomic.Bool
		lists     = map[string]int{} // by kind, taken while rebalancing
		listsAll  int
		items     int
		failures  []string
	)
	listerDone := make(chan struct{})
	go func() {
		defer close(listerDone)
		kinds := []string{"consistent", "paged", "rv0"}
		for i := 0; work.Err() == nil; i++ {
			kind := kinds[i%len(kinds)]
			during := rebalance.Load()
			got, rev, pages, err := listAll(work, cs, kind)
			if work.Err() != nil {
				return
			}
			if err == nil {
				var want map[string]*Object
				if want, _, err = m.ConfigMaps(ctx, "", rev); err == nil {
					if diff := DiffStates(want, got); diff != "" {
						err = fmt.Errorf("differs from etcd at %d: %s", rev, diff)
					}
				}
			}
			mu.Lock()
			listsAll++
			if during && rebalance.Load() {
				lists[kind]++
			}
			items += len(got)
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s list (%d pages) at %d: %v", kind, pages, rev, err))
			}
			mu.Unlock()
		}
	}()

	// Lists and writes under way before the first move: one list of each
	// kind.
	listed := func(n int) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			if listsAll < n {
				return fmt.Errorf("%d lists, %d writes", listsAll, writes.Load())
			}
			return nil
		}
	}
	storagetest.Eventually(t, time.Minute, "lists before the rebalance", listed(3))
	rebalance.Store(true)
	var moves []string
	for k := range *flagRebalances {
		t0 := time.Now()
		added, err := m.AddNode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.WaitSettled(ctx); err != nil {
			t.Fatal(err)
		}
		joined := time.Since(t0)
		t1 := time.Now()
		how := "left"
		if k%2 == 0 {
			err = m.StopNode(k)
		} else {
			how, err = "was killed", m.KillNode(k)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := m.WaitSettled(ctx); err != nil {
			t.Fatal(err)
		}
		owners := map[string][]string{}
		for _, id := range m.ConfigMapRanges {
			owners[id] = m.Owners(id)
		}
		moves = append(moves, fmt.Sprintf("cachenode-%d joined (%v), cachenode-%d %s (%v): owners %v",
			added, joined.Round(time.Millisecond), k, how, time.Since(t1).Round(time.Millisecond), owners))
	}
	rebalance.Store(false)
	// A list of each kind after the last move.
	mu.Lock()
	after := listsAll + 3
	mu.Unlock()
	storagetest.Eventually(t, time.Minute, "lists after the rebalance", listed(after))
	stopWork()
	<-listerDone
	for range namespaces {
		if err := <-writersDone; err != nil {
			t.Errorf("writer: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, f := range failures {
		if i < 10 {
			t.Error(f)
		}
	}
	during := lists["consistent"] + lists["paged"] + lists["rv0"]
	t.Logf("owners of the ConfigMaps ranges at first: %v", before)
	for _, mv := range moves {
		t.Log(mv)
	}
	t.Logf("%d lists (%d items) equal etcd at their resourceVersion, %d of them taken while rebalancing %v; %d writes; %d failed",
		listsAll-len(failures), items, during, lists, writes.Load(), len(failures))
	if during < 3 {
		t.Errorf("only %d lists ran while rebalancing: the test proves little", during)
	}
}

// listAll lists the ConfigMaps of every namespace: kind "consistent" in
// one request, "paged" 40 at a time, "rv0" at resourceVersion "0". It
// checks that pages share the first page's resourceVersion and come in key
// order, each item once, and returns the items by namespace/name and the
// resourceVersion.
func listAll(ctx context.Context, cs kubernetes.Interface, kind string) (map[string]*Object, int64, int, error) {
	opts := metav1.ListOptions{}
	switch kind {
	case "paged":
		opts.Limit = 40
	case "rv0":
		opts.ResourceVersion = "0"
	}
	got := map[string]*Object{}
	var (
		rv    string
		last  string
		pages int
	)
	for {
		l, err := cs.CoreV1().ConfigMaps("").List(ctx, opts)
		if err != nil {
			if apierrors.IsResourceExpired(err) {
				err = fmt.Errorf("continue expired: %w", err)
			}
			return got, 0, pages, fmt.Errorf("page %d: %w", pages+1, err)
		}
		pages++
		if rv == "" {
			rv = l.ResourceVersion
		} else if l.ResourceVersion != rv {
			return got, 0, pages, fmt.Errorf("page %d has resourceVersion %s, the first page %s", pages, l.ResourceVersion, rv)
		}
		for i := range l.Items {
			o, err := ObjectOf(&l.Items[i])
			if err != nil {
				return got, 0, pages, err
			}
			if k := o.Key(); k <= last {
				return got, 0, pages, fmt.Errorf("page %d: %s after %s: not in key order, or twice", pages, k, last)
			}
			last = o.Key()
			got[o.Key()] = o
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
		// Pages spread over real time, so that moves land between them.
		time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond) // wall clock: moves land between pages
	}
	rev, err := strconv.ParseInt(rv, 10, 64)
	return got, rev, pages, err
}
