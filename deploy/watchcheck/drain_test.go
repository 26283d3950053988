package watchcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kgate/kgate/storage/storagetest"
)

// startMulti starts a Multi for t, closed at its end.
func startMulti(t *testing.T, cfg MultiConfig) *Multi {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg.Dir, cfg.Logger = t.TempDir(), testLogger()
	m, err := StartMulti(ctx, cfg)
	if err != nil {
		t.Fatalf("cannot start cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("cannot close cluster: %v", err)
		}
	})
	return m
}

// startProxy starts a Proxy for t, closed at its end.
func startProxy(t *testing.T, pick func() []string) *Proxy {
	t.Helper()
	p, err := NewProxy(pick)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// handlerLog records what an informer's event handler was told after the
// initial list, as Events.
type handlerLog struct {
	mu  sync.Mutex // guards evs
	evs []Event
}

func (h *handlerLog) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				h.add("ADDED", obj)
			}
		},
		UpdateFunc: func(_, obj any) { h.add("MODIFIED", obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				h.add("DELETED (final state unknown: a relist)", d.Obj)
				return
			}
			h.add("DELETED", obj)
		},
	}
}

func (h *handlerLog) add(typ string, obj any) {
	e := Event{Type: typ}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		e = ConfigMapEvent(typ, cm)
	}
	h.mu.Lock()
	h.evs = append(h.evs, e)
	h.mu.Unlock()
}

// events returns the events of namespaces ns so far.
func (h *handlerLog) events(ns map[string]bool) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Event
	for _, e := range h.evs {
		if ns[e.Namespace] {
			out = append(out, e)
		}
	}
	return out
}

// drainWrites is how many writes TestGatewayDrain waits for before the
// stop, and again after the informers moved to gateway B.
const drainWrites = 25

