package watchcheck

import (
	"context"
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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/storage/storagetest"
)

// TestPaginatedList lists thousands of ConfigMaps 500 at a time while a
// writer keeps changing them: the pages together must be exactly the state
// at the first page's resourceVersion, read from etcd at that revision.
func TestPaginatedList(t *testing.T) {
	parallel(t)
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "big"
	admin := clientset(t, c, "watchcheck/list-writer", false)
	createNamespaces(ctx, t, admin, ns)
	n := *flagObjects
	start := time.Now()
	var wg sync.WaitGroup
	var seedErr atomic.Value
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("obj-%05d", i), Labels: map[string]string{"app": []string{"a", "b", "c"}[i%3]}},
					Data:       map[string]string{"v": "0"},
				}
				if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
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
	t.Logf("created %d ConfigMaps in %v", n, time.Since(start).Round(time.Millisecond))

	var writes atomic.Int64
	writeCtx, stopWriting := context.WithCancel(ctx)
	writerDone := make(chan error, 1)
	go func() { writerDone <- churn(writeCtx, admin, ns, n, &writes) }()
	defer func() {
		stopWriting()
		if err := <-writerDone; err != nil {
			t.Errorf("writer: %v", err)
		}
	}()
	// The lists run while the writer writes.
	storagetest.Eventually(t, time.Minute, "the writer writes", func() error {
		if n := writes.Load(); n < 10 {
			return fmt.Errorf("%d writes", n)
		}
		return nil
	})

	for _, pass := range []struct {
		name     string
		protobuf bool
		selector string
	}{
		{"json", false, ""},
		{"protobuf-selector", true, "app in (a,b)"},
	} {
		cs := clientset(t, c, "watchcheck/lister-"+pass.name, pass.protobuf)
		before := writes.Load()
		got, rev, pages, err := listPages(ctx, cs, ns, pass.selector, 500)
		if err != nil {
			t.Errorf("%s: %v", pass.name, err)
			continue
		}
		during := writes.Load() - before
		state, _, err := c.ConfigMaps(ctx, ns, rev)
		if err != nil {
			t.Fatal(err)
		}
		sel, err := labels.Parse(pass.selector)
		if err != nil {
			t.Fatal(err)
		}
		for k, o := range state {
			if !sel.Matches(labels.Set(o.Labels)) {
				delete(state, k)
			}
		}
		if diff := DiffStates(state, got); diff != "" {
			t.Errorf("%s: %d pages at resourceVersion %d (%d writes meanwhile) differ from etcd at %d: %s", pass.name, pages, rev, during, rev, diff)
			continue
		}
		t.Logf("%s: %d items in %d pages at resourceVersion %d equal etcd's state there; %d writes happened while listing", pass.name, len(got), pages, rev, during)
		if during == 0 {
			t.Errorf("%s: no write happened while listing: the test proves nothing", pass.name)
		}
	}
}

// listPages lists ns page by page, checking that every page has the first
// page's resourceVersion, that items come in key order, each once, and
// that remainingItemCount adds up. It pauses between pages so that writes
// happen.
func listPages(ctx context.Context, cs kubernetes.Interface, ns, selector string, limit int64) (map[string]*Object, int64, int, error) {
	got := map[string]*Object{}
	opts := metav1.ListOptions{Limit: limit, LabelSelector: selector}
	var (
		rv      string
		last    string
		pages   int
		remain  *int64
		entries int
	)
	for {
		l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
		if err != nil {
			if apierrors.IsResourceExpired(err) {
				return nil, 0, pages, fmt.Errorf("page %d: continue expired: %w", pages+1, err)
			}
			return nil, 0, pages, fmt.Errorf("page %d: %w", pages+1, err)
		}
		pages++
		if rv == "" {
			rv = l.ResourceVersion
			remain = l.RemainingItemCount
		} else if l.ResourceVersion != rv {
			return nil, 0, pages, fmt.Errorf("page %d has resourceVersion %s, the first page %s", pages, l.ResourceVersion, rv)
		}
		for i := range l.Items {
			cm := &l.Items[i]
			if cm.Namespace != ns {
				return nil, 0, pages, fmt.Errorf("page %d: item %s/%s of another namespace", pages, cm.Namespace, cm.Name)
			}
			if cm.Name <= last {
				return nil, 0, pages, fmt.Errorf("page %d: %s after %s: not in key order, or twice", pages, cm.Name, last)
			}
			last = cm.Name
			o, err := ObjectOf(cm)
			if err != nil {
				return nil, 0, pages, err
			}
			got[o.Key()] = o
			entries++
		}
		if l.Continue == "" {
			break
		}
		if int64(len(l.Items)) > limit {
			return nil, 0, pages, fmt.Errorf("page %d has %d items, limit %d", pages, len(l.Items), limit)
		}
		opts.Continue = l.Continue
		// Pages spread over real time, so that writes land between
		// them: the continue token must keep the first page's revision.
		time.Sleep(20 * time.Millisecond) // wall clock: writes land between pages
	}
	if selector == "" && remain != nil && pages > 1 && *remain != int64(entries)-limit {
		return nil, 0, pages, fmt.Errorf("first page said %d items remain, %d came after it", *remain, int64(entries)-limit)
	}
	rev, err := strconv.ParseInt(rv, 10, 64)
	return got, rev, pages, err
}

// churn updates, deletes and creates the listed ConfigMaps at random until
// ctx ends; a conflict or a missing object is not an error (it keeps no
// model: it reads before it writes).
func churn(ctx context.Context, cs kubernetes.Interface, ns string, n int, writes *atomic.Int64) error {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	cms := cs.CoreV1().ConfigMaps(ns)
	for ctx.Err() == nil {
		name := fmt.Sprintf("obj-%05d", rng.IntN(n))
		cur, err := cms.Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "c"}},
				Data:       map[string]string{"v": "new"},
			}, metav1.CreateOptions{})
		case err != nil:
		case rng.IntN(5) == 0:
			err = cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})
		default:
			cur.Labels = map[string]string{"app": []string{"a", "b", "c"}[rng.IntN(3)]}
			cur.Data = map[string]string{"v": strconv.Itoa(rng.IntN(1 << 20))}
			_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
		}
		switch {
		case err == nil:
			writes.Add(1)
		case ctx.Err() != nil:
		case apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsAlreadyExists(err):
		default:
			return err
		}
	}
	return nil
}
