package directory

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// PublisherConfig configures a cache node's status publisher.
type PublisherConfig struct {
	NATS     *nats.Conn // required
	Node     string     // required: the node's cluster name
	ReadAddr string     // required: the node's read API, host:port
	// Epoch is the node's start time (Unix ns), the same as its cluster
	// metadata's; default the time NewPublisher is called.
	Epoch int64
	// Interval between announcements; default 1s. A change in the set of
	// ranges, their readiness or primaries is announced sooner: within
	// min(Interval/5, 200ms), at once after Notify; announcements are at
	// least min(Interval/10, 100ms) apart.
	Interval time.Duration
	// Source returns the node's ranges now, in a new slice the publisher
	// may reorder; required. It is called every min(Interval/5, 200ms)
	// and must be cheap and safe to call concurrently with the node's work.
	Source func() []RangeStatus
	// Logger; nil discards.
	Logger *slog.Logger
}

// Publisher announces a cache node's status.
type Publisher struct {
	cfg     PublisherConfig
	subject string
	log     *slog.Logger
	notify  chan struct{}
}

// NewPublisher validates cfg.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.NATS == nil || cfg.Node == "" || cfg.ReadAddr == "" || cfg.Source == nil {
		return nil, errors.New("cannot make status publisher: NATS, Node, ReadAddr and Source are required")
	}
	if cfg.Interval < 0 || cfg.Epoch < 0 {
		return nil, errors.New("cannot make status publisher: negative Interval or Epoch")
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Epoch == 0 {
		cfg.Epoch = time.Now().UnixNano()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Publisher{
		cfg:     cfg,
		subject: Subject(cfg.Node),
		log:     cfg.Logger.With("component", "status-publisher"),
		notify:  make(chan struct{}, 1),
	}, nil
}

// Notify asks for an announcement now: a range became ready, was dropped,
// or changed primary. It never blocks.
func (p *Publisher) Notify() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Run announces until ctx ends, then announces that the node is gone so
// that directories forget it at once. It returns nil then.
func (p *Publisher) Run(ctx context.Context) error {
	probe, err := p.cfg.NATS.Subscribe(ProbeSubject, func(*nats.Msg) { p.Notify() })
	if err != nil {
		return fmt.Errorf("cannot subscribe to status probes: %w", err)
	}
	defer func() { _ = probe.Unsubscribe() }()

	// Source is checked for changes every check; announcements are at
	// least minGap apart, whatever asks for them.
	check := min(max(p.cfg.Interval/5, 10*time.Millisecond), 200*time.Millisecond)
	minGap := min(p.cfg.Interval/10, 100*time.Millisecond)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var (
		last    time.Time // of the last announcement
		lastKey uint64    // shape of the last announcement's ranges
		pending bool      // a change or Notify awaits an announcement
	)
	for {
		now := time.Now()
		rs := p.cfg.Source()
		slices.SortFunc(rs, func(a, b RangeStatus) int { return strings.Compare(a.ID, b.ID) })
		key := shape(rs)
		pending = pending || key != lastKey
		since := now.Sub(last)
		if last.IsZero() || since >= p.cfg.Interval || pending && since >= minGap {
			p.publish(false, rs)
			last, lastKey, pending, since = now, key, false, 0
		}
		wait := check
		if pending {
			wait = min(wait, minGap-since)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			p.publish(true, nil)
			if err := p.cfg.NATS.FlushTimeout(time.Second); err != nil {
				p.log.Debug("cannot flush the last status", "err", err)
			}
			return nil
		case <-p.notify:
			pending = true
		case <-timer.C:
		}
	}
}

func (p *Publisher) publish(gone bool, rs []RangeStatus) {
	b, err := encodeStatus(p.cfg.Node, p.cfg.ReadAddr, p.cfg.Epoch, gone, rs)
	if err == nil {
		err = p.cfg.NATS.Publish(p.subject, b)
	}
	if err != nil {
		p.log.Debug("cannot publish status", "subject", p.subject, "err", err)
	}
}

// shape hashes what makes a status change worth announcing at once: the
// ranges, their readiness and primaries (not the revisions seen, which
// move all the time).
func shape(rs []RangeStatus) uint64 {
	h := fnv.New64a()
	for _, r := range rs {
		flags := byte(0)
		if r.Ready {
			flags |= 1
		}
		if r.Primary {
			flags |= 2
		}
		h.Write([]byte(r.ID))
		h.Write([]byte{0, flags})
	}
	return h.Sum64()
}
