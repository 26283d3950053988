package aggregator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// retryFailed is how soon a failed fetch is tried again.
const retryFailed = 5 * time.Second

// perService keeps what was fetched from each non-local APIService's
// server, as kube-aggregator's discovery and OpenAPI controllers do: a
// fetch when the APIService appears or changes, again every refresh and
// retryFailed after a failure; a failure keeps the last value, marked
// failed; a deleted APIService's value goes.
type perService[T any] struct {
	entries map[string]*fetched[T]
}

// fetched is what was fetched for one APIService.
type fetched[T any] struct {
	service *apiregistrationv1.APIService // as last tried for
	at      time.Time                     // of the last try
	failed  bool                          // the last try
	ok      bool                          // fetched once at least: value holds
	value   T
}

// fetchFunc fetches one APIService's value; prev is the value held
// (zero when none), for conditional requests.
type fetchFunc[T any] func(ctx context.Context, s *apiregistrationv1.APIService, prev T) (T, error)

// sync fetches the values of services that are due, at most 8 at once,
// and forgets those of services no longer listed. It reports whether
// anything was fetched, tried or forgotten. Calls must not overlap.
func (p *perService[T]) sync(ctx context.Context, services []*apiregistrationv1.APIService, refresh time.Duration, log *slog.Logger, what string, fetch fetchFunc[T]) bool {
	if p.entries == nil {
		p.entries = map[string]*fetched[T]{}
	}
	var due []*apiregistrationv1.APIService
	for _, s := range services {
		f, ok := p.entries[s.Name]
		wait := refresh
		if ok && f.failed {
			wait = retryFailed
		}
		if !ok || f.service.ResourceVersion != s.ResourceVersion || time.Since(f.at) >= wait {
			due = append(due, s)
		}
	}
	gone := false
	for name := range p.entries {
		if !slices.ContainsFunc(services, func(s *apiregistrationv1.APIService) bool { return s.Name == name }) {
			delete(p.entries, name)
			gone = true
		}
	}
	if len(due) == 0 {
		return gone
	}
	results := make([]*fetched[T], len(due))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, s := range due {
		var prev T
		if f, ok := p.entries[s.Name]; ok && f.ok {
			prev = f.value
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			v, err := fetch(ctx, s, prev)
			if err != nil {
				log.Debug("cannot fetch from an extension server", "what", what, "apiservice", s.Name, "err", err)
				return
			}
			results[i] = &fetched[T]{service: s, at: time.Now(), ok: true, value: v}
		})
	}
	wg.Wait()
	for i, s := range due {
		if results[i] != nil {
			p.entries[s.Name] = results[i]
			continue
		}
		next := fetched[T]{service: s, at: time.Now(), failed: true}
		if prev, ok := p.entries[s.Name]; ok {
			next.ok, next.value = prev.ok, prev.value
		}
		p.entries[s.Name] = &next
	}
	return true
}

// held returns the APIServices whose value holds.
func (p *perService[T]) held() []*apiregistrationv1.APIService {
	var out []*apiregistrationv1.APIService
	for _, f := range p.entries {
		if f.ok {
			out = append(out, f.service)
		}
	}
	return out
}

// get returns the entry of APIService name.
func (p *perService[T]) get(name string) *fetched[T] { return p.entries[name] }

// getThrough sends a GET of path (query included) to s's server through
// proxy as u, and returns the status, headers and body (at most limit
// bytes). header is sent as well (Accept, If-None-Match).
func getThrough(ctx context.Context, proxy *Proxy, s *apiregistrationv1.APIService, u user.Info, path string, header http.Header, limit int) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(genericrequest.WithUser(ctx, u), http.MethodGet, path, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	w := &memWriter{header: http.Header{}, limit: limit}
	proxy.ServeService(w, req, s)
	if w.over {
		return 0, nil, nil, fmt.Errorf("cannot fetch %s: larger than %d bytes", path, limit)
	}
	return w.status, w.header, w.body.Bytes(), nil
}

// statusError describes an unexpected answer.
func statusError(path string, status int, body []byte) error {
	return fmt.Errorf("cannot fetch %s: status %d: %s", path, status, strings.TrimSpace(string(body[:min(len(body), 200)])))
}

// memWriter is the response of a fetch through the proxy, held in
// memory up to limit bytes.
type memWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
	limit  int
	over   bool
}

func (w *memWriter) Header() http.Header { return w.header }

func (w *memWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *memWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len()+len(p) > w.limit {
		w.over = true
		return 0, io.ErrShortWrite
	}
	return w.body.Write(p)
}

// Flush is a no-op: the reverse proxy flushes as it copies.
func (w *memWriter) Flush() {}
