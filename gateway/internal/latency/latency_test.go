package latency

import (
	"context"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestTrackerThroughDerivedContext(t *testing.T) {
	var rc fasthttp.RequestCtx
	tr := Start(&rc)
	// A context derived from the request, as admission gets one (a bare
	// RequestCtx has no server, so no deadline here).
	ctx := context.WithValue(&rc, struct{ other int }{}, 1)
	From(ctx).Add(3 * time.Millisecond)
	From(ctx).Add(2 * time.Millisecond)
	if got := tr.Excluded(); got != 5*time.Millisecond {
		t.Fatalf("Excluded = %v, want 5ms", got)
	}
}

func TestNilTracker(t *testing.T) {
	tr := From(context.Background())
	if tr != nil {
		t.Fatalf("From(Background) = %v, want nil", tr)
	}
	tr.Add(time.Second)
	tr.Since(time.Now())
	if tr.Excluded() != 0 {
		t.Fatal("a nil Tracker must record nothing")
	}
}
