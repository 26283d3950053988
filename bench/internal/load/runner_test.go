package load

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The runs below are time-driven: each runs in a synctest bubble, where
// the operations' sleeps and the runner's timers are on the bubble's clock.
func TestClosedLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		res, err := Run(context.Background(), Options{Concurrency: 4, Duration: 200 * time.Millisecond}, func(ctx context.Context, w int, seq int64) error {
			time.Sleep(5 * time.Millisecond)
			if n.Add(1)%10 == 0 {
				return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("stale"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Ops != n.Load() || res.Ops < 40 {
			t.Fatalf("ops %d, op called %d times", res.Ops, n.Load())
		}
		if res.ByCode["409 Conflict"] != res.Errors || res.Errors != res.Ops/10 {
			t.Fatalf("errors %d by code %v of %d ops", res.Errors, res.ByCode, res.Ops)
		}
		if res.Example["409 Conflict"] == "" {
			t.Fatal("no example message for 409")
		}
		if p50 := time.Duration(res.Latency.Quantile(0.5)); p50 < 5*time.Millisecond || p50 > 50*time.Millisecond {
			t.Fatalf("p50 %v for 5ms operations", p50)
		}
		if uint64(res.Ops-res.Errors) != res.Latency.Count() {
			t.Fatalf("latency count %d, successes %d", res.Latency.Count(), res.Ops-res.Errors)
		}
	})
}

func TestOpenLoopRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, err := Run(context.Background(), Options{Concurrency: 4, Duration: 500 * time.Millisecond, Rate: 200}, func(ctx context.Context, w int, seq int64) error {
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// 100 operations are due in 500ms at 200/s.
		if res.Ops < 90 || res.Ops > 101 {
			t.Fatalf("ops %d at 200/s for 500ms, want ~100", res.Ops)
		}
		if res.Missed != 0 {
			t.Fatalf("missed %d with idle workers", res.Missed)
		}
	})
}

func TestOpenLoopOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One worker, 20ms per op, 500/s wanted: the queue backs up, latency
		// is measured from the planned start and grows well past 20ms.
		res, err := Run(context.Background(), Options{Concurrency: 1, Duration: 300 * time.Millisecond, Rate: 500}, func(ctx context.Context, w int, seq int64) error {
			time.Sleep(20 * time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Missed == 0 {
			t.Fatal("an overloaded open-loop run missed nothing")
		}
		if max := time.Duration(res.Latency.Max()); max < 100*time.Millisecond {
			t.Fatalf("max latency %v: queueing time not counted", max)
		}
	})
}

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for err, want := range map[error]string{
		apierrors.NewNotFound(gr, "x"):                      "404 NotFound",
		apierrors.NewTooManyRequests("slow down", 1):        "429 TooManyRequests",
		apierrors.NewResourceExpired("too old"):             "410 Expired",
		fmt.Errorf("wrapped: %w", context.DeadlineExceeded): "timeout",
		context.Canceled:   "canceled",
		errors.New("boom"): "other",
	} {
		if got := Classify(err); got != want {
			t.Errorf("Classify(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestRecorder(t *testing.T) {
	r := NewRecorder(time.Second, 100*time.Millisecond)
	r.Observe(3*time.Millisecond, r.Start().Add(150*time.Millisecond))
	r.Fail(apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x"))
	res := r.Result()
	if res.Ops != 2 || res.Errors != 1 || res.Latency.Count() != 1 || res.ByCode["404 NotFound"] != 1 {
		t.Fatalf("recorder result %+v", res)
	}
	if rates := res.Timeline.Rates(0); len(rates) != 2 || rates[1] != 10 {
		t.Fatalf("timeline %v", rates)
	}
}
