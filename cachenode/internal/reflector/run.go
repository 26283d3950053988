package reflector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/cachenode/internal/window"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// errRelist ends a watch that must start over with a list.
var errRelist = errors.New("reflector: relist needed")

// errStalled ends a watch that stopped answering: it starts again from
// the seen revision.
var errStalled = errors.New("reflector: watch stalled")

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// Run lists and watches the range until ctx is done. It returns nil then.
func (r *Reflector) Run(ctx context.Context) error {
	defer func() {
		// The range is no longer served here: its window leaves the
		// node's budget (readers holding the state may still read it).
		if st := r.state.Load(); st != nil {
			st.win.Release()
		}
	}()
	checker := make(chan struct{})
	go func() {
		defer close(checker)
		r.checkConsistency(ctx)
	}()
	defer func() { <-checker }()
	backoff := minBackoff
	for {
		rev, err := r.list(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.log.Warn("cannot list range", "err", err, "retry", backoff)
			if !sleep(ctx, backoff) {
				return nil
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		if r.afterList != nil {
			r.afterList(rev)
		}
		err = r.watch(ctx, rev)
		if ctx.Err() != nil {
			return nil
		}
		r.m.relists.Inc()
		r.log.Info("relisting range", "reason", err)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// list reads the whole range at one revision, installs a new store and
// window, and returns the revision.
func (r *Reflector) list(ctx context.Context) (int64, error) {
	start := time.Now()
	var (
		rev     int64
		entries []*store.Entry
		from    = r.rng.Start
	)
	skipped := map[string]int64{}
	bad := func(x kv, err error) {
		r.m.decodeErrors.Inc()
		r.log.Warn("skipping undecodable object", "key", x.key, "err", err)
		skipped[x.key] = x.rev
	}
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(r.rng.End), clientv3.WithLimit(r.cfg.PageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := r.cfg.Etcd.Get(ctx, from, opts...)
		if err != nil {
			return 0, fmt.Errorf("cannot list range %s at %d: %w", r.rng.ID, rev, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		// A long list hears from etcd at every page: it is no stall.
		r.heard.Store(time.Now().UnixNano())
		kvs := make([]kv, len(resp.Kvs))
		for i, x := range resp.Kvs {
			kvs[i] = kv{key: string(x.Key), value: x.Value, rev: x.ModRevision}
		}
		entries = append(entries, r.dec.entries(kvs, bad)...)
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	win, err := window.New(r.cfg.Window, rev)
	if err != nil {
		return 0, err
	}
	st := &state{store: store.Load(entries, rev), win: win, skipped: skipped}
	// The chain of events starts at the list revision: the window is
	// complete from there, so a subscriber at or after it has no gap.
	r.lastRev, r.listRev = rev, rev
	r.subject = map[string]int64{}
	r.cfg.Sink.Restart(r.rng.ID, rev)
	if old := r.state.Swap(st); old != nil {
		old.win.Release()
	}
	st.setBase()
	r.inconsistent.Store(false)
	r.heard.Store(time.Now().UnixNano())
	r.advance(rev)
	r.cfg.Sink.Seen(r.rng.ID, rev)
	r.updateGauges(st)
	r.log.Debug("listed range", "revision", rev, "objects", len(entries), "took", time.Since(start))
	return rev, nil
}

// watchContext gives the range's watch its own gRPC stream (clientv3
// shares one stream between watches whose contexts carry the same
// metadata): a progress request then reaches this watch only and is not
// held back by another range catching up.
func (r *Reflector) watchContext(ctx context.Context) context.Context {
	return clientv3.WithRequireLeader(metadata.AppendToOutgoingContext(ctx, "kgate-range", r.rng.ID))
}

// watch follows the range from rev+1 until ctx is done or a relist is
// needed. Broken watches resume after the last revision seen.
func (r *Reflector) watch(ctx context.Context, rev int64) error {
	st := r.state.Load()
	ticker := time.NewTicker(r.cfg.ProgressInterval)
	defer ticker.Stop()
	backoff := minBackoff
	for {
		wctx, cancel := context.WithCancel(r.watchContext(ctx))
		from := r.Seen() + 1
		wch := r.cfg.Etcd.Watch(wctx, r.rng.Start, clientv3.WithRange(r.rng.End), clientv3.WithRev(from),
			clientv3.WithPrevKV(), clientv3.WithProgressNotify())
		err := r.follow(wctx, st, wch, ticker)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errRelist) {
			return err
		}
		r.log.Warn("watch broke, resuming", "from", r.Seen()+1, "err", err, "retry", backoff)
		if !sleep(ctx, backoff) {
			return nil
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// follow consumes one watch channel.
func (r *Reflector) follow(ctx context.Context, st *state, wch clientv3.WatchChan, ticker *time.Ticker) error {
	lastEvent := time.Now()
	// This watch is given StallAfter to answer, whatever the last one did.
	since := lastEvent
	for {
		select {
		case resp, ok := <-wch:
			if !ok {
				return errors.New("watch channel closed")
			}
			since = time.Now()
			r.heard.Store(since.UnixNano())
			if resp.CompactRevision != 0 {
				return fmt.Errorf("%w: watch compacted at %d", errRelist, resp.CompactRevision)
			}
			if err := resp.Err(); err != nil {
				if errors.Is(err, rpctypes.ErrCompacted) {
					return fmt.Errorf("%w: %w", errRelist, err)
				}
				return err
			}
			if resp.IsProgressNotify() {
				r.progressTo(st, resp.Header.Revision)
				continue
			}
			if len(resp.Events) > 0 {
				lastEvent = time.Now()
				r.apply(st, resp.Events)
			}
			r.m.lag.Set(float64(max(0, resp.Header.Revision-r.Seen())))
		case <-r.progress:
			r.askProgress(ctx)
		case <-r.relist:
			return fmt.Errorf("%w: the cache differs from etcd", errRelist)
		case <-ticker.C:
			st.win.Expire()
			r.updateGauges(st)
			if time.Since(since) > r.cfg.StallAfter/2 && r.current(ctx) {
				since = time.Now()
				r.heard.Store(since.UnixNano())
			}
			if quiet := time.Since(since); quiet > r.cfg.StallAfter {
				r.m.stalls.Inc()
				return fmt.Errorf("%w: nothing from etcd for %s at revision %d", errStalled, quiet.Round(time.Millisecond), r.Seen())
			}
			if time.Since(lastEvent) >= r.cfg.ProgressInterval {
				r.askProgress(ctx)
			}
		}
	}
}

// current reports whether etcd's revision is still the seen one. etcd
// answers no progress request while its revision is below the watch's
// start (nothing was written anywhere since): such a quiet watch is not
// stalled.
func (r *Reflector) current(ctx context.Context) bool {
	// A slow answer is an answer: the probe is given at least 5s.
	ctx, cancel := context.WithTimeout(ctx, max(r.cfg.StallAfter/2, 5*time.Second))
	defer cancel()
	resp, err := r.cfg.Etcd.Get(ctx, r.rng.Start, clientv3.WithCountOnly())
	return err == nil && resp.Header.Revision <= r.Seen()
}

func (r *Reflector) askProgress(ctx context.Context) {
	if err := r.cfg.Etcd.RequestProgress(ctx); err != nil && ctx.Err() == nil {
		r.log.Debug("cannot request watch progress", "err", err)
	}
}

func (r *Reflector) progressTo(st *state, rev int64) {
	if rev <= r.Seen() {
		return
	}
	st.store.Advance(rev)
	st.win.Advance(rev)
	r.advance(rev)
	r.m.lag.Set(0)
	r.cfg.Sink.Seen(r.rng.ID, rev)
}

// apply turns etcd events into events of the range, in order. Events of
// one revision (one etcd transaction) are numbered with Index and Count so
// that subscribers can tell each of them apart and see when the revision
// is complete.
func (r *Reflector) apply(st *state, evs []*clientv3.Event) {
	var rev int64
	group := make([]converted, 0, 1)
	prevs := make([]*store.Entry, 0, 1)
	for i := 0; i < len(evs); {
		j := i
		for j < len(evs) && evs[j].Kv.ModRevision == evs[i].Kv.ModRevision {
			j++
		}
		// Convert the whole revision first: Count is the number of events
		// that will be published. Keys of one transaction are distinct, so
		// each conversion sees the store as before the transaction.
		group, prevs = group[:0], prevs[:0]
		for _, e := range evs[i:j] {
			ev, prev, err := r.convert(st, e)
			if err != nil {
				r.m.decodeErrors.Inc()
				r.log.Warn("skipping event", "key", string(e.Kv.Key), "revision", e.Kv.ModRevision, "err", err)
				continue
			}
			group = append(group, ev)
			prevs = append(prevs, prev)
		}
		for k := range group {
			ev := &group[k]
			rev = ev.Revision
			ev.Index, ev.Count = uint32(k), uint32(len(group))
			ev.PrevRangeRevision = r.lastRev
			ev.PrevSubjectRevision = r.subjectRev(ev.Namespace)
			if ev.Last() {
				r.lastRev = rev
			}
			r.subject[ev.Namespace] = rev
			// The window first: a snapshot at rev must find every event up
			// to rev in the window to rewind.
			st.win.Append(ev.Event, prevs[k])
			if ev.Type == event.Deleted {
				st.store.Delete(ev.Key, rev)
			} else {
				st.store.Put(ev.entry, rev)
			}
			r.m.events[ev.Type].Inc()
			r.cfg.Sink.Event(&ev.Event)
		}
		i = j
	}
	skipped := false
	if last := evs[len(evs)-1].Kv.ModRevision; last > rev {
		rev, skipped = last, true // skipped events still count as seen
	}
	if rev > 0 {
		st.store.Advance(rev)
		st.win.Advance(rev)
		r.advance(rev)
	}
	st.setBase()
	if skipped {
		// No event told the sink: a progress through rev is owed (and a
		// later etcd progress notification at rev would not tell it).
		r.cfg.Sink.Seen(r.rng.ID, rev)
	}
}

// subjectRev is the revision of the last event on ns's subject, or the
// list revision when there was none since: the chain starts there.
func (r *Reflector) subjectRev(ns string) int64 {
	if rev, ok := r.subject[ns]; ok {
		return rev
	}
	return r.listRev
}

// converted is an event and the store entry it installs.
type converted struct {
	event.Event
	entry *store.Entry
}

// convert builds the event of one etcd event and returns the entry the
// key had before it.
func (r *Reflector) convert(st *state, e *clientv3.Event) (converted, *store.Entry, error) {
	kv := e.Kv
	key := string(kv.Key)
	rev := kv.ModRevision
	prev, hadPrev := st.store.Get(key)
	if !hadPrev && e.PrevKv != nil {
		// The store always knows the previous state; prevKV is the
		// fallback should it not.
		p, err := r.dec.entry(key, e.PrevKv.Value, e.PrevKv.ModRevision)
		if err == nil {
			prev = p
		}
	}
	var c converted
	c.Range = r.rng.ID
	c.Revision = rev
	c.Key = key
	if e.Type == mvccpb.DELETE {
		if prev == nil {
			return c, nil, fmt.Errorf("no previous state of deleted key")
		}
		var (
			gone *store.Entry
			err  error
		)
		if e.PrevKv != nil {
			gone, err = r.dec.entry(key, e.PrevKv.Value, rev)
		} else {
			gone, err = r.dec.rewrite(prev, rev)
		}
		if err != nil {
			return c, nil, err
		}
		c.Type = event.Deleted
		c.Namespace, c.Name = gone.Namespace, gone.Name
		c.Object, c.Labels, c.Fields = gone.JSON, gone.Labels, gone.Fields
		c.PrevObject, c.PrevLabels, c.PrevFields = prev.JSON, prev.Labels, prev.Fields
		return c, prev, nil
	}
	cur, err := r.dec.entry(key, kv.Value, rev)
	if err != nil {
		return c, nil, err
	}
	c.entry = cur
	c.Namespace, c.Name = cur.Namespace, cur.Name
	c.Object, c.Labels, c.Fields = cur.JSON, cur.Labels, cur.Fields
	if kv.CreateRevision == kv.ModRevision {
		c.Type = event.Added
		if !hadPrev {
			prev = nil // a prevKV-only previous state is no state to rewind to
		}
		return c, prev, nil
	}
	c.Type = event.Modified
	if prev != nil {
		c.PrevObject, c.PrevLabels, c.PrevFields = prev.JSON, prev.Labels, prev.Fields
	}
	return c, prev, nil
}

func (r *Reflector) updateGauges(st *state) {
	n, b := st.store.Stats()
	r.m.objects.Set(float64(n))
	r.m.bytes.Set(float64(b))
	n, b = st.win.Stats()
	r.m.windowEvents.Set(float64(n))
	r.m.windowBytes.Set(float64(b))
}
