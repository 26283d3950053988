// Package fairness limits what each client may take from a gateway: a
// cap on requests in flight per priority level (kube-apiserver's
// --max-requests-inflight and --max-mutating-requests-inflight, with
// long-running requests excluded), a token bucket of requests per user, a
// cap on concurrent watches per user, and a per-user budget of bytes
// returned by LISTs, charged once a response's size is known. A request
// over a limit gets a *Rejected carrying how long to wait.
package fairness

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

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
	ReasonInflight  = "inflight"
	ReasonUserRate  = "user_rate"
	ReasonWatches   = "watches"
	ReasonListBytes = "list_bytes"
)

// Rejected is the error of a request over a limit: 429 TooManyRequests
// with Retry-After.
type Rejected struct {
	Reason     string
	RetryAfter int // seconds, at least 1
	Message    string
}

func (r *Rejected) Error() string { return "fairness: " + r.Message }

// Config sets the limits; zero disables a limit. The per-user limits
// apply to the workload level: the system level is bounded by its
// in-flight pools only.
type Config struct {
	// MaxInflight and MaxMutatingInflight cap the non-mutating and the
	// mutating requests in flight of each priority level (each level has
	// pools of this size, so a flood of workload requests never starves
	// the system level). Watches and other long-running requests are not
	// counted.
	MaxInflight         int
	MaxMutatingInflight int
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
	// Now and Sleep are the clock; default time.Now and time.Sleep.
	Now   func() time.Time
	Sleep func(time.Duration)
	// Metrics registers kgate_gateway_inflight and
	// kgate_gateway_rejected_total; required.
	Metrics prometheus.Registerer
}

// Limiter applies a Config.
type Limiter struct {
	cfg      Config
	levels   map[string]*level
	inflight *prometheus.GaugeVec
	rejected *prometheus.CounterVec

	mu      sync.Mutex // guards users and sweepAt
	users   map[string]*userState
	sweepAt int
}

// level is one priority level's pools.
type level struct {
	name     string
	read     pool
	mutating pool
	gauge    prometheus.Gauge
}

// pool counts requests in flight against a limit (0: unlimited).
type pool struct {
	mu    sync.Mutex // guards n
	n     int
	limit int
}

func (p *pool) acquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limit > 0 && p.n >= p.limit {
		return false
	}
	p.n++
	return true
}

func (p *pool) release() {
	p.mu.Lock()
	p.n--
	p.mu.Unlock()
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
	if cfg.MaxInflight < 0 || cfg.MaxMutatingInflight < 0 || cfg.UserQPS < 0 || cfg.UserBurst < 0 || cfg.MaxWatchesPerUser < 0 || cfg.ListBytesPerSecond < 0 || cfg.ListBytesBurst < 0 {
		return nil, errors.New("cannot make fairness limiter: limits must not be negative")
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
	l := &Limiter{
		cfg:     cfg,
		levels:  make(map[string]*level, 2),
		users:   make(map[string]*userState),
		sweepAt: 1024,
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgate_gateway_inflight", Help: "Requests in flight by priority level (long-running requests excluded).",
		}, []string{"level"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_gateway_rejected_total", Help: "Requests rejected with 429 by fairness, by reason.",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{l.inflight, l.rejected} {
		if err := cfg.Metrics.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register fairness metrics: %w", err)
		}
	}
	for _, name := range []string{LevelSystem, LevelWorkload} {
		l.levels[name] = &level{name: name, read: pool{limit: cfg.MaxInflight}, mutating: pool{limit: cfg.MaxMutatingInflight}, gauge: l.inflight.WithLabelValues(name)}
	}
	for _, r := range []string{ReasonInflight, ReasonUserRate, ReasonWatches, ReasonListBytes} {
		l.rejected.WithLabelValues(r)
	}
	return l, nil
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
// exec/attach/port-forward. They hold no in-flight slot.
func LongRunning(r *Request) bool {
	switch r.Verb {
	case "watch", "proxy":
		return true
	}
	switch r.Subresource {
	case "exec", "attach", "portforward", "proxy":
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
	l     *Limiter
	user  string
	pool  *pool
	gauge prometheus.Gauge
	watch bool
}

// Admit decides on r: it returns a *Rejected when r is over a limit. A LIST
// may wait here for its user's byte budget.
func (l *Limiter) Admit(r *Request) (*Ticket, error) {
	t := &Ticket{l: l, user: r.User}
	lv := l.levels[Level(r)]
	if lv.name == LevelWorkload {
		if err := l.admitUser(r, t); err != nil {
			return nil, err
		}
	}
	if LongRunning(r) {
		return t, nil
	}
	p := &lv.read
	if mutating(r.Verb) {
		p = &lv.mutating
	}
	if !p.acquire() {
		t.EndWatch()
		return nil, l.reject(ReasonInflight, time.Second, fmt.Sprintf("too many requests in flight at priority level %q, please try again later", lv.name))
	}
	lv.gauge.Inc()
	t.pool, t.gauge = p, lv.gauge
	return t, nil
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
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.user(r.User, now)
	if r.Verb == "list" && l.cfg.ListBytesPerSecond > 0 {
		if d := u.bytes.debt(float64(l.cfg.ListBytesPerSecond), float64(l.cfg.ListBytesBurst), now); d > 0 {
			if d > l.cfg.ListMaxWait {
				return 0, l.reject(ReasonListBytes, d, fmt.Sprintf("user %q has listed too many bytes, please try again later", r.User))
			}
			return d, nil
		}
	}
	if r.Verb == "watch" && l.cfg.MaxWatchesPerUser > 0 && u.watches >= l.cfg.MaxWatchesPerUser {
		return 0, l.reject(ReasonWatches, time.Second, fmt.Sprintf("user %q has too many watches open (%d), please try again later", r.User, u.watches))
	}
	if l.cfg.UserQPS > 0 {
		if ok, d := u.requests.take(1, l.cfg.UserQPS, float64(l.cfg.UserBurst), now); !ok {
			return 0, l.reject(ReasonUserRate, d, fmt.Sprintf("user %q is over its request rate, please try again later", r.User))
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

func (l *Limiter) reject(reason string, wait time.Duration, msg string) *Rejected {
	l.rejected.WithLabelValues(reason).Inc()
	return &Rejected{Reason: reason, RetryAfter: retryAfter(wait), Message: msg}
}

// Done releases the request's in-flight slot and, for a LIST, charges
// the bytes it returned to its user's budget.
func (t *Ticket) Done(verb string, responseBytes int) {
	if t.pool != nil {
		t.pool.release()
		t.gauge.Dec()
		t.pool = nil
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
