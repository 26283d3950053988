package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/storage"
)

// fixture: pods a/p1..a/p3, b/p1, b/p2 made at revisions 2..6, then a/p2
// updated at 7 and b/p1 deleted at 8.
func fixture(t testing.TB) (*fakeRange, *client.Client) {
	rng, table := podsRange(t)
	f := newFakeRange(t, rng, 1)
	f.put(podEntry("a", "p1", 2, "web", "Running"))
	f.put(podEntry("a", "p2", 3, "db", "Pending"))
	f.put(podEntry("a", "p3", 4, "web", "Pending"))
	f.put(podEntry("b", "p1", 5, "web", "Running"))
	f.put(podEntry("b", "p2", 6, "db", "Running"))
	f.put(podEntry("a", "p2", 7, "db", "Running"))
	f.del("/registry/pods/b/p1", 8)
	nodes, _ := table.ByID("minions")
	notReady := newFakeRange(t, nodes, 1)
	notReady.ready.Store(false)
	return f, serve(t, 300*time.Millisecond, f, notReady)
}

func nameOf(t testing.TB, b []byte) string {
	var o struct {
		Metadata struct{ Name, Namespace, ResourceVersion string }
	}
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("item %q: %v", b, err)
	}
	return o.Metadata.Namespace + "/" + o.Metadata.Name + "@" + o.Metadata.ResourceVersion
}

func TestGet(t *testing.T) {
	_, c := fixture(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		rng    string
		key    string
		read   client.Read
		format client.Format
		want   string
		rev    int64
		err    error
	}{
		{name: "now", rng: "pods", key: "/registry/pods/a/p2", want: "a/p2@7", rev: 7},
		{name: "protobuf", rng: "pods", key: "/registry/pods/a/p1", format: client.Protobuf, want: "pb", rev: 2},
		{name: "not found", rng: "pods", key: "/registry/pods/b/p1", err: storage.ErrNotFound},
		{name: "exact before update", rng: "pods", key: "/registry/pods/a/p2", read: client.Read{ResourceVersion: 6, Match: "Exact"}, want: "a/p2@3", rev: 3},
		{name: "exact before delete", rng: "pods", key: "/registry/pods/b/p1", read: client.Read{ResourceVersion: 7, Match: "Exact"}, want: "b/p1@5", rev: 5},
		{name: "exact at the window start", rng: "pods", key: "/registry/pods/a/p1", read: client.Read{ResourceVersion: 1, Match: "Exact"}, err: storage.ErrNotFound},
		{name: "not older than", rng: "pods", key: "/registry/pods/a/p1", read: client.Read{ResourceVersion: 8, Match: "NotOlderThan"}, want: "a/p1@2", rev: 2},
		{name: "too large", rng: "pods", key: "/registry/pods/a/p1", read: client.Read{ResourceVersion: 100}, err: storage.ErrRevisionTooLarge},
		{name: "bad match", rng: "pods", key: "/registry/pods/a/p1", read: client.Read{ResourceVersion: 2, Match: "Soon"}, err: client.ErrBadRequest},
		{name: "key outside range", rng: "pods", key: "/registry/configmaps/a/x", err: client.ErrBadRequest},
		{name: "unknown range", rng: "nope", key: "/x", err: storage.ErrUnavailable},
		{name: "range not synced", rng: "minions", key: "/registry/minions/n", err: storage.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := c.Get(ctx, tt.rng, tt.key, tt.read, tt.format)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Get = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "pb"
			if tt.format == client.JSON {
				got = nameOf(t, obj.Data)
			} else if string(obj.Data[:3]) != "pb:" {
				t.Fatalf("protobuf data %q", obj.Data)
			}
			if got != tt.want || obj.Revision != tt.rev {
				t.Fatalf("Get = %s rev %d, want %s rev %d", got, obj.Revision, tt.want, tt.rev)
			}
		})
	}
}

