package rest

import (
	"context"
	"testing"
)

// ctxRevisions fails, as etcd's client does, once the context of the
// call has ended.
type ctxRevisions struct{ next revisions }

func (r ctxRevisions) Current(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return r.next.Current(ctx)
}

// A gateway that starts draining cancels the handler's base context to
// end the watches; an ordinary request in flight, or one that arrives
// before the listener closes, still completes.
func TestRequestsOutliveTheBase(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newEnv(t, func(c *Config) { c.Revisions = ctxRevisions{c.Revisions} })
	var err error
	cfg := e.h.cfg
	if e.h, err = New(base, cfg); err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := e.do("GET", "/api/v1/namespaces/ns/pods", nil); r.code != 200 {
		t.Fatalf("consistent list after the base ended: %d %v", r.code, r.status)
	}
}
