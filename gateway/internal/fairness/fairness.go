// Package fairness limits what each client may take from a gateway: a
// cap on requests in flight per priority level (kube-apiserver's
// --max-requests-inflight and --max-mutating-requests-inflight, with
// long-running requests excluded) with fair queuing beyond it (API
// Priority and Fairness: shuffle-sharded queues per level, served round
// robin, bounded in length and in wait), a token bucket of requests per
// user, a cap on concurrent watches per user, and a per-user budget of
// bytes returned by LISTs, charged once a response's size is known. A
// request over a limit gets a *Rejected carrying how long to wait.
package fairness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// Priority levels.
const (
	// LevelSystem serves cluster machinery: system:masters, system:nodes,
	// the control plane's own users (system:kube-*) and leader election
	// (coordination.k8s.io leases).
	LevelSystem = "system"
	// LevelWorkload serves everyone else.
	LevelWorkload = "workload"
)

// Reasons a request is rejected, the reason label of
// kgate_gateway_rejected_total.
const (
	// ReasonQueueFull: over the in-flight limit, and the shortest queue
	// of the user's hand is full.
	ReasonQueueFull = "queue_full"
	// ReasonTimeout: queued for MaxWait without getting a seat.
	ReasonTimeout = "time_out"
	// ReasonCancelled: the request's context ended while it was queued
	// (the client went away or the gateway is shutting down).
	ReasonCancelled = "cancelled"
	ReasonUserRate  = "user_rate"
	ReasonWatches   = "watches"
	ReasonListBytes = "list_bytes"
)

// Defaults of the queue settings (kube-apiserver's for a priority level,
// and its 15 s bound on the wait of a request with the default 60 s
// request timeout).
const (
	DefaultQueues           = 64
	DefaultHandSize         = 8
	DefaultQueueLengthLimit = 50
	DefaultMaxWait          = 15 * time.Second
)

// PriorityLevel names a priority level the way kube-apiserver's response
// headers X-Kubernetes-PF-PriorityLevel-UID and
// X-Kubernetes-PF-FlowSchema-UID do; kgate has one flow schema per level,
// named after it. The UIDs are derived from the name: the same in every
// gateway and across restarts.
type PriorityLevel struct {
	Name, UID, FlowSchemaUID string
}

func newPriorityLevel(name string) PriorityLevel {
	return PriorityLevel{
		Name:          name,
		UID:           uuid.NewSHA1(uuid.NameSpaceURL, []byte("kgate:prioritylevelconfiguration/"+name)).String(),
		FlowSchemaUID: uuid.NewSHA1(uuid.NameSpaceURL, []byte("kgate:flowschema/"+name)).String(),
	}
}

// Rejected is the error of a request over a limit: 429 TooManyRequests
// with Retry-After.
type Rejected struct {
	Reason     string
	RetryAfter int // seconds, at least 1
	Message    string
	Level      *PriorityLevel
}

func (r *Rejected) Error() string { return "fairness: " + r.Message }

// Config sets the limits; zero disables a limit (the queue settings take
// their defaults instead). The per-user limits apply to the workload
// level: the system level is bounded by its in-flight pools only.
type Config struct {
	// MaxInflight and MaxMutatingInflight cap the non-mutating and the
	// mutating requests in flight of each priority level (each level has
	// pools of this size, so a flood of workload requests never starves
	// the system level). Watches and other long-running requests are not
	// counted.
	MaxInflight         int
	MaxMutatingInflight int
	// Queues, HandSize, QueueLengthLimit and MaxWait shape the queues of
	// each limited pool: a request over the in-flight limit waits in the
	// shortest of the HandSize queues (of Queues) its user is dealt, is
	// rejected when that queue already holds QueueLengthLimit requests,
	// and gives up after MaxWait. Zero: the Default* values.
	Queues           int
	HandSize         int
	QueueLengthLimit int
	MaxWait          time.Duration
	// UserQPS and UserBurst are each user's token bucket of requests.
	// Burst defaults to max(1, 2×QPS).
	UserQPS   float64
	UserBurst int
	// MaxWatchesPerUser caps each user's concurrent watches.
	MaxWatchesPerUser int
	// ListBytesPerSecond is each user's budget of bytes returned by LISTs;
	// ListBytesBurst (default: one second's worth, at least 1 MiB) is how
	// far it may run ahead. A LIST made while the budget is in debt waits
	// up to ListMaxWait (default 1s) for it to clear, else gets 429.
	ListBytesPerSecond int64
	ListBytesBurst     int64
	ListMaxWait        time.Duration
	// Now and Sleep are the clock, After the queue wait's timer; default
	// time.Now, time.Sleep and time.After.
	Now   func() time.Time
	Sleep func(time.Duration)
	After func(time.Duration) <-chan time.Time
	// Metrics registers apiserver_current_inflight_requests, the
	// apiserver_flowcontrol_* families kube-apiserver's API Priority and
	// Fairness exports (labelled by priority level and flow schema, kgate
	// having one flow schema per level, named after it) and
	// kgate_gateway_rejected_total (every 429 of the limiter, the per-user
	// limits too); required.
	Metrics prometheus.Registerer
}

