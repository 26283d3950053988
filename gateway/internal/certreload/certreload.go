// Package certreload serves a TLS certificate from files that may be
// replaced while the server runs: it polls the files' modification time
// and size and, when either changes, loads the pair again. Handshakes
// get the current pair through tls.Config.GetCertificate; a pair that
// does not load (half-written, mismatched) is logged and the previous one
// kept.
package certreload

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// Config names the files.
type Config struct {
	CertFile, KeyFile string
	// Interval is how often the files are checked. Default 5s.
	Interval time.Duration
	Logger   *slog.Logger
}

// Reloader holds the current certificate.
type Reloader struct {
	cfg  Config
	cert atomic.Pointer[tls.Certificate]
	seen stamp
}

// stamp is what tells a file changed.
type stamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

// New loads the pair once; Run keeps it current.
func New(cfg Config) (*Reloader, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" || cfg.Logger == nil {
		return nil, errors.New("cannot make certificate reloader: CertFile, KeyFile and Logger are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	r := &Reloader{cfg: cfg}
	st, err := r.stat()
	if err != nil {
		return nil, err
	}
	if err := r.load(); err != nil {
		return nil, err
	}
	r.seen = st
	return r, nil
}

func (r *Reloader) stat() (stamp, error) {
	c, err := os.Stat(r.cfg.CertFile)
	if err != nil {
		return stamp{}, fmt.Errorf("cannot read serving certificate: %w", err)
	}
	k, err := os.Stat(r.cfg.KeyFile)
	if err != nil {
		return stamp{}, fmt.Errorf("cannot read serving key: %w", err)
	}
	return stamp{certMod: c.ModTime(), keyMod: k.ModTime(), certSize: c.Size(), keySize: k.Size()}, nil
}

func (r *Reloader) load() error {
	c, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("cannot load serving certificate: %w", err)
	}
	r.cert.Store(&c)
	return nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// Check loads the pair again if a file changed since the last load.
func (r *Reloader) Check() {
	st, err := r.stat()
	if err != nil {
		r.cfg.Logger.Warn("cannot check serving certificate", "err", err)
		return
	}
	if st == r.seen {
		return
	}
	if err := r.load(); err != nil {
		// Maybe half-written: try again at the next tick.
		r.cfg.Logger.Warn("serving certificate changed but does not load; keeping the previous one", "err", err)
		return
	}
	r.seen = st
	r.cfg.Logger.Info("serving certificate reloaded", "cert", r.cfg.CertFile)
}

// Run checks the files every Interval until ctx ends.
func (r *Reloader) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Check()
		}
	}
}
