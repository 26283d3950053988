// Package natsembed runs a NATS server inside the process, for `kgate dev`
// and tests: one server, no cluster, no JetStream, max_payload raised so
// that an event carrying two large objects fits in one message. With Users
// it admits only them, each to the subjects of its role (natsauth); with
// TLS clients must speak TLS.
package natsembed

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"
)

// DefaultMaxPayload is 8 MiB: a 1.5 MiB object and its previous version,
// with room to spare. nats-server warns above 8 MB.
const DefaultMaxPayload = 8 << 20

// Config configures an embedded server.
type Config struct {
	// Host to listen on; default 127.0.0.1.
	Host string
	// Port to listen on; 0 picks a free one.
	Port int
	// MaxPayload is the largest message accepted; default
	// DefaultMaxPayload.
	MaxPayload int32
	// TLS, when set, requires TLS of every client (a server
	// certificate; client certificates are not asked for).
	TLS *tls.Config
	// Users, when set, are the only ones admitted (no anonymous
	// clients), each allowed only its subjects.
	Users []User
	// Logger receives the server's notices, warnings and errors; nil
	// discards them.
	Logger *slog.Logger
}

// User is an account of the server.
type User struct {
	Name, Password string
	// Publish and Subscribe are the subjects the user may use (NATS
	// wildcards); natsauth.For gives those of each role.
	Publish, Subscribe []string
}

// Server is a running NATS server.
type Server struct {
	srv *server.Server
	tls bool
}

// Start starts a server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port < 0 || cfg.MaxPayload < 0 {
		return nil, errors.New("cannot start NATS: negative Port or MaxPayload")
	}
	if cfg.Port == 0 {
		cfg.Port = server.RANDOM_PORT
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	opts := &server.Options{
		Host:       cfg.Host,
		Port:       cfg.Port,
		MaxPayload: cfg.MaxPayload,
		// The pending buffer per client must hold a few large messages.
		MaxPending: max(int64(cfg.MaxPayload)*8, 64<<20),
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		HTTPPort:   0,
	}
	if cfg.TLS != nil {
		// Generous: a loaded test machine handshakes slowly.
		opts.TLS, opts.TLSConfig, opts.TLSTimeout = true, cfg.TLS, 10
	}
	if cfg.TLS != nil || len(cfg.Users) > 0 {
		opts.AuthTimeout = 10
	}
	for _, u := range cfg.Users {
		if u.Name == "" || u.Password == "" {
			return nil, fmt.Errorf("cannot start NATS: user %q without a name or password", u.Name)
		}
		// The server keeps a bcrypt hash, not the password (it warns
		// otherwise); the cost only slows connecting, never the messages.
		hash, err := bcrypt.GenerateFromPassword([]byte(u.Password), bcrypt.MinCost)
		if err != nil {
			return nil, fmt.Errorf("cannot start NATS: cannot hash the password of %q: %w", u.Name, err)
		}
		opts.Users = append(opts.Users, &server.User{
			Username: u.Name, Password: string(hash),
			Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: u.Publish},
				Subscribe: &server.SubjectPermission{Allow: u.Subscribe},
			},
		})
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("cannot start NATS: %w", err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(logger{cfg.Logger.With("component", "nats")}, false, false, false)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("cannot start NATS: not ready after 10s")
	}
	return &Server{srv: srv, tls: cfg.TLS != nil}, nil
}

// ClientURL is the URL clients connect to: nats://, or tls:// when the
// server requires TLS.
func (s *Server) ClientURL() string {
	addr, ok := s.srv.Addr().(*net.TCPAddr)
	if !ok {
		return s.srv.ClientURL()
	}
	scheme := "nats://"
	if s.tls {
		scheme = "tls://"
	}
	return scheme + net.JoinHostPort(addr.IP.String(), strconv.Itoa(addr.Port))
}

// Close stops the server and waits until it is down.
func (s *Server) Close() error {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	return nil
}

// logger adapts slog to the server's Logger.
type logger struct{ l *slog.Logger }

func (l logger) Noticef(format string, v ...any) { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l logger) Warnf(format string, v ...any)   { l.l.Warn(fmt.Sprintf(format, v...)) }
func (l logger) Fatalf(format string, v ...any)  { l.l.Error(fmt.Sprintf(format, v...)) }
func (l logger) Errorf(format string, v ...any)  { l.l.Error(fmt.Sprintf(format, v...)) }
func (l logger) Debugf(format string, v ...any)  { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l logger) Tracef(format string, v ...any)  { l.l.Debug(fmt.Sprintf(format, v...)) }
