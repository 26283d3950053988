// Package publisher publishes the events of a cache node's ranges on NATS,
// each once, on the subject of its range and namespace, and publishes
// progress on a range's progress subject when the range has been idle and
// its seen revision moved, and when a gateway asks for it: a merged watch
// holding an event of another range at revision R asks a quiet range for
// its progress through R, and the range's primary answers as soon as its
// reflector has seen R (asking etcd for a progress notification when it
// has not yet).
package publisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/nats-io/nats.go"
)

// ErrTooLarge is returned for an event larger than the NATS server's
// max_payload. The event is still in the cache node's window: subscribers
// see the gap in the revision chain and fetch it from there.
var ErrTooLarge = errors.New("publisher: event larger than NATS max_payload (raise max_payload; natsembed uses 8 MiB)")

// Config configures a publisher.
type Config struct {
	NATS *nats.Conn // required
	// Interval: a range idle this long publishes progress when its seen
	// revision moved. Default 1s.
	Interval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics; nil records nothing.
	Metrics *Metrics
	// Filter, for fault-injection tests only: when set and it returns
	// false for a message (an event or a progress), the message is not
	// sent, as if NATS lost it. Nil sends everything.
	Filter func(*event.Event) bool
	// AskProgress asks the reflector of rangeID for an etcd progress
	// notification, without blocking: a gateway waits for the range's
	// progress through a revision it has not seen yet. Its answer comes
	// back through Seen. Nil: requests are answered only once events or
	// progress the reflector sees anyway reach the revision.
	AskProgress func(rangeID string)
}

// Publisher publishes the events of all ranges of a node. Event, Seen and
// Restart are called by each range's reflector; Run publishes progress.
type Publisher struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex // guards ranges
	ranges map[string]*rangeState
}

// rangeState is what the publisher knows of one range.
type rangeState struct {
	id string

	mu           sync.Mutex // guards the fields below and orders publishes of the range
	lastEvent    int64      // revision of the last event published; 0 after a restart
	seen         int64      // revision the range is complete up to
	lastProgress int64      // revision of the last progress published
	lastActivity time.Time  // last event or progress published
	buf          []byte     // marshal buffer, reused
	subjects     map[string]string
	quiet        bool // another node is the range's primary: publish nothing
	announce     bool // promoted: publish where the chain stands at once
	lastBeat     time.Time
	m            rangeMetrics
	errLogged    time.Time // rate limit of publish error logs

	// Progress requests from gateways (see Request).
	wanted   int64     // the highest revision a gateway waits for, 0 when none
	wantedAt time.Time // when wanted was set
	sent     int64     // every revision up to it was covered by a published message
	sentAt   time.Time // when sent last moved
}

