package report

import "time"

// Run is what one chaos run measured and checked; Write renders it.
type Run struct {
	// Seed reproduces the run's fault order and workload (CHAOS_SEED).
	Seed int64
	// Cluster describes the deployment, e.g. "3 etcd, 3 NATS, 3 cache
	// nodes (R=2), 3 gateways".
	Cluster string
	// Started and Ended bound the run.
	Started, Ended time.Time
	// Faults in the order injected.
	Faults []Fault
	// Requests are the workload's requests, in any order.
	Requests []Request
	// Lags are watch delivery lags: for each event a watcher received,
	// the time from the write's acknowledgement to its receipt.
	Lags []Lag
	// Totals are the whole run's checks.
	Totals Checks
	// Skipped are the faults this machine cannot inject, with why.
	Skipped []string
	// Problems are every violation found, one line each (empty when the
	// run passed).
	Problems []string
}

// Fault is one fault window.
type Fault struct {
	// Name says what was done, e.g. "kill -9 cachenode-1, restart".
	Name string
	// Injected is when the fault began, Healed when it was undone (the
	// member restarted, the link reconnected), Recovered when the
	// cluster was whole again: a new write acknowledged and seen by every
	// watcher. Heal time is Recovered-Healed.
	Injected, Healed, Recovered time.Time
	// Checks are the checks of what happened from Injected to Recovered.
	Checks Checks
}

// Checks are the counts of one window or of the whole run.
type Checks struct {
	// Requests made and how many failed.
	Requests, Failed int
	// Events checked (delivered to watchers) and the watch violations.
	Events, Lost, Duplicated, Reordered int
	// Writes acknowledged and checked against etcd's history, and the
	// write violations: acknowledged but not in etcd, applied twice, or
	// a 409 Conflict without a real conflict.
	Writes, WritesLost, WritesTwice, FalseConflicts int
	// Reads checked for linearizability (consistent GET and LIST) and
	// the verdict: "ok", "violation" or "unknown" (the checker timed
	// out). StaleReads counts resourceVersion=0 reads older than what the
	// same client had already seen through the same gateway.
	Reads        int
	Linearizable string
	StaleReads   int
	// Relists counts watchers that had to list again (a 410 or an error
	// kgate promised to hide).
	Relists int
}

// Request is one request of the workload.
type Request struct {
	// Kind is create, update, delete, get, list, list-rv0 or watch.
	Kind string
	// Gateway served it (index), -1 when unknown.
	Gateway    int
	Start, End time.Time
	Failed     bool
}

// Lag is one watch delivery.
type Lag struct {
	Gateway int
	At      time.Time // when the watcher received the event
	Lag     time.Duration
}
