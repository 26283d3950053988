// Package backend opens the storage stack every kgate role runs on, in
// one place: the registry of served resources, the codec of etcd values,
// the range table, the store, the revision oracle, the Service IP
// allocator and the CRD follower (custom resources into the registry), in
// that order, and closes them in reverse; and, when asked to, the etcd
// compactor.
package backend

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/compact"
	"github.com/kgate/kgate/storage/crds"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/ipalloc"
	"github.com/kgate/kgate/storage/portalloc"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/revision"
)

// DefaultMediaType is how built-in objects are stored unless told
// otherwise: protobuf, as kube-apiserver stores them.
const DefaultMediaType = storage.MediaTypeProtobuf

// ErrConfig is wrapped by the errors of an invalid Config.
var ErrConfig = errors.New("backend: invalid config")

// Config configures a Backend.
type Config struct {
	// Etcd is the client everything talks to etcd through; required. The
	// caller owns it: Close leaves it open.
	Etcd *clientv3.Client
	// Splits split the ranges further (ranges.ParseSplits); the zero
	// value is one range per resource. Every gateway and cache node of a
	// cluster must use the same.
	Splits ranges.Config
	// ServiceCIDR is the range Service cluster IPs come from. Default
	// ipalloc.DefaultCIDR.
	ServiceCIDR string
	// NodePortRange is the range Service node ports come from
	// (--service-node-port-range). Default portalloc.DefaultRange.
	NodePortRange string
	// Registry is the set of served resources; default
	// registry.NewBuiltin().
	Registry *registry.Registry
	// CompactionInterval, when positive, runs an etcd compactor
	// (storage/compact) on this interval, kube-apiserver's
	// --etcd-compaction-interval: every member runs one, and the cluster
	// compacts once per interval. Zero: off.
	CompactionInterval time.Duration
	// EventTTL is storage.Config.EventTTL (kube-apiserver's --event-ttl);
	// zero keeps events until deleted.
	EventTTL time.Duration
	// MediaType is storage.Config.MediaType (--storage-media-type).
	MediaType string
	// Transformers are storage.Config.Transformers
	// (--encryption-provider-config); nil stores values as they are.
	Transformers *encryption.Transformers
	// Metrics, when set, registers the store's etcd request metrics
	// (storage.Config.Metrics).
	Metrics prometheus.Registerer
	// Logger is required.
	Logger *slog.Logger
}

// Backend is the storage stack.
type Backend struct {
	Registry *registry.Registry
	Codec    *codec.Codec
	// Transformers are Config.Transformers: cache nodes decrypt with them.
	Transformers *encryption.Transformers
	Ranges       *ranges.Follower // follows Registry as it changes
	Store        *storage.Store
	Revisions    *revision.Oracle
	ServiceIPs   *ipalloc.Allocator
	NodePorts    *portalloc.Allocator
	// Etcd is Config.Etcd, for what works on etcd below the store (the
	// CRD controller's watch and cleanup). Not closed by Close.
	Etcd *clientv3.Client
	// CRDs keeps Registry serving the custom resources of the
	// established CRDs in etcd; Open returns once it has listed them.
	CRDs *crds.Follower
	// Compactor is nil unless Config.CompactionInterval is positive.
	Compactor *compact.Compactor

	log           *slog.Logger
	stopCompactor context.CancelFunc // nil without a compactor
	compactorDone chan struct{}      // closed when the compactor's Run returned
}

// Open builds the stack in order, logging how long each step took. A
// failed step closes what the earlier ones opened.
func Open(cfg Config) (_ *Backend, err error) {
	if cfg.Etcd == nil || cfg.Logger == nil {
		return nil, fmt.Errorf("%w: Etcd and Logger are required", ErrConfig)
	}
	b := &Backend{Etcd: cfg.Etcd, Transformers: cfg.Transformers, log: cfg.Logger}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	steps := []struct {
		name string
		open func() error
	}{
		{"registry", func() (err error) {
			if b.Registry = cfg.Registry; b.Registry == nil {
				b.Registry, err = registry.NewBuiltin()
			}
			return err
		}},
		{"codec", func() error { b.Codec = codec.New(b.Registry.Scheme()); return nil }},
		{"ranges", func() (err error) { b.Ranges, err = ranges.Follow(b.Registry, cfg.Splits); return err }},
		{"store", func() (err error) {
			b.Store, err = storage.New(storage.Config{
				Client: cfg.Etcd, Registry: b.Registry, Codec: b.Codec, EventTTL: cfg.EventTTL, MediaType: cfg.MediaType, Transformers: cfg.Transformers,
				Metrics: cfg.Metrics, Logger: cfg.Logger.With("component", "storage"),
			})
			return err
		}},
		{"revisions", func() (err error) {
			b.Revisions, err = revision.New(revision.Config{KV: storage.RequireLeader(cfg.Etcd), Logger: cfg.Logger.With("component", "revision")})
			return err
		}},
		{"service IPs", func() (err error) {
			b.ServiceIPs, err = ipalloc.New(ipalloc.Config{Client: cfg.Etcd, CIDR: cfg.ServiceCIDR, Transformers: cfg.Transformers, Logger: cfg.Logger.With("component", "ipalloc")})
			return err
		}},
		{"node ports", func() (err error) {
			b.NodePorts, err = portalloc.New(portalloc.Config{Client: cfg.Etcd, Range: cfg.NodePortRange, Transformers: cfg.Transformers, Logger: cfg.Logger.With("component", "portalloc")})
			return err
		}},
		{"CRDs", func() (err error) {
			b.CRDs, err = crds.Start(crds.Config{Etcd: cfg.Etcd, Registry: b.Registry, Transformers: cfg.Transformers, Logger: cfg.Logger.With("component", "crds")})
			return err
		}},
		{"compactor", func() (err error) {
			if cfg.CompactionInterval <= 0 {
				return nil
			}
			if b.Compactor, err = compact.New(compact.Config{Client: cfg.Etcd, Interval: cfg.CompactionInterval, Logger: cfg.Logger.With("component", "compact")}); err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(context.Background())
			b.stopCompactor, b.compactorDone = cancel, make(chan struct{})
			go func() {
				defer close(b.compactorDone)
				_ = b.Compactor.Run(ctx) // returns nil when stopped; failed rounds are logged
			}()
			return nil
		}},
	}
	for _, s := range steps {
		t0 := time.Now()
		if err := s.open(); err != nil {
			return nil, fmt.Errorf("cannot open storage %s: %w", s.name, err)
		}
		cfg.Logger.Debug("storage opened", "step", s.name, "took", time.Since(t0))
	}
	return b, nil
}

// Close stops what Open started, in reverse order: the compactor, the
// CRD follower and the revision oracle (the others hold nothing to
// stop). It may be called more than once.
func (b *Backend) Close() {
	if b.stopCompactor != nil {
		b.stopCompactor()
		<-b.compactorDone
		b.stopCompactor = nil
	}
	if b.CRDs != nil {
		t0 := time.Now()
		b.CRDs.Close()
		b.CRDs = nil
		b.log.Debug("storage closed", "step", "CRDs", "took", time.Since(t0))
	}
	if b.Revisions != nil {
		t0 := time.Now()
		b.Revisions.Close()
		b.log.Debug("storage closed", "step", "revisions", "took", time.Since(t0))
	}
}