// New returns a publisher.
func New(cfg Config) (*Publisher, error) {
	if cfg.NATS == nil {
		return nil, errors.New("cannot make publisher: NATS is required")
	}
	if cfg.Interval < 0 {
		return nil, errors.New("cannot make publisher: negative Interval")
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Publisher{cfg: cfg, log: cfg.Logger, ranges: map[string]*rangeState{}}, nil
}

func (p *Publisher) rangeState(id string) *rangeState {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs, ok := p.ranges[id]
	if !ok {
		rs = &rangeState{id: id, subjects: map[string]string{}, m: p.cfg.Metrics.forRange(id), lastActivity: p.cfg.Now()}
		p.ranges[id] = rs
	}
	return rs
}

// SetPrimary says whether this node publishes rangeID's events and
// progress: only the range's primary does; replicas keep their chain
// state up to date so that, promoted, they continue it seamlessly.
func (p *Publisher) SetPrimary(rangeID string, primary bool) {
	rs := p.rangeState(rangeID)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.quiet && primary {
		// Promoted: announce where the chain stands at once. Gateways may
		// have missed the last events (nobody published them while the
		// old primary was dying): the announcement shows them the gap.
		rs.lastProgress = 0
		rs.announce = true
	}
	rs.quiet = !primary
}

// Event publishes ev on its subject. Failures are logged and counted: the
// window still has the event, and subscribers repair the gap from it.
func (p *Publisher) Event(ev *event.Event) {
	rs := p.rangeState(ev.Range)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	subj, ok := rs.subjects[ev.Namespace]
	if !ok {
		subj = event.Subject(ev.Range, ev.Namespace)
		rs.subjects[ev.Namespace] = subj
	}
	err := p.publish(rs, subj, ev)
	now := p.cfg.Now()
	if ev.Last() {
		// Only a whole revision is seen: progress published between two
		// events of one transaction must not claim the first one's
		// revision complete.
		rs.lastEvent = ev.Revision
		rs.seen = max(rs.seen, ev.Revision)
		if err == nil && !rs.quiet {
			rs.markSent(ev.Revision, now)
		}
		if rs.wanted != 0 && rs.seen >= rs.wanted {
			rs.wanted = 0 // the event itself answers
		}
	}
	rs.lastActivity = now
	if err != nil {
		p.failed(rs, ev, err)
	}
}

// markSent records that a message covering every revision up to rev went
// out at now.
func (rs *rangeState) markSent(rev int64, now time.Time) {
	if rev > rs.sent {
		rs.sent = rev
	}
	rs.sentAt = now
}

// publish marshals and sends ev. Callers hold rs.mu.
func (p *Publisher) publish(rs *rangeState, subj string, ev *event.Event) error {
	rs.buf = ev.AppendMarshal(rs.buf[:0])
	if limit := p.cfg.NATS.MaxPayload(); limit > 0 && int64(len(rs.buf)) > limit {
		return fmt.Errorf("cannot publish event %d of %s (%d bytes > %d): %w", ev.Revision, ev.Key, len(rs.buf), limit, ErrTooLarge)
	}
	if rs.quiet {
		return nil // another replica publishes this range
	}
	if p.cfg.Filter != nil && !p.cfg.Filter(ev) {
		return nil // lost on purpose: a fault-injection test
	}
	if err := p.cfg.NATS.Publish(subj, rs.buf); err != nil {
		return fmt.Errorf("cannot publish event %d on %s: %w", ev.Revision, subj, err)
	}
	if cap(rs.buf) > 1<<20 {
		rs.buf = nil // do not keep a huge buffer for one huge event
	}
	if ev.Type == event.Progress {
		rs.m.progress.Inc()
	} else {
		rs.m.events.Inc()
	}
	return nil
}

func (p *Publisher) failed(rs *rangeState, ev *event.Event, err error) {
	rs.m.errors.Inc()
	if now := p.cfg.Now(); now.Sub(rs.errLogged) >= time.Second || errors.Is(err, ErrTooLarge) {
		rs.errLogged = now
		p.log.Warn("cannot publish", "range", ev.Range, "revision", ev.Revision, "err", err)
	}
}

// Seen records that rangeID is complete up to rev, and answers a gateway
// waiting for the range's progress through rev.
func (p *Publisher) Seen(rangeID string, rev int64) {
	rs := p.rangeState(rangeID)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.seen = max(rs.seen, rev)
	if rs.wanted != 0 && rs.seen >= rs.wanted {
		rs.wanted = 0
		p.publishProgress(rs, p.cfg.Now())
	}
}

// answerWithin is how long a published message that covers a requested
// revision answers a request for it: the requests of several gateways
// for one event of another range come within a moment and get one
// answer, while a gateway that asks again later (its answer was lost)
// gets a new one. Gateways ask again after a longer pause.
const answerWithin = 5 * time.Millisecond

// Request asks for progress of rangeID through rev, on behalf of a
// gateway whose merged watch holds an event of another range at rev. The
// range's primary publishes its progress at once when it has seen rev,
// else asks its reflector for an etcd progress notification and answers
// when Seen (or an event) reaches rev. Other nodes ignore it.
func (p *Publisher) Request(rangeID string, rev int64) {
	p.mu.Lock()
	rs, ok := p.ranges[rangeID]
	p.mu.Unlock()
	if !ok {
		return // not reflected here
	}
	rs.mu.Lock()
	if rs.quiet {
		rs.mu.Unlock()
		return // the primary answers
	}
	rs.m.requests.Inc()
	now := p.cfg.Now()
	if rs.seen >= rev {
		if rs.sent < rev || now.Sub(rs.sentAt) >= answerWithin {
			p.publishProgress(rs, now)
		}
		rs.mu.Unlock()
		return
	}
	if rev > rs.wanted {
		rs.wanted, rs.wantedAt = rev, now
	}
	rs.mu.Unlock()
	if p.cfg.AskProgress != nil {
		p.cfg.AskProgress(rangeID)
	}
}

// Restart records that rangeID relisted at revision from: the chain of
// events starts there, and progress points at it until the next event.
func (p *Publisher) Restart(rangeID string, from int64) {
	rs := p.rangeState(rangeID)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.lastEvent = from
	rs.lastProgress = 0
}

// requestBuffer bounds the progress requests waiting to be handled; NATS
// drops what does not fit, and the gateway asks again.
const requestBuffer = 4096

// Run publishes progress, on idle ranges and when gateways ask for it,
// until ctx is done; it returns nil then.
func (p *Publisher) Run(ctx context.Context) error {
	reqs := make(chan *nats.Msg, requestBuffer)
	sub, err := p.cfg.NATS.ChanSubscribe(event.ProgressRequestSubjects, reqs)
	if err != nil {
		return fmt.Errorf("cannot subscribe to progress requests: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	t := time.NewTicker(max(p.cfg.Interval/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := p.cfg.NATS.FlushTimeout(time.Second); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				p.log.Debug("cannot flush NATS", "err", err)
			}
			return nil
		case m := <-reqs:
			id := event.RangeOfProgressRequest(m.Subject)
			rev, err := event.ParseProgressRequest(m.Data)
			if id == "" || err != nil {
				p.log.Debug("dropping malformed progress request", "subject", m.Subject, "err", err)
				continue
			}
			p.Request(id, rev)
		case <-t.C:
			p.ProgressIdle()
		}
	}
}