func TestList(t *testing.T) {
	_, c := fixture(t)
	ctx := context.Background()
	tests := []struct {
		name      string
		o         client.ListOptions
		want      []string
		cont      string
		remaining int64
		rev       int64
		err       error
	}{
		{name: "all", want: []string{"a/p1@2", "a/p2@7", "a/p3@4", "b/p2@6"}, rev: 8},
		{name: "namespace", o: client.ListOptions{Prefix: "/registry/pods/b/"}, want: []string{"b/p2@6"}, rev: 8},
		{name: "page", o: client.ListOptions{Limit: 2}, want: []string{"a/p1@2", "a/p2@7"}, cont: "/registry/pods/a/p2", remaining: 2, rev: 8},
		{name: "next page", o: client.ListOptions{Limit: 2, Continue: "/registry/pods/a/p2"}, want: []string{"a/p3@4", "b/p2@6"}, rev: 8},
		{name: "label", o: client.ListOptions{Label: "app=web"}, want: []string{"a/p1@2", "a/p3@4"}, rev: 8},
		{name: "label page", o: client.ListOptions{Label: "app=web", Limit: 1}, want: []string{"a/p1@2"}, cont: "/registry/pods/a/p1", rev: 8},
		{name: "field", o: client.ListOptions{Field: "status.phase=Running,metadata.namespace=a"}, want: []string{"a/p1@2", "a/p2@7"}, rev: 8},
		{name: "exact", o: client.ListOptions{Read: client.Read{ResourceVersion: 5, Match: "Exact"}}, want: []string{"a/p1@2", "a/p2@3", "a/p3@4", "b/p1@5"}, rev: 5},
		{name: "exact page 2", o: client.ListOptions{Read: client.Read{ResourceVersion: 5, Match: "Exact"}, Limit: 3, Continue: "/registry/pods/a/p2"}, want: []string{"a/p3@4", "b/p1@5"}, rev: 5},
		{name: "not older than", o: client.ListOptions{Read: client.Read{ResourceVersion: 8, Match: "NotOlderThan"}, Limit: 1}, want: []string{"a/p1@2"}, cont: "/registry/pods/a/p1", remaining: 3, rev: 8},
		{name: "bad label", o: client.ListOptions{Label: "app in (x"}, err: client.ErrBadRequest},
		{name: "bad field", o: client.ListOptions{Field: "status.phase~x"}, err: client.ErrBadRequest},
		{name: "unsupported field", o: client.ListOptions{Field: "spec.containers=x"}, err: client.ErrBadRequest},
		{name: "prefix outside", o: client.ListOptions{Prefix: "/registry/secrets/"}, err: client.ErrBadRequest},
		{name: "too large", o: client.ListOptions{Read: client.Read{ResourceVersion: 9}}, err: storage.ErrRevisionTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := c.List(ctx, "pods", tt.o)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("List = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, it := range l.Items {
				got = append(got, nameOf(t, it))
			}
			if !reflect.DeepEqual(got, tt.want) || l.Continue != tt.cont || l.Remaining != tt.remaining || l.Revision != tt.rev {
				t.Fatalf("List = %v cont %q remaining %d rev %d, want %v %q %d %d", got, l.Continue, l.Remaining, l.Revision, tt.want, tt.cont, tt.remaining, tt.rev)
			}
		})
	}
}

func TestExactBeforeWindow(t *testing.T) {
	rng, _ := podsRange(t)
	f := newFakeRange(t, rng, 10)
	f.put(podEntry("a", "p1", 11, "web", "Running"))
	c := serve(t, time.Second, f)
	_, err := c.List(context.Background(), "pods", client.ListOptions{Read: client.Read{ResourceVersion: 9, Match: "Exact"}})
	if !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("List = %v, want compacted", err)
	}
	l, err := c.List(context.Background(), "pods", client.ListOptions{Read: client.Read{ResourceVersion: 10, Match: "Exact"}})
	if err != nil || len(l.Items) != 0 || l.Revision != 10 {
		t.Fatalf("List at the window start = %+v, %v", l, err)
	}
}