// Limiter applies a Config.
type Limiter struct {
	cfg          Config
	levels       map[string]*level
	inflight     *prometheus.GaugeVec
	inflightKind *prometheus.GaugeVec
	rejected     *prometheus.CounterVec
	queued       *prometheus.GaugeVec
	wait         *prometheus.HistogramVec
	dispatched   *prometheus.CounterVec
	apfRejected  *prometheus.CounterVec
	seats        *prometheus.GaugeVec

	mu      sync.Mutex // guards users and sweepAt
	users   map[string]*userState
	sweepAt int
}

// level is one priority level's pools; a nil pool is unlimited.
type level struct {
	PriorityLevel
	read       *queueSet
	mutating   *queueSet
	gauge      prometheus.Gauge // executing
	dispatched prometheus.Counter
	// waited and gaveUp observe the queue wait of requests that got a
	// seat and of those that did not.
	waited, gaveUp prometheus.Observer
}

// userState is one user's buckets and watch count.
type userState struct {
	requests bucket
	bytes    bucket
	watches  int
	seen     time.Time
}

// New validates cfg and makes a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Metrics == nil {
		return nil, errors.New("cannot make fairness limiter: Metrics is required")
	}
	if cfg.MaxInflight < 0 || cfg.MaxMutatingInflight < 0 || cfg.UserQPS < 0 || cfg.UserBurst < 0 || cfg.MaxWatchesPerUser < 0 || cfg.ListBytesPerSecond < 0 || cfg.ListBytesBurst < 0 ||
		cfg.Queues < 0 || cfg.HandSize < 0 || cfg.QueueLengthLimit < 0 || cfg.MaxWait < 0 {
		return nil, errors.New("cannot make fairness limiter: limits must not be negative")
	}
	if cfg.Queues == 0 {
		cfg.Queues = DefaultQueues
	}
	if cfg.HandSize == 0 {
		cfg.HandSize = min(DefaultHandSize, cfg.Queues)
	}
	if cfg.QueueLengthLimit == 0 {
		cfg.QueueLengthLimit = DefaultQueueLengthLimit
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.HandSize > cfg.Queues {
		return nil, fmt.Errorf("cannot make fairness limiter: hand size %d is more than the %d queues", cfg.HandSize, cfg.Queues)
	}
	if !dealable(cfg.Queues, cfg.HandSize) {
		return nil, fmt.Errorf("cannot make fairness limiter: hands of %d of %d queues need more than 64 bits of hash", cfg.HandSize, cfg.Queues)
	}
	if cfg.UserQPS > 0 && cfg.UserBurst == 0 {
		cfg.UserBurst = max(1, int(2*cfg.UserQPS))
	}
	if cfg.ListBytesPerSecond > 0 && cfg.ListBytesBurst == 0 {
		cfg.ListBytesBurst = max(cfg.ListBytesPerSecond, 1<<20)
	}
	if cfg.ListMaxWait <= 0 {
		cfg.ListMaxWait = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = time.Sleep
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	l := &Limiter{
		cfg:     cfg,
		levels:  make(map[string]*level, 2),
		users:   make(map[string]*userState),
		sweepAt: 1024,
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_current_executing_requests", Help: "Requests executing, by priority level and flow schema (long-running requests excluded), as kube-apiserver's API Priority and Fairness.",
		}, apfLabels),
		inflightKind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests", Help: "Requests in flight by kind (readOnly, mutating), as kube-apiserver's name: long-running requests excluded.",
		}, []string{"request_kind"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_gateway_rejected_total", Help: "Requests rejected with 429 by fairness, by reason.",
		}, []string{"reason"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_current_inqueue_requests", Help: "Requests waiting in the fairness queues for a seat, by priority level and flow schema.",
		}, apfLabels),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "apiserver_flowcontrol_request_wait_duration_seconds", Help: "Time requests of a limited pool waited in the fairness queues (0 for those seated at once), by priority level, flow schema and whether they then executed.",
			Buckets: []float64{0, .005, .02, .05, .1, .2, .5, 1, 2, 5, 10, 15, 30},
		}, append(apfLabels[:2:2], "execute")),
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_flowcontrol_dispatched_requests_total", Help: "Requests that began executing, by priority level and flow schema (long-running requests excluded).",
		}, apfLabels),
		apfRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_flowcontrol_rejected_requests_total", Help: "Requests rejected by the fairness queues, by priority level, flow schema and reason (queue-full, time-out, cancelled).",
		}, append(apfLabels[:2:2], "reason")),
		seats: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_nominal_limit_seats", Help: "Seats of each priority level: its read and mutating in-flight limits together (0: unlimited).",
		}, []string{"priority_level"}),
	}
	for _, c := range []prometheus.Collector{l.inflight, l.inflightKind, l.rejected, l.queued, l.wait, l.dispatched, l.apfRejected, l.seats} {
		if err := cfg.Metrics.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register fairness metrics: %w", err)
		}
	}
	for _, name := range []string{LevelSystem, LevelWorkload} {
		lv := &level{
			PriorityLevel: newPriorityLevel(name), gauge: l.inflight.WithLabelValues(name, name), dispatched: l.dispatched.WithLabelValues(name, name),
			waited: l.wait.WithLabelValues(name, name, "true"), gaveUp: l.wait.WithLabelValues(name, name, "false"),
		}
		lv.read, lv.mutating = l.pool(cfg.MaxInflight, name), l.pool(cfg.MaxMutatingInflight, name)
		l.levels[name] = lv
		l.seats.WithLabelValues(name).Set(float64(cfg.MaxInflight + cfg.MaxMutatingInflight))
		for _, r := range []string{ReasonQueueFull, ReasonTimeout, ReasonCancelled} {
			l.apfRejected.WithLabelValues(name, name, apfReason(r))
		}
	}
	for _, r := range []string{ReasonQueueFull, ReasonTimeout, ReasonCancelled, ReasonUserRate, ReasonWatches, ReasonListBytes} {
		l.rejected.WithLabelValues(r)
	}
	return l, nil
}

