// Package scenario holds the harness's workloads — get, list,
// watch-fanout, write, mixed, etcd-baseline and memory — behind one
// interface, and parses their specs ("list,c=8,d=10s,variants=...").
package scenario

import (
	"context"
	"io"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kgate/kgate/bench/internal/load"
	"github.com/kgate/kgate/bench/internal/seed"
	"github.com/kgate/kgate/bench/internal/target"
)

// Scenario is one workload. Run is called once per run and target; it
// must leave the server as it found it apart from the data it measures
// (runs are compared with each other).
type Scenario interface {
	// Name is unique in a suite ("list/ns/consistent/all/proto").
	Name() string
	// Kind groups scenarios for plots ("list").
	Kind() string
	Description() string
	// Params are the settings as reported.
	Params() map[string]string
	// Etcd is true for scenarios that talk to etcd, not to a target.
	Etcd() bool
	// Seeded is true for scenarios reading the seeded data set.
	Seeded() bool
	Run(ctx context.Context, env *Env) (*Outcome, error)
}

// Env is what a run may use.
type Env struct {
	// Target is the API server (nil for etcd scenarios).
	Target *target.Target
	// Etcd is a client of the etcd behind the targets (nil when no
	// --etcd-endpoints).
	Etcd *clientv3.Client
	// Seed is the seeded data set.
	Seed seed.Layout
	// Prefix starts the names of everything the harness creates.
	Prefix string
	// Run is the run's index (0-based) of Runs; ID is unique per run
	// and target (usable in object names).
	Run, Runs int
	ID        string
	Log       *slog.Logger
	// Progress receives progress bars (stderr).
	Progress io.Writer
}

// Outcome is what one run measured.
type Outcome struct {
	// Result holds the main operation (what ops/s and latency describe).
	Result *load.Result
	// Extra are scenario figures (watch delivery, memory per object, ...).
	Extra map[string]float64
}

// Common are the settings every load scenario has.
type Common struct {
	// Concurrency is the number of workers.
	Concurrency int
	// Duration is how long each run starts operations.
	Duration time.Duration
	// Rate is the open-loop target in operations per second (0: closed
	// loop, as fast as the workers go).
	Rate float64
}

func (c Common) options() load.Options {
	return load.Options{Concurrency: c.Concurrency, Duration: c.Duration, Rate: c.Rate}
}

func (c Common) params() map[string]string {
	p := map[string]string{"concurrency": itoa(c.Concurrency), "duration": c.Duration.String(), "rate": "closed-loop"}
	if c.Rate > 0 {
		p["rate"] = ftoa(c.Rate) + "/s"
	}
	return p
}
