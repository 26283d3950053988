package watchcheck

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/embedded"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// stack is what Cluster and Multi run their cache nodes and gateways on,
// started and stopped the same way in both: embedded etcd and NATS, the
// storage stack (backend.Open: registry, ranges, store, revisions,
// service IPs) and the certificates.
type stack struct {
	// Truth reads etcd (Etcd, Codec, and Resource: the registry's
	// configmaps resource).
	Truth
	log      *slog.Logger
	etcdSrv  *embedded.Server
	Registry *registry.Registry
	Ranges   *ranges.Table
	Bundle   *pki.Bundle

	natsMu sync.Mutex // guards nats
	nats   *natsembed.Server

	storage *backend.Backend
	tls     *tls.Config
}

// defaults checks what Config and MultiConfig both require and fills in
// the defaults they share.
func defaults(dir string, logger *slog.Logger, bookmark, progress *time.Duration, window *cachenode.WindowConfig) error {
	if dir == "" || logger == nil {
		return errors.New("cannot start cluster: Dir and Logger are required")
	}
	if *bookmark == 0 {
		*bookmark = 300 * time.Millisecond
	}
	if *progress == 0 {
		*progress = 200 * time.Millisecond
	}
	if window.MaxAge == 0 {
		window.MaxAge = time.Hour
	}
	return nil
}

// startOrClose runs start and returns x once it succeeds; when it fails,
// it closes x, so that a failed start leaves nothing running.
func startOrClose[T interface{ Close() error }](ctx context.Context, log *slog.Logger, x T, start func(context.Context) error) (T, error) {
	if err := start(ctx); err != nil {
		if cerr := x.Close(); cerr != nil {
			log.Warn("cannot stop after a failed start", "err", cerr)
		}
		var none T
		return none, err
	}
	return x, nil
}

// startStores starts etcd in dir, connects to it, and starts NATS.
func (s *stack) startStores(ctx context.Context, dir string) (err error) {
	if s.etcdSrv, err = embedded.Start(ctx, embedded.Config{
		Dir: filepath.Join(dir, "etcd"), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
		ProgressNotifyInterval: 100 * time.Millisecond, UnsafeNoFsync: true, Logger: s.log.With("component", "etcd"),
	}); err != nil {
		return err
	}
	if s.Etcd, err = clientv3.New(clientv3.Config{Endpoints: s.etcdSrv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
		return fmt.Errorf("cannot connect to etcd: %w", err)
	}
	if s.nats, err = natsembed.Start(natsembed.Config{Logger: s.log.With("component", "nats")}); err != nil {
		return err
	}
	return nil
}

// openStorage opens the storage stack with the ranges splits makes, and
// finds the configmaps resource.
func (s *stack) openStorage(splits ranges.Config) (err error) {
	if s.storage, err = backend.Open(backend.Config{Etcd: s.Etcd, Splits: splits, Logger: s.log}); err != nil {
		return err
	}
	s.Registry, s.Codec, s.Ranges = s.storage.Registry, s.storage.Codec, s.storage.Ranges.Current()
	res, ok := s.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if !ok {
		return errors.New("cannot find configmaps in the registry")
	}
	s.Resource = res
	return nil
}

// prepareGateways makes the certificates for a gateway at addr and the
// serving TLS every gateway shares.
func (s *stack) prepareGateways(dir, addr string) (err error) {
	if s.Bundle, err = pki.Ensure(pki.Config{Dir: dir, ServerURL: "https://" + addr}); err != nil {
		return err
	}
	if s.tls, err = s.Bundle.ServingTLS(); err != nil {
		return err
	}
	return nil
}

// stopNATS stops the NATS server; clients keep trying to reconnect.
func (s *stack) stopNATS() error {
	s.natsMu.Lock()
	defer s.natsMu.Unlock()
	if s.nats == nil {
		return nil
	}
	err := s.nats.Close()
	s.nats = nil
	return err
}

// close stops what the stack started, after the cache nodes and
// gateways, and adds what fails to errs.
func (s *stack) close(errs []error) error {
	if s.storage != nil {
		s.storage.Close()
	}
	if err := s.stopNATS(); err != nil {
		errs = append(errs, err)
	}
	if s.Etcd != nil {
		s.Etcd.Close()
	}
	if s.etcdSrv != nil {
		if err := s.etcdSrv.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// goRun calls run in a goroutine and returns how to cancel it and where
// its error arrives.
func goRun(run func(context.Context) error) (context.CancelFunc, chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	return cancel, done
}

// waitReady waits until ready holds, polling. It fails when ctx ends
// first, or, with stopped set, when run (of goRun) returns first: then
// its error is put back on done for whoever stops it, and wrapped as
// what stopped before ready.
func waitReady(ctx context.Context, what string, ready func() bool, done chan error) (stopped bool, err error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !ready() {
		select {
		case err := <-done:
			done <- err
			return true, fmt.Errorf("%s stopped before ready: %w", what, err)
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
		}
	}
	return false, nil
}
