package directory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Directory.
type Config struct {
	NATS *nats.Conn // required
	// Expire drops a node not heard from for this long; default 3s, three
	// intervals of a default Publisher. Keep it at least twice the
	// publishers' Interval. While the directory's own NATS link does not
	// answer a ping, no node is dropped, and the nodes have Expire from
	// the link's return to be heard again.
	Expire time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics registers kgate_directory_nodes and
	// kgate_directory_range_replicas{range}; nil registers none.
	Metrics prometheus.Registerer
}

// Directory is what the cache nodes announced, as heard on NATS.
type Directory struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	changes chan struct{}

	mu    sync.Mutex             // guards nodes, deafAt and the rebuilding of ready
	nodes map[string]*NodeStatus // by node name
	// deafAt is when the directory last found its own NATS link silent:
	// nodes are silent only counting from then.
	deafAt time.Time
	// ready holds, per range id, its ready replicas best first. Replaced
	// on every update, read without the lock; maps and slices handed out
	// are never modified.
	ready atomic.Pointer[map[string][]Replica]
}

// New validates cfg.
func New(cfg Config) (*Directory, error) {
	if cfg.NATS == nil {
		return nil, errors.New("cannot make directory: NATS is required")
	}
	if cfg.Expire < 0 {
		return nil, errors.New("cannot make directory: negative Expire")
	}
	if cfg.Expire == 0 {
		cfg.Expire = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("cannot make directory: %w", err)
	}
	d := &Directory{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "directory"),
		metrics: m,
		changes: make(chan struct{}, 1),
		nodes:   map[string]*NodeStatus{},
	}
	d.ready.Store(&map[string][]Replica{})
	return d, nil
}

// Run listens to the nodes' announcements and expires silent nodes until
// ctx ends; it returns nil then.
func (d *Directory) Run(ctx context.Context) error {
	msgs := make(chan *nats.Msg, 256)
	sub, err := d.cfg.NATS.ChanSubscribe(SubjectPrefix+"*", msgs)
	if err != nil {
		return fmt.Errorf("cannot subscribe to node status: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// Ask every publisher to announce itself now rather than within an
	// interval; the flush makes sure the subscription is in place first.
	if err := d.cfg.NATS.FlushTimeout(d.cfg.Expire); err != nil {
		d.log.Debug("cannot flush the status subscription", "err", err)
	}
	if err := d.cfg.NATS.Publish(ProbeSubject, nil); err != nil {
		d.log.Debug("cannot probe publishers", "err", err)
	}

	sweep := time.NewTicker(max(d.cfg.Expire/4, 10*time.Millisecond))
	defer sweep.Stop()
	deaf := false // the last sweep found the NATS link silent
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			d.receive(m.Subject, m.Data, time.Now())
		case now := <-sweep.C:
			if !d.overdue(now) {
				continue
			}
			// Before dropping a node not heard from, make sure the
			// silence is not the directory's own: a gateway cut off from
			// its NATS server hears no node, yet they still serve, and
			// dropping them all would refuse every read.
			if err := d.cfg.NATS.FlushTimeout(max(d.cfg.Expire/4, 10*time.Millisecond)); err != nil {
				d.deaf(now, err)
				deaf = true
				continue
			}
			if deaf {
				deaf = false
				d.log.Info("NATS link answers again")
				if err := d.cfg.NATS.Publish(ProbeSubject, nil); err != nil {
					d.log.Debug("cannot probe publishers", "err", err)
				}
			}
			d.expire(time.Now())
		}
	}
}

// deaf records that the NATS link did not answer at now.
func (d *Directory) deaf(now time.Time, err error) {
	d.metrics.deafSweep()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.deafAt.IsZero() || now.Sub(d.deafAt) > d.cfg.Expire {
		d.log.Warn("NATS link silent: keeping the nodes last heard", "err", err, "nodes", len(d.nodes))
	}
	d.deafAt = now
}

// silentLocked reports whether st has not been heard from for Expire at now,
// counting from the last time the directory's own link was found silent.
// The caller holds d.mu.
func (d *Directory) silentLocked(st *NodeStatus, now time.Time) bool {
	from := st.Heard
	if d.deafAt.After(from) {
		from = d.deafAt
	}
	return now.Sub(from) > d.cfg.Expire
}

// overdue reports whether a node is silent at now.
func (d *Directory) overdue(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, st := range d.nodes {
		if d.silentLocked(st, now) {
			return true
		}
	}
	return false
}