// heartbeatIntervals is how many intervals an idle range's primary waits
// before repeating its progress when nothing changed.
const heartbeatIntervals = 5

// ProgressIdle publishes progress for each range idle for Interval whose
// seen revision moved past its last event and last progress.
func (p *Publisher) ProgressIdle() {
	p.mu.Lock()
	all := make([]*rangeState, 0, len(p.ranges))
	for _, rs := range p.ranges {
		all = append(all, rs)
	}
	p.mu.Unlock()
	now := p.cfg.Now()
	for _, rs := range all {
		p.progress(rs, now)
	}
}

func (p *Publisher) progress(rs *rangeState, now time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.wanted != 0 && now.Sub(rs.wantedAt) >= p.cfg.Interval {
		// Not reached for an interval (a request for a revision etcd has
		// not made, or a lost etcd progress notification): forget it, so
		// that it does not hold back the answers to later requests. A
		// gateway still waiting asks again.
		rs.wanted = 0
	}
	// Progress goes out when the range has been idle for an interval and
	// etcd moved past its last event; and, so that a lost last message is
	// always noticed, as a heartbeat every heartbeatIntervals intervals,
	// and at once after a promotion.
	beat := now.Sub(rs.lastBeat) >= heartbeatIntervals*p.cfg.Interval
	moved := rs.seen > rs.lastEvent && rs.seen > rs.lastProgress
	if rs.quiet || (!rs.announce && (now.Sub(rs.lastActivity) < p.cfg.Interval || !(moved || beat))) {
		return
	}
	rs.lastBeat, rs.announce = now, false
	p.publishProgress(rs, now)
}

// publishProgress publishes where rs stands: complete up to its seen
// revision, its last event at lastEvent. Callers hold rs.mu.
func (p *Publisher) publishProgress(rs *rangeState, now time.Time) {
	if rs.quiet {
		return
	}
	ev := event.Event{Type: event.Progress, Range: rs.id, Revision: max(rs.seen, rs.lastEvent), PrevRangeRevision: rs.lastEvent}
	rs.lastActivity = now
	if err := p.publish(rs, event.ProgressSubject(rs.id), &ev); err != nil {
		p.failed(rs, &ev, err)
		return
	}
	rs.lastProgress = rs.seen
	rs.markSent(ev.Revision, now)
}