// pool makes a limited pool of level's, nil when limit is 0.
func (l *Limiter) pool(limit int, level string) *queueSet {
	if limit == 0 {
		return nil
	}
	return newQueueSet(limit, l.cfg.Queues, l.cfg.HandSize, l.cfg.QueueLengthLimit, l.queued.WithLabelValues(level, level))
}

// Request is what the limiter looks at.
type Request struct {
	User        string
	Groups      []string
	Verb        string
	APIGroup    string
	Resource    string
	Subresource string
}

// Level is the priority level of r.
func Level(r *Request) string {
	for _, g := range r.Groups {
		if g == "system:masters" || g == "system:nodes" {
			return LevelSystem
		}
	}
	if strings.HasPrefix(r.User, "system:kube-") || strings.HasPrefix(r.User, "system:node:") {
		return LevelSystem
	}
	if r.APIGroup == "coordination.k8s.io" && r.Resource == "leases" {
		return LevelSystem
	}
	return LevelWorkload
}

// LongRunning reports whether r streams for long: watches, proxies and
// log/exec/attach/port-forward, as kube-apiserver's long-running
// check. They hold no in-flight slot.
func LongRunning(r *Request) bool {
	switch r.Verb {
	case "watch", "proxy":
		return true
	}
	switch r.Subresource {
	case "log", "exec", "attach", "portforward", "proxy":
		return true
	}
	return false
}