// receive applies one status message heard on subject. A message is
// ignored, and counted, unless it is well formed and names the node whose
// subject it came on: NATS permissions let only cache nodes publish
// there, so a node's status can come from no gateway and no outsider.
func (d *Directory) receive(subject string, b []byte, now time.Time) {
	w, err := decodeStatus(b)
	if err != nil {
		d.metrics.ignore("malformed")
		d.log.Debug("ignoring a status message", "err", err, "bytes", len(b))
		return
	}
	if subject != Subject(w.Node) {
		d.metrics.ignore("subject")
		d.log.Warn("ignoring a status message sent on another node's subject", "subject", subject, "node", w.Node)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.nodes[w.Node]
	if old != nil && w.Epoch < old.Epoch {
		// A late message from a previous life of the node.
		return
	}
	if w.Gone {
		if old != nil {
			delete(d.nodes, w.Node)
			d.changedLocked()
			d.log.Info("node gone", "node", w.Node)
		}
		return
	}
	st := &NodeStatus{Node: w.Node, ReadAddr: w.ReadAddr, Epoch: w.Epoch, Heard: now, Ranges: make([]RangeStatus, len(w.Ranges))}
	for i, r := range w.Ranges {
		st.Ranges[i] = RangeStatus(r)
	}
	d.nodes[w.Node] = st
	if old == nil {
		d.log.Info("node heard", "node", w.Node, "read_addr", w.ReadAddr, "ranges", len(st.Ranges))
	}
	if old == nil || !sameShape(old, st) {
		d.changedLocked()
	} else {
		d.rebuildLocked() // only revisions moved: reorder, no notification
	}
}

// expire drops the nodes not heard from for Expire.
func (d *Directory) expire(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := false
	for name, st := range d.nodes {
		if d.silentLocked(st, now) {
			delete(d.nodes, name)
			changed = true
			d.log.Info("node expired", "node", name, "silent_for", now.Sub(st.Heard))
		}
	}
	if changed {
		d.changedLocked()
	}
}

// sameShape reports whether a and b differ at most in revisions seen.
func sameShape(a, b *NodeStatus) bool {
	return a.ReadAddr == b.ReadAddr && a.Epoch == b.Epoch &&
		slices.EqualFunc(a.Ranges, b.Ranges, func(x, y RangeStatus) bool {
			return x.ID == y.ID && x.Ready == y.Ready && x.Primary == y.Primary
		})
}

// changedLocked rebuilds the index and notifies Changes.
func (d *Directory) changedLocked() {
	d.rebuildLocked()
	select {
	case d.changes <- struct{}{}:
	default:
	}
}

// rebuildLocked recomputes ready and the metrics.
func (d *Directory) rebuildLocked() {
	ready := make(map[string][]Replica, len(*d.ready.Load()))
	for _, st := range d.nodes {
		for _, r := range st.Ranges {
			if r.Ready {
				ready[r.ID] = append(ready[r.ID], Replica{Node: st.Node, ReadAddr: st.ReadAddr, Seen: r.Seen, Primary: r.Primary})
			}
		}
	}
	for _, rs := range ready {
		slices.SortFunc(rs, prefer)
	}
	d.ready.Store(&ready)
	d.metrics.set(len(d.nodes), ready)
}

// prefer orders replicas: primary first, then the most recent revision
// seen (least lag), then by name.
func prefer(a, b Replica) int {
	if a.Primary != b.Primary {
		if a.Primary {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(b.Seen, a.Seen); c != 0 {
		return c
	}
	return strings.Compare(a.Node, b.Node)
}

// Ready returns the replicas that can serve rangeID now, best first:
// primary first, then least lag. The slice is shared: do not modify it.
func (d *Directory) Ready(rangeID string) []Replica {
	return (*d.ready.Load())[rangeID]
}

// Nodes returns the nodes heard from, sorted by name.
func (d *Directory) Nodes() []NodeStatus {
	d.mu.Lock()
	out := make([]NodeStatus, 0, len(d.nodes))
	for _, name := range slices.Sorted(maps.Keys(d.nodes)) {
		st := *d.nodes[name]
		st.Ranges = slices.Clone(st.Ranges)
		out = append(out, st)
	}
	d.mu.Unlock()
	return out
}

// Changes receives a value after a node appeared, went away, or changed
// its ranges' readiness or primaries (not after mere progress).
// Notifications coalesce: read Ready or Nodes after each.
func (d *Directory) Changes() <-chan struct{} { return d.changes }
