package route

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

type env struct {
	etcd  *clientv3.Client
	nc    *nats.Conn
	reg   *registry.Registry
	codec *codec.Codec
	table *ranges.Table
}

func (e *env) node(t *testing.T) *cachenode.Node {
	t.Helper()
	n, err := cachenode.New(cachenode.Config{Etcd: e.etcd, NATS: e.nc, Registry: e.reg, Codec: e.codec, Ranges: e.table, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	storagetest.Eventually(t, 10*time.Second, "cache node ready", storagetest.Holds(n.Ready))
	return n
}

func (e *env) put(t *testing.T, name string) int64 {
	t.Helper()
	resp, err := e.etcd.Put(context.Background(), "/registry/configmaps/ns/"+name,
		fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns"}}`, name))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// newEnv starts etcd and NATS for cache nodes.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{etcd: storagetest.StartEtcd(t)}
	srv, err := natsembed.Start(natsembed.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if e.nc, err = nats.Connect(srv.ClientURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nc.Close)
	if e.reg, err = registry.NewBuiltin(); err != nil {
		t.Fatal(err)
	}
	e.codec = codec.New(e.reg.Scheme())
	if e.table, err = ranges.Default(e.reg); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestAnyReadsNeverGoBack: once the gateway has served a range at a
// revision, a resourceVersion=0 read of it is served no older, even by a
// replica that has not seen that revision yet (it waits for it); when no
// replica gets there in time the read is served anyway.
func TestAnyReadsNeverGoBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and NATS")
	}
	e := newEnv(t)
	n := e.node(t)
	r, err := New(Config{Replicas: Static{n.Addr()}, Client: client.Config{Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for i := range 20 {
		name := fmt.Sprintf("k%d", i)
		rev := e.put(t, name)
		// As if another replica had just answered at rev: the node may
		// not have the write yet.
		r.saw("configmaps", rev)
		obj, err := r.Get(ctx, "configmaps", "/registry/configmaps/ns/"+name, client.Read{}, client.JSON)
		if err != nil || obj.Revision != rev {
			t.Fatalf("resourceVersion=0 Get of %s after the gateway served %d = %d, %v", name, rev, obj.Revision, err)
		}
	}
	// A revision no replica will reach: a router with a short timeout,
	// so that the replica's full wait is short too.
	quick, err := New(Config{Replicas: Static{n.Addr()}, Client: client.Config{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer quick.Close()
	quick.saw("configmaps", 1<<40)
	l, err := quick.List(ctx, "configmaps", client.ListOptions{Prefix: "/registry/configmaps/ns/"})
	if err != nil || len(l.Items) != 20 {
		t.Fatalf("resourceVersion=0 List when no replica is new enough = %v, %v; want the 20 objects", l, err)
	}
}

// TestReadsPassOverABehindReplica: a replica that has not seen the
// revision a read waits for — a consistent read's, or the gateway's served
// revision for a resourceVersion=0 read — is asked once, with a short
// wait, and the read goes to one that has it instead of waiting out the
// first one's timeout.
func TestReadsPassOverABehindReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and NATS")
	}
	e := newEnv(t)
	n := e.node(t)
	type ask struct{ rv, match, wait string }
	var (
		mu    sync.Mutex
		asked []ask
	)
	behind := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		mu.Lock()
		asked = append(asked, ask{q.Get("rv"), q.Get("match"), q.Get("wait")})
		mu.Unlock()
		w.Header().Set("X-Kgate-Error", "toolarge") // the read API's "not there yet"
		w.WriteHeader(http.StatusGatewayTimeout)
	}))
	defer behind.Close()
	r, err := New(Config{Replicas: Static{strings.TrimPrefix(behind.URL, "http://"), n.Addr()}, Client: client.Config{Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	direct, err := client.New(client.Config{Addr: n.Addr(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for _, tc := range []struct {
		name       string
		consistent bool
	}{{"resourceVersion=0", false}, {"consistent", true}} {
		t.Run(tc.name, func(t *testing.T) {
			name := "fresh-" + fmt.Sprint(tc.consistent)
			rev := e.put(t, name)
			rd := client.Read{ResourceVersion: rev, Match: "NotOlderThan"}
			// The node is up to date before the read starts.
			if _, err := direct.Get(context.Background(), "configmaps", "/registry/configmaps/ns/"+name, rd, client.JSON); err != nil {
				t.Fatal(err)
			}
			if !tc.consistent {
				r.saw("configmaps", rev)
				rd = client.Read{}
			}
			mu.Lock()
			asked = nil
			mu.Unlock()
			obj, err := r.Get(context.Background(), "configmaps", "/registry/configmaps/ns/"+name, rd, client.JSON)
			if err != nil || obj.Revision != rev {
				t.Fatalf("Get = %d, %v; want %d from the replica that is up to date", obj.Revision, err, rev)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []ask{{fmt.Sprint(rev), "NotOlderThan", fmt.Sprint(catchUpWait.Milliseconds())}}
			if !reflect.DeepEqual(asked, want) {
				t.Fatalf("the behind replica was asked %+v, want %+v", asked, want)
			}
		})
	}
}

// TestConsistentReadWaitsOnALoneReplica: with one replica, a read whose
// revision it has not reached after the short wait gets its full wait.
func TestConsistentReadWaitsOnALoneReplica(t *testing.T) {
	var (
		mu    sync.Mutex
		waits []int
	)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		wait, _ := strconv.Atoi(req.URL.Query().Get("wait"))
		mu.Lock()
		waits = append(waits, wait)
		mu.Unlock()
		if wait < 1000 { // reaches the revision in a second
			w.Header().Set("X-Kgate-Error", "toolarge")
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
		w.Write(append(binary.AppendUvarint(nil, 9), "{}"...)) // revision 9
	}))
	defer slow.Close()
	r, err := New(Config{Replicas: Static{strings.TrimPrefix(slow.URL, "http://")}, Client: client.Config{Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	obj, err := r.Get(context.Background(), "configmaps", "/registry/configmaps/ns/a", client.Read{ResourceVersion: 9, Match: "NotOlderThan"}, client.JSON)
	if err != nil || obj.Revision != 9 {
		t.Fatalf("Get = %+v, %v", obj, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 2 || waits[0] != int(catchUpWait.Milliseconds()) || waits[1] < 1000 {
		t.Fatalf("the replica was asked with waits %v (ms), want %d then its full wait", waits, catchUpWait.Milliseconds())
	}
}

func TestRouterMovesOn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and NATS")
	}
	e := newEnv(t)
	early := e.node(t) // its window holds every write below
	first := e.put(t, "a")
	last := e.put(t, "b")
	// Until the early node has seen the writes, its window answers with
	// fewer events: wait for it, as a replica that is merely behind is
	// not what this test is about.
	storagetest.Eventually(t, 10*time.Second, "the early node has seen the writes", func() error {
		for _, s := range early.Status() {
			if s.ID == "configmaps" && s.Seen >= last {
				return nil
			}
		}
		return fmt.Errorf("configmaps not seen up to %d: %+v", last, early.Status())
	})
	late := e.node(t) // lists after the writes: its window starts later

	// An address nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	r, err := New(Config{Replicas: Static{dead, late.Addr(), early.Addr()}, Client: client.Config{Timeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	obj, err := r.Get(ctx, "configmaps", "/registry/configmaps/ns/a", client.Read{}, client.JSON)
	if err != nil || obj.Revision != first {
		t.Fatalf("Get past a dead replica = %d, %v; want revision %d", obj.Revision, err, first)
	}
	l2, err := r.List(ctx, "configmaps", client.ListOptions{Prefix: "/registry/configmaps/ns/"})
	if err != nil || len(l2.Items) != 2 {
		t.Fatalf("List = %v, %v", l2, err)
	}
	// The late node's window starts after the writes: the router must
	// find them on the early node.
	evs, _, err := r.Events(ctx, "configmaps", first-1)
	if err != nil || len(evs) != 2 || evs[0].Revision != first {
		t.Fatalf("Events from %d = %d events, %v", first-1, len(evs), err)
	}
	// No replica at all.
	none, err := New(Config{Replicas: Static{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Get(ctx, "configmaps", "/registry/configmaps/ns/a", client.Read{}, client.JSON); !errors.Is(err, ErrNoReplica) || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Get without replicas = %v", err)
	}
	// Only replicas whose windows are too short: compacted.
	short, err := New(Config{Replicas: Static{dead, late.Addr()}, Client: client.Config{Timeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	if _, _, err := short.Events(ctx, "configmaps", first-1); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("Events when no replica reaches back = %v, want ErrCompacted", err)
	}
}

// handoff is a directory that names a node that stopped serving the range
// until asked again after that failed: a gateway that had not yet heard
// of the new owners.
type handoff struct {
	mu       sync.Mutex
	old, new string
	asked    int
}

func (h *handoff) Replicas(string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked++
	if h.asked == 1 {
		return []string{h.old}
	}
	return []string{h.new}
}

// TestRouterWaitsForTheDirectory: when every replica the directory names
// is unavailable, the read waits for the directory to name others and
// reads from them; a fixed replica set fails at once.
func TestRouterWaitsForTheDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and NATS")
	}
	e := newEnv(t)
	n := e.node(t)
	rev := e.put(t, "a")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()
	ctx := context.Background()
	h := &handoff{old: gone, new: n.Addr()}
	r, err := New(Config{Replicas: h, Client: client.Config{Timeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	obj, err := r.Get(ctx, "configmaps", "/registry/configmaps/ns/a", client.Read{ResourceVersion: rev}, client.JSON)
	if err != nil || obj.Revision != rev {
		t.Fatalf("Get during a handoff = %+v, %v", obj, err)
	}
	if h.asked < 2 {
		t.Fatalf("the directory was asked %d times", h.asked)
	}
	fixed, err := New(Config{Replicas: Static{gone}, Client: client.Config{Timeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Close()
	if _, err := fixed.Get(ctx, "configmaps", "/registry/configmaps/ns/a", client.Read{}, client.JSON); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Get from a gone fixed replica = %v, want unavailable", err)
	}
}
