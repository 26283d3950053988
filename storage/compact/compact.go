// Package compact compacts etcd's history once per cluster, as
// kube-apiserver does (k8s.io/apiserver/pkg/storage/etcd3/compact.go):
// every member runs a Compactor on the same interval, and a transaction on
// the shared key compact_rev_key lets only one of them compact per
// interval. The key and its meaning are upstream's, so kgate gateways and
// kube-apiserver on one etcd share the work too.
//
// Upstream's Compact cannot be imported here: its package links
// apiserver's server packages (and through them go-restful), which kgate
// does not. Round follows it step for step.
package compact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key is the etcd key whose version counts the compactions of the cluster
// and whose value is the revision last compacted (upstream's compactRevKey).
const Key = "compact_rev_key"

// DefaultInterval is kube-apiserver's --etcd-compaction-interval default.
const DefaultInterval = 5 * time.Minute

// Config configures a Compactor.
type Config struct {
	// Client talks to etcd; required.
	Client *clientv3.Client
	// Interval between compaction attempts; required (positive). History
	// older than about one interval is compacted.
	Interval time.Duration
	// Logger is required.
	Logger *slog.Logger
	// After returns a channel that fires after d; default time.After
	// (tests pass a fake clock's).
	After func(d time.Duration) <-chan time.Time
}

// Compactor compacts etcd every Interval, unless another member of the
// cluster did so first.
type Compactor struct {
	client   *clientv3.Client
	interval time.Duration
	logger   *slog.Logger
	after    func(time.Duration) <-chan time.Time

	mu        sync.Mutex // guards compacted
	compacted int64      // the highest revision known compacted
}

// New returns a Compactor; Run starts it.
func New(cfg Config) (*Compactor, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("cannot create compactor: Client is required")
	case cfg.Interval <= 0:
		return nil, fmt.Errorf("cannot create compactor: Interval must be positive, got %v", cfg.Interval)
	case cfg.Logger == nil:
		return nil, errors.New("cannot create compactor: Logger is required")
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	return &Compactor{client: cfg.Client, interval: cfg.Interval, logger: cfg.Logger, after: cfg.After}, nil
}

// Run tries a compaction round every interval until ctx ends; it returns
// nil then. A failed round is logged and retried at the next interval, as
// upstream's loop does.
func (c *Compactor) Run(ctx context.Context) error {
	var version, rev int64
	for {
		select {
		case <-c.after(c.interval):
		case <-ctx.Done():
			return nil
		}
		var compacted int64
		var err error
		version, rev, compacted, err = Round(ctx, c.client, version, rev)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.logger.Warn("cannot compact etcd", "err", err)
			continue
		}
		if compacted != 0 {
			c.mu.Lock()
			c.compacted = max(c.compacted, compacted)
			c.mu.Unlock()
			c.logger.Debug("compacted etcd", "revision", compacted)
		}
	}
}

// Compacted returns the highest revision this compactor knows compacted
// (by itself or, learnt from the key, by another member); 0 before any.
func (c *Compactor) Compacted() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compacted
}

// Round is one compaction attempt, upstream's Compact. expectVersion is
// the version of Key the caller saw last (0 at first) and rev the
// revision it saw then. If Key is still at expectVersion, Round bumps it
// (storing rev) and compacts etcd at rev, which is history older than one
// interval; otherwise another member compacted in the meantime, and Round
// only learns the key's version. It returns the version and the current
// revision to pass to the next Round, and the revision compacted (by this
// call, or the one the key names when another member won; 0 on the first
// round, which never compacts).
func Round(ctx context.Context, client *clientv3.Client, expectVersion, rev int64) (version, currentRev, compacted int64, err error) {
	resp, err := client.KV.Txn(ctx).If(
		clientv3.Compare(clientv3.Version(Key), "=", expectVersion),
	).Then(
		clientv3.OpPut(Key, strconv.FormatInt(rev, 10)), // bumps the key's version
	).Else(
		clientv3.OpGet(Key),
	).Commit()
	if err != nil {
		return expectVersion, rev, 0, fmt.Errorf("cannot claim the compaction: %w", err)
	}
	currentRev = resp.Header.Revision
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return 0, currentRev, 0, nil // the key was deleted: start counting again
		}
		kv := kvs[0]
		compacted, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return kv.Version, currentRev, 0, nil // as upstream: a foreign value is no error
		}
		return kv.Version, currentRev, compacted, nil
	}
	version = expectVersion + 1
	if rev == 0 {
		return version, currentRev, 0, nil // no compaction on the first round
	}
	if _, err := client.Compact(ctx, rev); err != nil {
		return version, currentRev, 0, fmt.Errorf("cannot compact etcd at revision %d: %w", rev, err)
	}
	return version, currentRev, rev, nil
}