func TestListProtobuf(t *testing.T) {
	_, c := fixture(t)
	l, err := c.List(context.Background(), "pods", client.ListOptions{Format: client.Protobuf, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 2 || string(l.Items[0][:3]) != "pb:" {
		t.Fatalf("items %q", l.Items)
	}
}

func TestNotOlderThanWaits(t *testing.T) {
	f, c := fixture(t)
	f.waiting = make(chan struct{}, 1)
	go func() {
		<-f.waiting // the read waits for revision 9
		f.put(podEntry("c", "late", 9, "web", "Running"))
	}()
	obj, err := c.Get(context.Background(), "pods", "/registry/pods/c/late", client.Read{ResourceVersion: 9, Match: "NotOlderThan"}, client.JSON)
	if err != nil || obj.Revision != 9 {
		t.Fatalf("Get = %+v, %v", obj, err)
	}
	// a client deadline shorter than the server's wait still gets "too large"
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Get(ctx, "pods", "/registry/pods/c/late", client.Read{ResourceVersion: 50}, client.JSON)
	if !errors.Is(err, storage.ErrRevisionTooLarge) && !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Get = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestReadWaitShortens checks that Read.Wait bounds the node's wait below
// both the node's own timeout and the client's deadline, and that a wait
// under a millisecond is not sent as 0 (the node's default).
func TestReadWaitShortens(t *testing.T) {
	rng, _ := podsRange(t)
	f := newFakeRange(t, rng, 1)
	f.put(podEntry("a", "p1", 2, "web", "Running"))
	c := serve(t, time.Hour, f)
	for _, tc := range []struct {
		wait time.Duration
		want string
	}{
		{wait: time.Millisecond, want: " in 1ms "},
		{wait: time.Microsecond, want: " in 1ms "},
		{wait: 3 * time.Millisecond, want: " in 3ms "},
	} {
		_, err := c.Get(context.Background(), "pods", "/registry/pods/a/p1", client.Read{ResourceVersion: 50, Match: "NotOlderThan", Wait: tc.wait}, client.JSON)
		if !errors.Is(err, storage.ErrRevisionTooLarge) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("wait %v: Get = %v, want too large after %q", tc.wait, err, tc.want)
		}
	}
}

func TestEvents(t *testing.T) {
	_, c := fixture(t)
	ctx := context.Background()
	evs, seen, err := c.Events(ctx, "pods", 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type.String()+" "+ev.Key)
	}
	want := []string{"ADDED /registry/pods/b/p2", "MODIFIED /registry/pods/a/p2", "DELETED /registry/pods/b/p1"}
	if !reflect.DeepEqual(got, want) || seen != 8 {
		t.Fatalf("Events = %v seen %d, want %v seen 8", got, seen, want)
	}
	if evs[1].Type != event.Modified || nameOf(t, evs[1].PrevObject) != "a/p2@3" {
		t.Fatalf("modified event prev %q", evs[1].PrevObject)
	}
	if evs, seen, err := c.Events(ctx, "pods", 8); err != nil || len(evs) != 0 || seen != 8 {
		t.Fatalf("Events(8) = %v %d %v", evs, seen, err)
	}
	if _, _, err := c.Events(ctx, "pods", 0); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("Events(0) = %v, want compacted", err)
	}
	if _, _, err := c.Events(ctx, "minions", 0); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Events on a range not synced = %v", err)
	}
}

func TestReady(t *testing.T) {
	f, c := fixture(t)
	if err := c.Ready(context.Background()); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Ready with a range not synced = %v", err)
	}
	c2 := serve(t, time.Second, f)
	if err := c2.Ready(context.Background()); err != nil {
		t.Fatalf("Ready = %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	c, err := client.New(client.Config{Addr: "127.0.0.1:1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), "pods", "/registry/pods/a/b", client.Read{}, client.JSON); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Get = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.List(ctx, "pods", client.ListOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("List with a cancelled context = %v", err)
	}
	if _, err := client.New(client.Config{}); err == nil {
		t.Fatal("New without Addr succeeded")
	}
}