// TestGatewayDrain stops a gateway the way SIGTERM does while informers
// watch through it. Two gateways serve the same two cache nodes behind an
// L4 proxy that sends new connections to gateway A (to B when A refuses
// them) and, once A has stopped, to B only. Through the proxy run two
// ConfigMap informers (LIST then WATCH, and WatchList; both ask for
// bookmarks) and a plain watch with bookmarks; a writer changes ConfigMaps
// through B all along. When A stops, each of its watches must end with a
// final BOOKMARK; each informer must resume on B from that bookmark,
// without a LIST or a WatchList, and its handler must see every write
// made before, during and after the switch, in order, exactly once.
func TestGatewayDrain(t *testing.T) {
	m := startMulti(t, MultiConfig{CacheNodes: 2, Gateways: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var aStopped atomic.Bool
	a, b := m.GatewayAddr(0), m.GatewayAddr(1)
	px := startProxy(t, func() []string {
		if aStopped.Load() {
			return []string{b}
		}
		return []string{a, b}
	})
	viaProxy := func(agent string) kubernetes.Interface {
		cfg, err := m.RESTConfig(px.Addr(), agent, true)
		if err != nil {
			t.Fatal(err)
		}
		return newClientset(t, cfg)
	}
	direct, err := m.RESTConfig(b, "watchcheck/drain-writer", false)
	if err != nil {
		t.Fatal(err)
	}
	admin := newClientset(t, direct)
	namespaces := []string{"ns-0", "ns-1"}
	createNamespaces(ctx, t, admin, namespaces...)
	inNS := map[string]bool{"ns-0": true, "ns-1": true}

	logs := []*handlerLog{{}, {}}
	infs := []*informer{
		startInformer(ctx, t, "informer-list", viaProxy("watchcheck/informer-list"), false, logs[0].handler()),
		startInformer(ctx, t, "informer-watchlist", viaProxy("watchcheck/informer-watchlist"), true, logs[1].handler()),
	}
	for _, in := range infs {
		if n := len(in.watches()); n != 1 {
			t.Fatalf("%s made %d watch requests before the test began", in.name, n)
		}
	}
	hist := &History{}
	wr := newWriter(&m.Truth, admin, hist, seed(t), namespaces, 8)
	writeCtx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	writerDone := make(chan error, 1)
	go func() { writerDone <- wr.run(writeCtx, 50) }()

	// A plain watch with bookmarks, from the current revision.
	from := strconv.FormatInt(hist.LastRev(), 10)
	if from == "0" {
		_, rev, err := m.ConfigMaps(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		from = strconv.FormatInt(rev, 10)
	}
	plain, err := viaProxy("watchcheck/drain-watch").CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{ResourceVersion: from, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	seg := &Segment{Start: from, Began: time.Now()}
	plainDone := make(chan struct{})
	go func() {
		defer close(plainDone)
		for ev := range plain.ResultChan() {
			seg.Events = append(seg.Events, EventOf(ev))
		}
	}()

	// Writes before the stop: some reach every watch through gateway A.
	storagetest.Eventually(t, time.Minute, "writes before the stop", func() error {
		if n := len(hist.Writes()); n < drainWrites {
			return fmt.Errorf("%d writes", n)
		}
		return nil
	})
	beforeStop := hist.LastRev()
	// Probers watch gateway A directly, again and again, until it
	// refuses connections: what a client resuming at once gets from a
	// stopping gateway.
	probeCfg, err := m.RESTConfig(a, "watchcheck/drain-probe", false)
	if err != nil {
		t.Fatal(err)
	}
	probeCfg.QPS, probeCfg.Burst = -1, 0
	var (
		probeMu  sync.Mutex
		outcomes = map[string]int{}
		probes   sync.WaitGroup
	)
	watchesA := func() float64 {
		return m.Counter(0, "apiserver_request_total", map[string]string{"verb": "WATCH", "resource": "configmaps"})
	}
	watchesBefore := watchesA()
	for range 4 {
		trip := &lastTrip{}
		cfg := rest.CopyConfig(probeCfg)
		if !*flagReuse {
			cfg.WrapTransport = closeAfterWatch
		}
		cfg.Wrap(trip.wrap)
		probe, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		probes.Go(func() { probeStopping(ctx, probe, trip, beforeStop, &probeMu, outcomes) })
	}
	// The probers' first watches run on A (watches count when they start).
	storagetest.Eventually(t, time.Minute, "the probers watch gateway A", func() error {
		if n := watchesA() - watchesBefore; n < 4 {
			return fmt.Errorf("%.0f of the 4 probers' watches started", n)
		}
		return nil
	})
	t0 := time.Now()
	if err := m.StopGateway(0); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	aStopped.Store(true)
	probes.Wait()
	for o, n := range outcomes {
		if strings.HasPrefix(o, "bad: ") {
			t.Errorf("a watch sent to gateway A while it stopped: %s (x%d); want a 429 with Retry-After, a refused connection, or a stream ending with a bookmark", o, n)
		}
	}
	select {
	case <-plainDone:
	case <-time.After(5 * time.Second):
		t.Fatalf("the plain watch did not end within 5s of gateway A's stop")
	}
	// Writes after the switch, once both informers watch on B again.
	afterStop := len(hist.Writes())
	storagetest.Eventually(t, time.Minute, "writes after the switch", func() error {
		for _, in := range infs {
			if n := len(in.watches()); n < 2 {
				return fmt.Errorf("%s made %d watch requests", in.name, n)
			}
		}
		if n := len(hist.Writes()) - afterStop; n < drainWrites {
			return fmt.Errorf("%d writes since the stop", n)
		}
		return nil
	})
	stopWriter()
	if err := <-writerDone; err != nil {
		t.Fatalf("writer: %v", err)
	}
	final := hist.LastRev()
	if why, _ := settle(nil, infs, final); why != "" {
		t.Errorf("not settled: %s", why)
	}
	if err := wr.verify(ctx); err != nil {
		t.Fatalf("the recorded writes disagree with etcd: %v", err)
	}
	writes := hist.Writes()
	all, err := ParseFilter("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(seg.Events) == 0 || seg.Events[len(seg.Events)-1].Type != "BOOKMARK" {
		tail := "no events"
		if n := len(seg.Events); n > 0 {
			tail = around(seg.Events, n-1, 2)
		}
		t.Errorf("plain watch: the stream did not end with a BOOKMARK: %s", tail)
	}
	if v, err := all.Check(writes, seg); err != nil {
		t.Errorf("plain watch: %v", err)
	} else {
		t.Logf("plain watch: %d events, %d bookmarks, ended with a bookmark at %d (last write before the stop %d)", v.Delivered, v.Bookmarks, v.Through, beforeStop)
	}

	truth, etcdRev, err := m.ConfigMaps(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := all.Expected(writes, 0)
	for i, in := range infs {
		ws := in.watches()
		// The watch A drained is the last one before the first that
		// went to B; it must end with a bookmark the next resumes from.
		drained := -1
		for k, w := range ws {
			if w.Err == nil && w.Last != "" {
				drained = k
			}
			if k > 0 && ws[k-1].Last == "BOOKMARK" && w.From == ws[k-1].LastRV {
				drained = k - 1
				break
			}
		}
		desc := fmt.Sprintf("%+v", ws)
		switch {
		case len(ws) < 2:
			t.Errorf("%s: %d watch requests: it never left gateway A: %s", in.name, len(ws), desc)
		case drained < 0 || ws[drained].Last != "BOOKMARK":
			t.Errorf("%s: the watch on gateway A did not end with a BOOKMARK: %s", in.name, desc)
		case drained+1 >= len(ws) || ws[drained+1].From != ws[drained].LastRV || ws[drained+1].Err != nil:
			t.Errorf("%s: did not resume from A's final bookmark at %s: %s", in.name, ws[drained].LastRV, desc)
		}
		for _, w := range ws[1:] {
			if w.WatchList {
				t.Errorf("%s: a WatchList (relist) after the first sync: %s", in.name, desc)
			}
		}
		counts := in.lw.Counts()
		lists, watchLists := counts.Lists, counts.WatchLists
		if lists+watchLists != 1 {
			t.Errorf("%s: %d LISTs and %d WatchLists: it relisted", in.name, lists, watchLists)
		}
		state, err := in.storeState()
		if err != nil {
			t.Fatal(err)
		}
		if diff := DiffStates(truth, state); diff != "" {
			t.Errorf("%s: store differs from etcd at %d: %s", in.name, etcdRev, diff)
		}
		got := logs[i].events(inNS)
		n := 0
		for n < len(got) && n < len(want) && got[n].same(&want[n]) {
			n++
		}
		if n != len(got) || n != len(want) {
			t.Errorf("%s: handler saw %d events, the writes were %d; first difference at #%d: got %s, want %s",
				in.name, len(got), len(want), n, around(got, n, 2), around(want, n, 2))
		}
		t.Logf("%s: %d watch requests, resumed at %s after A's final bookmark; handler saw %d of %d writes in order", in.name, len(ws), ws[min(drained+1, len(ws)-1)].From, n, len(want))
	}
	listA := m.Counter(0, "apiserver_request_total", map[string]string{"verb": "LIST", "resource": "configmaps"})
	listB := m.Counter(1, "apiserver_request_total", map[string]string{"verb": "LIST", "resource": "configmaps"})
	watchB := m.Counter(1, "apiserver_request_total", map[string]string{"verb": "WATCH", "resource": "configmaps"})
	if listA != 1 || listB != 0 {
		t.Errorf("ConfigMap LISTs: %.0f on gateway A, %.0f on B; want 1 (the first sync) and 0", listA, listB)
	}
	if watchB < 2 {
		t.Errorf("%.0f ConfigMap watches on gateway B: the informers did not move there", watchB)
	}
	t.Logf("watches sent to gateway A while it stopped: %v", outcomes)
	t.Logf("gateway A stopped in %v; writes=%d (failed %d) up to %d; LISTs A=%.0f B=%.0f, watches on B=%.0f; proxy connections %v",
		took.Round(time.Millisecond), len(writes), wr.failed, final, listA, listB, watchB, px.Connections())
}

// lastTrip remembers how its client's last request ended at the
// transport: client-go answers a watch request whose connection is reset
// or closed before any response (the gateway closed its listener with the
// connection still in its accept queue) with a watch that ends at once,
// without an event or an error, which only the transport can tell apart
// from a 200 stream closed without any event.
type lastTrip struct {
	rt  http.RoundTripper
	mu  sync.Mutex // guards err
	err error
}

func (l *lastTrip) wrap(rt http.RoundTripper) http.RoundTripper {
	l.rt = rt
	return l
}

func (l *lastTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	return resp, err
}

// lost is the error of the last request when it got no response.
func (l *lastTrip) lost() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// probeStopping watches gateway cs again and again, from revision from
// with bookmarks, until it refuses connections, and counts how each watch
// went in outcomes; the outcomes a client cannot resume from without a
// relist start with "bad: ". trip is cs's transport.
func probeStopping(ctx context.Context, cs kubernetes.Interface, trip *lastTrip, from int64, mu *sync.Mutex, outcomes map[string]int) {
	record := func(o string) {
		mu.Lock()
		outcomes[o]++
		mu.Unlock()
	}
	opts := metav1.ListOptions{Watch: true, ResourceVersion: strconv.FormatInt(from, 10), AllowWatchBookmarks: true}
	for range 500 {
		if ctx.Err() != nil {
			return
		}
		w, err := cs.CoreV1().RESTClient().Get().Resource("configmaps").
			VersionedParams(&opts, scheme.ParameterCodec).MaxRetries(0).Watch(ctx)
		if err != nil {
			var se apierrors.APIStatus
			switch {
			case apierrors.IsTooManyRequests(err):
				if _, ok := apierrors.SuggestsClientDelay(err); ok {
					record("429 with Retry-After")
				} else {
					record("bad: 429 without Retry-After")
				}
				continue
			case errors.As(err, &se):
				record(fmt.Sprintf("bad: %d %s", se.Status().Code, se.Status().Message))
				continue
			}
			record("connection refused or reset") // stopped listening
			return
		}
		var last watch.Event
		n := 0
		for ev := range w.ResultChan() {
			last = ev
			n++
		}
		w.Stop()
		switch {
		case n == 0 && trip.lost() != nil:
			// No response at all: like a refused connection, the
			// gateway had stopped listening.
			record("connection reset or closed before a response")
			return
		case n == 0:
			record("bad: a 200 stream closed without any event")
		case last.Type == watch.Bookmark:
			record("stream ended with a bookmark")
		case last.Type == watch.Error:
			record("bad: stream ended with ERROR " + statusOf(last))
		default:
			record("bad: stream ended after " + string(last.Type) + " without a bookmark")
		}
	}
}

// TestLastTripSeesLostConnection: a watch whose connection is reset before
// any response (a listener closing with the connection in its accept
// queue) comes from client-go as a watch that ends at once without an
// event or an error; only the transport, through lastTrip, tells it from a
// 200 stream closed without any event. The watch is the probers'.
func TestLastTripSeesLostConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // the test closed ln
			}
			_ = c.(*net.TCPConn).SetLinger(0) // close with a reset
			var buf [16]byte
			_, _ = c.Read(buf[:]) // the request has begun
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-served }()
	trip := &lastTrip{}
	cfg := &rest.Config{Host: "http://" + ln.Addr().String()}
	cfg.Wrap(trip.wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := metav1.ListOptions{Watch: true, ResourceVersion: "5", AllowWatchBookmarks: true}
	w, err := cs.CoreV1().RESTClient().Get().Resource("configmaps").
		VersionedParams(&opts, scheme.ParameterCodec).MaxRetries(0).Watch(ctx)
	if err != nil {
		t.Fatalf("Watch = %v; client-go no longer hides a reset before the response", err)
	}
	n := 0
	for range w.ResultChan() {
		n++
	}
	if n != 0 || trip.lost() == nil {
		t.Errorf("%d events, transport error %v; want none and an error", n, trip.lost())
	}
}
