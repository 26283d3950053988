// Package fairness holds the per-user limits kgate adds to API Priority
// and Fairness (gateway/internal/apf, which seats and queues requests by
// the FlowSchemas and PriorityLevelConfigurations): a token bucket of
// requests per user, a cap on concurrent watches per user, and a per-user
// budget of bytes returned by LISTs, charged once a response's size is
// known. Cluster machinery (system:masters, system:nodes, the control
// plane's own users and leader election) is exempt. A request over a
// limit gets a *Rejected carrying how long to wait. It also counts
// requests executing by kind (apiserver_current_inflight_requests).
package fairness

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a request is rejected, the reason label of
// kgate_gateway_rejected_total; ReasonPriorityAndFairness is a
// rejection by API Priority and Fairness (its queue was full, its wait
// ran out or its client left), counted by the gateway.
const (
	ReasonUserRate            = "user_rate"
	ReasonWatches             = "watches"
	ReasonListBytes           = "list_bytes"
	ReasonPriorityAndFairness = "priority_and_fairness"
)

// Rejected is the error of a request over a limit: 429 TooManyRequests
// with Retry-After.
type Rejected struct {
	Reason     string
	RetryAfter int // seconds, at least 1
	Message    string
}

func (r *Rejected) Error() string { return "fairness: " + r.Message }

// Config sets the limits; zero disables a limit.
type Config struct {
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
	// Metrics registers apiserver_current_inflight_requests and
	// kgate_gateway_rejected_total (every 429 of the gateway's limits,
	// API Priority and Fairness's included); required.
	Metrics prometheus.Registerer
}

// Limiter applies a Config.
type Limiter struct {
	cfg          Config
	inflightKind *prometheus.GaugeVec
	rejected     *prometheus.CounterVec

	mu      sync.Mutex // guards users and sweepAt
	users   map[string]*userState
	sweepAt int
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
	if cfg.UserQPS < 0 || cfg.UserBurst < 0 || cfg.MaxWatchesPerUser < 0 || cfg.ListBytesPerSecond < 0 || cfg.ListBytesBurst < 0 {
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
		users:   make(map[string]*userState),
		sweepAt: 1024,
		inflightKind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests", Help: "Requests executing by kind (readOnly, mutating), as kube-apiserver's name: long-running requests excluded.",
		}, []string{"request_kind"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_gateway_rejected_total", Help: "Requests rejected with 429 by the gateway's limits, by reason.",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{l.inflightKind, l.rejected} {
		if err := cfg.Metrics.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register fairness metrics: %w", err)
		}
	}
	for _, r := range []string{ReasonUserRate, ReasonWatches, ReasonListBytes, ReasonPriorityAndFairness} {
		l.rejected.WithLabelValues(r)
	}
	return l, nil
}

// Request is what the limiter looks at.
type Request struct {
	User   string
	Groups []string
	Verb   string
	// APIGroup and Resource tell leader election (coordination.k8s.io
	// leases), which is exempt.
	APIGroup string
	Resource string
}

// system reports whether r is cluster machinery's, exempt from the
// per-user limits: system:masters, system:nodes, the control plane's
// own users (system:kube-*) and leader election.
func system(r *Request) bool {
	for _, g := range r.Groups {
		if g == "system:masters" || g == "system:nodes" {
			return true
		}
	}
	if strings.HasPrefix(r.User, "system:kube-") || strings.HasPrefix(r.User, "system:node:") {
		return true
	}
	return r.APIGroup == "coordination.k8s.io" && r.Resource == "leases"
}

// mutating reports whether verb writes.
func mutating(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Executing counts a request of verb executing until the returned
// function is called (apiserver_current_inflight_requests).
func (l *Limiter) Executing(verb string) func() {
	g := l.inflightKind.WithLabelValues("readOnly")
	if mutating(verb) {
		g = l.inflightKind.WithLabelValues("mutating")
	}
	g.Inc()
	return g.Dec
}

// RejectedByPriorityAndFairness counts a 429 of API Priority and
// Fairness.
func (l *Limiter) RejectedByPriorityAndFairness() {
	l.rejected.WithLabelValues(ReasonPriorityAndFairness).Inc()
}

// Ticket is an admitted request. Done must be called once the response
// is written; EndWatch once a watch it admitted ends.
type Ticket struct {
	l     *Limiter
	user  string
	watch bool
}

// Admit decides on r: it returns a *Rejected when r is over a limit. A
// LIST may wait here for its user's byte budget.
func (l *Limiter) Admit(r *Request) (*Ticket, error) {
	t := &Ticket{l: l, user: r.User}
	if !system(r) {
		if err := l.admitUser(r, t); err != nil {
			return nil, err
		}
	}
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

// Done charges the bytes a LIST returned to its user's budget.
func (t *Ticket) Done(verb string, responseBytes int) {
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