func mutating(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Ticket is an admitted request. Done must be called once the response
// is written; EndWatch once a watch it admitted ends.
type Ticket struct {
	// Level is the request's priority level.
	Level *PriorityLevel
	l     *Limiter
	user  string
	pool  *queueSet        // nil: no seat held
	gauge prometheus.Gauge // nil: not counted in flight
	kind  prometheus.Gauge // apiserver_current_inflight_requests, set with gauge
	watch bool
}

// Admit decides on r: it returns a *Rejected when r is over a limit. A
// request over its pool's in-flight limit waits in a queue for a seat
// until it gets one, its queue is full, it has waited MaxWait or ctx
// ends; a LIST may also wait here for its user's byte budget.
func (l *Limiter) Admit(ctx context.Context, r *Request) (*Ticket, error) {
	lv := l.levels[Level(r)]
	t := &Ticket{Level: &lv.PriorityLevel, l: l, user: r.User}
	if lv.Name == LevelWorkload {
		if err := l.admitUser(r, t); err != nil {
			return nil, err
		}
	}
	if LongRunning(r) {
		return t, nil
	}
	s := lv.read
	if mutating(r.Verb) {
		s = lv.mutating
	}
	if s != nil {
		if err := l.seat(ctx, lv, s, r.User); err != nil {
			t.EndWatch()
			return nil, err
		}
		t.pool = s
	}
	lv.gauge.Inc()
	lv.dispatched.Inc()
	t.gauge = lv.gauge
	t.kind = l.inflightKind.WithLabelValues("readOnly")
	if mutating(r.Verb) {
		t.kind = l.inflightKind.WithLabelValues("mutating")
	}
	t.kind.Inc()
	return t, nil
}

// seat takes a seat of s for flow, waiting in a queue when none is free.
func (l *Limiter) seat(ctx context.Context, lv *level, s *queueSet, flow string) error {
	w, err := s.enter(flow)
	if err != nil {
		return l.reject(lv, ReasonQueueFull, time.Second, fmt.Sprintf("too many requests waiting at priority level %q, please try again later", lv.Name))
	}
	if w == nil {
		lv.waited.Observe(0)
		return nil
	}
	start := l.cfg.Now()
	var reason string
	select {
	case <-w.ready:
	case <-l.cfg.After(l.cfg.MaxWait):
		reason = ReasonTimeout
	case <-ctx.Done():
		reason = ReasonCancelled
	}
	if reason != "" && s.leave(w) {
		// Seated while giving up: a late seat still serves a request
		// that timed out, but the seat of one whose client is gone goes
		// to the next.
		if reason == ReasonTimeout {
			reason = ""
		} else {
			s.release()
		}
	}
	waited := l.cfg.Now().Sub(start).Seconds()
	if reason == "" {
		lv.waited.Observe(waited)
	} else {
		lv.gaveUp.Observe(waited)
	}
	switch reason {
	case ReasonTimeout:
		return l.reject(lv, reason, time.Second, fmt.Sprintf("request waited %v in the queue of priority level %q without a seat, please try again later", l.cfg.MaxWait, lv.Name))
	case ReasonCancelled:
		return l.reject(lv, reason, time.Second, fmt.Sprintf("request queued at priority level %q was cancelled: %v", lv.Name, context.Cause(ctx)))
	}
	return nil
}

func (l *Limiter) admitUser(r *Request, t *Ticket) error {
	if l.cfg.UserQPS == 0 && l.cfg.MaxWatchesPerUser == 0 && l.cfg.ListBytesPerSecond == 0 {
		return nil
	}
	for {
		wait, err := l.tryUser(r, t)
		if err != nil || wait == 0 {
			return err
		}
		l.cfg.Sleep(wait)
	}
}

// tryUser applies the per-user limits; a positive wait asks the caller to
// sleep and try again (a LIST waiting for its byte budget).
func (l *Limiter) tryUser(r *Request, t *Ticket) (time.Duration, error) {
	now := l.cfg.Now()
	lv := l.levels[LevelWorkload]
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.user(r.User, now)
	if r.Verb == "list" && l.cfg.ListBytesPerSecond > 0 {
		if d := u.bytes.debt(float64(l.cfg.ListBytesPerSecond), float64(l.cfg.ListBytesBurst), now); d > 0 {
			if d > l.cfg.ListMaxWait {
				return 0, l.reject(lv, ReasonListBytes, d, fmt.Sprintf("user %q has listed too many bytes, please try again later", r.User))
			}
			return d, nil
		}
	}
	if r.Verb == "watch" && l.cfg.MaxWatchesPerUser > 0 && u.watches >= l.cfg.MaxWatchesPerUser {
		return 0, l.reject(lv, ReasonWatches, time.Second, fmt.Sprintf("user %q has too many watches open (%d), please try again later", r.User, u.watches))
	}
	if l.cfg.UserQPS > 0 {
		if ok, d := u.requests.take(1, l.cfg.UserQPS, float64(l.cfg.UserBurst), now); !ok {
			return 0, l.reject(lv, ReasonUserRate, d, fmt.Sprintf("user %q is over its request rate, please try again later", r.User))
		}
	}
	if r.Verb == "watch" {
		u.watches++
		t.watch = true
	}
	return 0, nil
}

// user returns the state of name, made on first use; l.mu is held. Idle
// users are swept when the map has doubled since the last sweep.
func (l *Limiter) user(name string, now time.Time) *userState {
	u, ok := l.users[name]
	if !ok {
		if len(l.users) >= l.sweepAt {
			for n, s := range l.users {
				if s.watches == 0 && now.Sub(s.seen) > time.Minute {
					delete(l.users, n)
				}
			}
			l.sweepAt = max(1024, 2*len(l.users))
		}
		u = &userState{
			requests: newBucket(float64(l.cfg.UserBurst), now),
			bytes:    newBucket(float64(l.cfg.ListBytesBurst), now),
		}
		l.users[name] = u
	}
	u.seen = now
	return u
}

func (l *Limiter) reject(lv *level, reason string, wait time.Duration, msg string) *Rejected {
	l.rejected.WithLabelValues(reason).Inc()
	if r := apfReason(reason); r != "" {
		l.apfRejected.WithLabelValues(lv.Name, lv.Name, r).Inc()
	}
	return &Rejected{Reason: reason, RetryAfter: retryAfter(wait), Message: msg, Level: &lv.PriorityLevel}
}

// apfLabels label the apiserver_flowcontrol_* families.
var apfLabels = []string{"priority_level", "flow_schema"}

// apfReason is kube-apiserver's reason label of a rejection by the
// queues; "" for the per-user limits, which it does not have.
func apfReason(reason string) string {
	switch reason {
	case ReasonQueueFull:
		return "queue-full"
	case ReasonTimeout:
		return "time-out"
	case ReasonCancelled:
		return "cancelled"
	}
	return ""
}

// Done releases the request's seat, which goes to the next request
// queued, and, for a LIST, charges the bytes it returned to its user's
// budget. Calls after the first release nothing.
func (t *Ticket) Done(verb string, responseBytes int) {
	if t.pool != nil {
		t.pool.release()
		t.pool = nil
	}
	if t.gauge != nil {
		t.gauge.Dec()
		t.kind.Dec()
		t.gauge, t.kind = nil, nil
	}
	l := t.l
	if verb != "list" || l.cfg.ListBytesPerSecond == 0 || responseBytes <= 0 {
		return
	}
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.user(t.user, now)
	u.bytes.refill(float64(l.cfg.ListBytesPerSecond), float64(l.cfg.ListBytesBurst), now)
	u.bytes.tokens -= float64(responseBytes)
}

// EndWatch releases the watch slot of a watch the ticket admitted; it is
// safe to call more than once and for other requests.
func (t *Ticket) EndWatch() {
	if !t.watch {
		return
	}
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	if t.watch {
		t.watch = false
		if u := t.l.users[t.user]; u != nil {
			u.watches--
		}
	}
}
