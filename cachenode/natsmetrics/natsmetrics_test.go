package natsmetrics

import (
	"errors"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/storage/storagetest"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNewRequiresRegistryAndLogger(t *testing.T) {
	if _, err := New(nil, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("New without a registerer: no error")
	}
	if _, err := New(prometheus.NewRegistry(), nil); err == nil {
		t.Error("New without a logger: no error")
	}
}

func TestNothingBeforeAttach(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if n := gauge(t, reg, "kgate_nats_connected"); n != -1 {
		t.Errorf("kgate_nats_connected before Attach = %v, want absent", n)
	}
}

// TestConnectionLifecycle runs a real NATS server: traffic, a permission
// violation, a slow consumer, then the server's restart on the same port.
func TestConnectionLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS: skipped under -short")
	}
	users := []natsembed.User{{Name: "gw", Password: "secret", Publish: []string{"ok.>"}, Subscribe: []string{">"}}}
	srv, err := natsembed.Start(natsembed.Config{Users: users})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Close() }()
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())

	reg := prometheus.NewRegistry()
	m, err := New(reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), append(m.Options(), nats.UserInfo("gw", "secret"),
		nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m.Attach(nc)
	if got := gauge(t, reg, "kgate_nats_connected"); got != 1 {
		t.Fatalf("kgate_nats_connected = %v, want 1", got)
	}

	for range 3 {
		if err := nc.Publish("ok.x", []byte("12345")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, reg, "kgate_nats_sent_messages_total"); got != 3 {
		t.Errorf("kgate_nats_sent_messages_total = %v, want 3", got)
	}
	if got := gauge(t, reg, "kgate_nats_sent_bytes_total"); got != 15 {
		t.Errorf("kgate_nats_sent_bytes_total = %v, want 15", got)
	}

	// A subject the user may not publish on: the server answers with an
	// asynchronous permissions violation.
	if err := nc.Publish("forbidden", []byte("x")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a permissions error counted", func() bool { return testutil.ToFloat64(m.errs) == 1 })

	// A subscription whose buffer holds one message, sent fifty.
	slow := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe("ok.slow", slow)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if err := nc.Publish("ok.slow", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a slow consumer counted", func() bool { return testutil.ToFloat64(m.slowConsumers) >= 1 })
	eventually(t, "messages received", func() bool { return gauge(t, reg, "kgate_nats_received_messages_total") >= 2 })
	_ = sub.Unsubscribe()

	// The server goes away and comes back on the same port.
	srv.Close()
	eventually(t, "the disconnection counted", func() bool {
		return testutil.ToFloat64(m.disconnects) == 1 && gauge(t, reg, "kgate_nats_connected") == 0
	})
	if srv, err = natsembed.Start(natsembed.Config{Port: port, Users: users}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reconnection counted", func() bool {
		return gauge(t, reg, "kgate_nats_reconnects_total") == 1 && gauge(t, reg, "kgate_nats_connected") == 1
	})
	if got := testutil.ToFloat64(m.errs); got != 1 {
		t.Errorf("kgate_nats_errors_total = %v after the restart, want 1", got)
	}
}

// gauge is the value of the unlabelled metric name in reg, or -1 when
// absent.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	if v, ok := storagetest.Metric(t, reg, name); ok {
		return v
	}
	return -1
}

// eventually waits until cond holds: the handlers run on the client's own
// goroutine, some time after what triggers them.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	storagetest.Eventually(t, 20*time.Second, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}
