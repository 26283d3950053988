// Package follow runs a leader's controller pass again whenever what it
// reads changes: a pass reads the stored objects at one etcd revision,
// then etcd watches on key prefixes from the next revision wake the
// next pass, one pass for each batch of changes. A pass that fails, or a
// watch that ends, starts everything again after a backoff. Optional
// triggers: a channel (the registry's Changed), a resync period, and a
// sooner pass the previous pass asked for (a retry).
package follow

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Prefix is a key prefix whose changes wake the next pass.
type Prefix struct {
	// Key is the prefix watched.
	Key string
	// KeysOnly watches without values (the pass reads what it needs).
	KeysOnly bool
	// Match, when set, says whether a change of key wakes a pass; it is
	// called between passes, never during one.
	Match func(key string) bool
}

// Pass reads and acts at one revision, returned. A positive next asks
// for another pass within next even if nothing changes.
type Pass func(ctx context.Context) (rev int64, next time.Duration, err error)

// Config is what Run follows.
type Config struct {
	// Name names the controller in logs and errors.
	Name string
	Etcd clientv3.Watcher
	// Prefixes are watched from each pass's revision after the first.
	Prefixes []Prefix
	// Changed, when set, returns a channel closed at the next change of
	// something else the pass reads (registry.Registry.Changed).
	Changed func() <-chan struct{}
	// Resync, when positive, runs a pass at least this often.
	Resync time.Duration
	// Backoff is the pause after a failed pass or watch; default 1s.
	Backoff time.Duration
	Logger  *slog.Logger
}

// Run runs pass, then again on each change, until ctx ends.
func Run(ctx context.Context, cfg Config, pass Pass) {
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	for ctx.Err() == nil {
		err := follow(ctx, cfg, pass)
		if ctx.Err() != nil {
			return
		}
		cfg.Logger.Warn(cfg.Name+" pass failed, starting again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(cfg.Backoff):
		}
	}
}

// follow passes until ctx ends or a pass or watch fails.
func follow(ctx context.Context, cfg Config, pass Pass) error {
	var changed <-chan struct{}
	if cfg.Changed != nil {
		changed = cfg.Changed()
	}
	rev, next, err := pass(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	watches := make([]clientv3.WatchChan, len(cfg.Prefixes))
	for i, p := range cfg.Prefixes {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(rev + 1)}
		if p.KeysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		watches[i] = cfg.Etcd.Watch(wctx, p.Key, opts...)
	}
	// One select over a changing number of channels: ctx, changed, the
	// timer, then the watches.
	cases := make([]reflect.SelectCase, 3+len(watches))
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	for i, w := range watches {
		cases[3+i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)}
	}
	for {
		timer := timerFor(cfg.Resync, next)
		cases[1] = recvOrNever(changed)
		cases[2] = reflect.SelectCase{Dir: reflect.SelectRecv}
		if timer != nil {
			cases[2].Chan = reflect.ValueOf(timer.C)
		}
		wake := false
		for !wake {
			chosen, v, ok := reflect.Select(cases)
			switch chosen {
			case 0:
				stop(timer)
				return ctx.Err()
			case 1:
				changed = cfg.Changed()
				wake = true
			case 2:
				wake = true
			default:
				p := cfg.Prefixes[chosen-3]
				if !ok {
					stop(timer)
					return fmt.Errorf("cannot watch %s: the watch ended", p.Key)
				}
				resp := v.Interface().(clientv3.WatchResponse)
				if err := resp.Err(); err != nil {
					stop(timer)
					return fmt.Errorf("cannot watch %s: %w", p.Key, err)
				}
				wake = matches(p, resp.Events)
			}
		}
		stop(timer)
		// Take what else is waiting, then one pass for all of it.
		if err := drain(cfg.Prefixes, watches); err != nil {
			return err
		}
		// The watches go on from where they are.
		if _, next, err = pass(ctx); err != nil {
			return err
		}
	}
}

// timerFor is the timer of the next pass without a change, nil when
// there is none.
func timerFor(resync, next time.Duration) *time.Timer {
	d := delay(resync, next)
	if d <= 0 {
		return nil
	}
	return time.NewTimer(d)
}

// delay is the time to the next pass without a change: the sooner of
// resync and next, 0 (none) when neither is set.
func delay(resync, next time.Duration) time.Duration {
	d := max(resync, 0)
	if next > 0 && (d == 0 || next < d) {
		d = next
	}
	return d
}

func stop(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// recvOrNever receives from ch; a nil ch never wakes the select.
func recvOrNever(ch <-chan struct{}) reflect.SelectCase {
	c := reflect.SelectCase{Dir: reflect.SelectRecv}
	if ch != nil {
		c.Chan = reflect.ValueOf(ch)
	}
	return c
}

func matches(p Prefix, events []*clientv3.Event) bool {
	if p.Match == nil {
		return len(events) > 0
	}
	for _, e := range events {
		if p.Match(string(e.Kv.Key)) {
			return true
		}
	}
	return false
}

// drain takes the responses already waiting on the watches; an ended or
// failed watch fails the follow.
func drain(prefixes []Prefix, watches []clientv3.WatchChan) error {
	for i, w := range watches {
		for drained := false; !drained; {
			select {
			case resp, ok := <-w:
				if !ok {
					return fmt.Errorf("cannot watch %s: the watch ended", prefixes[i].Key)
				}
				if err := resp.Err(); err != nil {
					return fmt.Errorf("cannot watch %s: %w", prefixes[i].Key, err)
				}
			default:
				drained = true
			}
		}
	}
	return nil
}
