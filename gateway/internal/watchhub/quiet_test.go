package watchhub

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cachenodetest"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/storagetest"
)

// A cluster-wide watch of pods split in four ranges, against a real cache
// node whose idle ranges never publish progress on their own (an hour's
// interval): each write to one namespace must still reach the watch, in
// order, because the merge asks the three quiet ranges' primary for their
// progress through the write's revision and the primary asks etcd. Before
// progress requests, each such event waited for the quiet ranges' idle
// progress (1 to 2 s at the default interval; never here).
func TestClusterWideWatchOverSplitRangesWithoutIdleProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, NATS and a cache node")
	}
	storagetest.CheckGoroutines(t)
	var table *ranges.Table
	env := cachenodetest.Start(t, func(c *cachenode.Config) {
		c.ProgressInterval = time.Hour
		f, err := ranges.Follow(c.Registry, ranges.DefaultSplits())
		if err != nil {
			t.Fatal(err)
		}
		c.Ranges, table = f, f.Current()
	})
	var podRanges []string
	for _, r := range table.All() {
		if strings.HasPrefix(r.ID, "pods-") {
			podRanges = append(podRanges, r.ID)
		}
	}
	if len(podRanges) != 4 {
		t.Fatalf("pod ranges %v, want four", podRanges)
	}
	hub, err := New(Config{NATS: env.NATS, Source: env.Client, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := env.Etcd.Get(ctx, "/registry/pods/")
	if err != nil {
		t.Fatal(err)
	}
	since := resp.Header.Revision
	s, err := hub.WatchRanges(podRanges, since, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const n = 20
	for i := range n {
		// Namespace "a" is in the first range; the other three stay quiet.
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprintf("p%d", i)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		}
		b, err := env.Codec.EncodeJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		put, err := env.Etcd.Put(ctx, "/registry/pods/a/"+p.Name, string(b))
		if err != nil {
			t.Fatal(err)
		}
		rev := put.Header.Revision
		d, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("write %d of %d (revision %d) not delivered: %v", i, n, rev, err)
		}
		if d.Type != Added || d.Rev != rev || d.Event.Name != p.Name {
			t.Fatalf("write %d: got %s %s at %d, want ADDED %s at %d", i, d.Type, d.Event.Name, d.Rev, p.Name, rev)
		}
	}
}
