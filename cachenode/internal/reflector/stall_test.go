package reflector_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/internal/reflector"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestStallDetectedAndRepaired: a watch that brings nothing is reported
// stalled once the timeout passes and is started again; when etcd answers
// again the range catches up and is no longer stalled.
func TestStallDetectedAndRepaired(t *testing.T) {
	e := newEnv(t)
	f := storagetest.FreezeWatches(e.etcd)
	r := e.start(nil, func(r *reflector.Reflector) { r.SetStallAfter(time.Second) })
	waitFor(t, r, 1)
	// Nothing is written: etcd answers no progress request for a watch
	// that starts past its revision. That is a quiet range, not a stall.
	time.Sleep(3 * time.Second)
	if quiet, stalled := r.Stalled(); stalled || f.Watches() != 1 {
		t.Fatalf("idle etcd: stalled %v (%s), %d watches", stalled, quiet, f.Watches())
	}
	waitFor(t, r, e.put(pod("ns", "a", "web", "Running"), false))
	if quiet, stalled := r.Stalled(); stalled {
		t.Fatalf("stalled after %s while following", quiet)
	}

	f.Freeze()
	rev := e.put(pod("ns", "b", "web", "Running"), false)
	// Two more watches: the stall was detected and the watch begun again,
	// twice (each given the timeout to answer).
	storagetest.Eventually(t, 20*time.Second, "a stall reported and the watch restarted twice", func() error {
		if _, stalled := r.Stalled(); !stalled || f.Watches() < 3 {
			return fmt.Errorf("stalled %v, %d watches", stalled, f.Watches())
		}
		return nil
	})
	if r.Seen() >= rev {
		t.Fatalf("seen %d while frozen, the write was at %d", r.Seen(), rev)
	}

	f.Thaw()
	waitFor(t, r, rev)
	if quiet, stalled := r.Stalled(); stalled {
		t.Fatalf("still stalled (%s) after catching up", quiet)
	}
	snap, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Get(e.pods.Resource.Key("ns", "b")); !ok {
		t.Fatal("the write made while frozen is missing")
	}
}
