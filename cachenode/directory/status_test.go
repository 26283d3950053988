package directory

import (
	"log/slog"
	"slices"
	"testing"
	"time"
)

func TestSubject(t *testing.T) {
	f := func(node, want string) {
		t.Helper()
		if got := Subject(node); got != want {
			t.Errorf("Subject(%q) = %q, want %q", node, got, want)
		}
	}
	f("cachenode-0", "kgate.status.cachenode-0")
	f("node.example.com", "kgate.status.node_example_com")
	f("a b*c>", "kgate.status.a_b_c_")
}

func TestStatusRoundTrip(t *testing.T) {
	rs := []RangeStatus{{ID: "pods-0", Ready: true, Seen: 12345, Primary: true}, {ID: "events-1", Seen: 3}}
	b, err := encodeStatus("cachenode-1", "10.0.0.7:8443", 1767225600123456789, false, rs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes: %s", len(b), b)
	w, err := decodeStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	if w.Node != "cachenode-1" || w.ReadAddr != "10.0.0.7:8443" || w.Epoch != 1767225600123456789 || w.Gone {
		t.Errorf("decoded %+v", w)
	}
	if got := []RangeStatus{RangeStatus(w.Ranges[0]), RangeStatus(w.Ranges[1])}; !slices.Equal(got, rs) {
		t.Errorf("ranges %+v, want %+v", got, rs)
	}
}

func TestDecodeStatusRejects(t *testing.T) {
	for _, m := range []string{``, `x`, `[]`, `{}`, `{"v":0,"n":"a","a":"a:1","e":1}`, `{"v":1,"a":"a:1","e":1}`,
		`{"v":1,"n":"a","e":1}`, `{"v":1,"n":"a","a":"a:1","e":-1}`, `{"v":1,"n":"a","a":"a:1","e":1,"r":[{"i":1}]}`} {
		if w, err := decodeStatus([]byte(m)); err == nil {
			t.Errorf("decodeStatus(%s) = %+v, want an error", m, w)
		}
	}
	// Bad entries inside a good message are dropped, duplicates keep the
	// first.
	w, err := decodeStatus([]byte(`{"v":1,"n":"a","a":"a:1","e":1,"r":[{"i":""},{"i":"p","y":true},{"i":"p"},{"i":"q","s":-5}],"future":1}`))
	if err != nil || len(w.Ranges) != 1 || !w.Ranges[0].Ready {
		t.Errorf("decodeStatus = %+v, %v", w, err)
	}
}

func TestReceiveEpochsAndExpiry(t *testing.T) {
	d, err := New(Config{NATS: nil, Expire: time.Second})
	if err == nil {
		t.Fatal("New without NATS succeeded")
	}
	d = &Directory{cfg: Config{Expire: time.Second}, log: discard(), metrics: &metrics{}, changes: make(chan struct{}, 1), nodes: map[string]*NodeStatus{}}
	d.ready.Store(&map[string][]Replica{})
	msg := func(epoch int64, gone bool, seen int64) []byte {
		b, _ := encodeStatus("a", "a:1", epoch, gone, []RangeStatus{{ID: "pods", Ready: true, Seen: seen}})
		return b
	}
	now := time.Unix(1000, 0)
	d.receive(Subject("a"), msg(2, false, 10), now)
	if r := d.Ready("pods"); len(r) != 1 || r[0].Seen != 10 {
		t.Fatalf("Ready = %+v", r)
	}
	<-d.Changes()
	d.receive(Subject("a"), msg(2, false, 11), now)
	if r := d.Ready("pods"); r[0].Seen != 11 {
		t.Errorf("progress not applied: %+v", r)
	}
	if len(d.Changes()) != 0 {
		t.Error("progress alone notified a change")
	}
	d.receive(Subject("a"), msg(1, false, 99), now) // a previous life of the node
	d.receive(Subject("a"), msg(1, true, 0), now)
	if r := d.Ready("pods"); len(r) != 1 || r[0].Seen != 11 {
		t.Errorf("stale epoch applied: %+v", r)
	}
	d.expire(now.Add(time.Second))
	if len(d.Nodes()) != 1 {
		t.Error("expired at exactly Expire")
	}
	d.expire(now.Add(time.Second + time.Millisecond))
	if len(d.Nodes()) != 0 || len(d.Ready("pods")) != 0 {
		t.Error("not expired after Expire")
	}
	// A restart (larger epoch) replaces the node.
	d.receive(Subject("a"), msg(2, false, 11), now)
	d.receive(Subject("a"), msg(3, false, 5), now)
	if n := d.Nodes(); len(n) != 1 || n[0].Epoch != 3 {
		t.Errorf("Nodes = %+v", n)
	}
}

func FuzzDecodeStatus(f *testing.F) {
	b, _ := encodeStatus("a", "a:1", 1, false, []RangeStatus{{ID: "pods", Ready: true, Seen: 3, Primary: true}})
	f.Add(b)
	f.Add([]byte(`{"v":1,"n":"a","a":"a:1","e":1,"x":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeStatus(b)
		if err != nil {
			return
		}
		if w.Node == "" {
			t.Fatal("accepted a status without a node")
		}
		ids := map[string]bool{}
		for _, r := range w.Ranges {
			if r.ID == "" || ids[r.ID] {
				t.Fatalf("bad range kept: %+v", w.Ranges)
			}
			ids[r.ID] = true
		}
	})
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
