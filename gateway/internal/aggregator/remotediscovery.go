package aggregator

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"

	"github.com/kgate/kgate/gateway/internal/discovery"
)

// maxDiscoveryBytes bounds one extension server's discovery document.
const maxDiscoveryBytes = 8 << 20

// discoveryUser is who asks extension servers for their discovery, as
// kube-aggregator's discovery manager.
var discoveryUser = &user.DefaultInfo{Name: "system:kube-aggregator", Groups: []string{user.SystemPrivilegedGroup}}

// RemoteDiscovery is what each gateway knows of the extension servers'
// groups for its discovery documents (discovery.Remote), as
// kube-aggregator's discovery manager learns them: the APIResourceList
// of every non-local APIService's group/version, fetched through Proxy as
// system:kube-aggregator when the APIService appears or changes and
// again every Refresh. A server that stops answering keeps its last
// resources, marked stale; one never fetched is left out (an APIService
// not Available answers 503 through Proxy, so it is left out too).
// Groups are ordered by groupPriorityMinimum, then name, and versions by
// versionPriority, then Kubernetes version order (kube-aggregator's
// helper.SortedByGroupAndVersion).
type RemoteDiscovery struct {
	Services *Services
	Proxy    http.Handler
	// Refresh fetches every version again this often; default 1m.
	Refresh time.Duration
	// Poll looks for changed APIServices this often; default 1s.
	Poll time.Duration
	// Timeout bounds one fetch; default 10s.
	Timeout time.Duration
	Log     *slog.Logger

	gen     atomic.Uint64
	mu      sync.Mutex // guards fetched and groups
	fetched map[string]*remoteVersion
	groups  []discovery.RemoteGroup
}

// remoteVersion is what was fetched for one APIService.
type remoteVersion struct {
	service   *apiregistrationv1.APIService // as last tried for
	at        time.Time                     // of the last try
	failed    bool                          // the last try
	fetched   bool                          // once at least: resources hold
	resources []metav1.APIResource
}

// Generation changes whenever Groups would return something else.
func (r *RemoteDiscovery) Generation() uint64 { return r.gen.Load() }

// Groups returns the extension servers' groups in discovery's order.
func (r *RemoteDiscovery) Groups() []discovery.RemoteGroup {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.groups
}

// retryFailed is how soon a failed fetch is tried again.
const retryFailed = 5 * time.Second

// Run keeps the groups until ctx ends.
func (r *RemoteDiscovery) Run(ctx context.Context) {
	t := time.NewTicker(cmp.Or(r.Poll, time.Second))
	defer t.Stop()
	for {
		r.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync fetches the versions whose APIService is new or changed, or
// whose time is up (Refresh, or retryFailed after a failure), and
// renders the groups again when anything differs.
func (r *RemoteDiscovery) Sync(ctx context.Context) {
	refresh := cmp.Or(r.Refresh, time.Minute)
	services := r.Services.Remote()
	r.mu.Lock()
	if r.fetched == nil {
		r.fetched = map[string]*remoteVersion{}
	}
	var due []*apiregistrationv1.APIService
	for _, s := range services {
		f, ok := r.fetched[s.Name]
		wait := refresh
		if ok && f.failed {
			wait = retryFailed
		}
		if !ok || f.service.ResourceVersion != s.ResourceVersion || time.Since(f.at) >= wait {
			due = append(due, s)
		}
	}
	gone := false
	for name := range r.fetched {
		if !slices.ContainsFunc(services, func(s *apiregistrationv1.APIService) bool { return s.Name == name }) {
			delete(r.fetched, name)
			gone = true
		}
	}
	r.mu.Unlock()
	if len(due) == 0 && !gone {
		return
	}

	results := make([]*remoteVersion, len(due))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, s := range due {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res, err := r.fetch(ctx, s)
			if err != nil {
				r.Log.Debug("cannot fetch the discovery of an extension server", "apiservice", s.Name, "err", err)
				return
			}
			results[i] = &remoteVersion{service: s, at: time.Now(), fetched: true, resources: res}
		})
	}
	wg.Wait()

	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range due {
		if results[i] != nil {
			r.fetched[s.Name] = results[i]
			continue
		}
		// A failure keeps what was fetched before, stale (upstream's
		// freshness); one never fetched stays out.
		next := remoteVersion{service: s, at: time.Now(), failed: true}
		if prev, ok := r.fetched[s.Name]; ok {
			next.fetched, next.resources = prev.fetched, prev.resources
		}
		r.fetched[s.Name] = &next
	}
	groups := r.render()
	if !equalGroups(groups, r.groups) {
		r.groups = groups
		r.gen.Add(1)
	}
}

// fetch reads the APIResourceList of s's group/version through the
// proxy.
func (r *RemoteDiscovery) fetch(ctx context.Context, s *apiregistrationv1.APIService) ([]metav1.APIResource, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(r.Timeout, 10*time.Second))
	defer cancel()
	path := "/apis/" + s.Spec.Group + "/" + s.Spec.Version
	req, err := http.NewRequestWithContext(genericrequest.WithUser(ctx, discoveryUser), http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	w := &memWriter{header: http.Header{}}
	r.Proxy.ServeHTTP(w, req)
	if w.status != http.StatusOK {
		return nil, fmt.Errorf("cannot fetch %s: status %d: %s", path, w.status, strings.TrimSpace(string(w.body.Bytes()[:min(w.body.Len(), 200)])))
	}
	if w.over {
		return nil, fmt.Errorf("cannot fetch %s: larger than %d bytes", path, maxDiscoveryBytes)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(w.body.Bytes(), &list); err != nil {
		return nil, fmt.Errorf("cannot fetch %s: %w", path, err)
	}
	if list.GroupVersion != s.Spec.Group+"/"+s.Spec.Version {
		return nil, fmt.Errorf("cannot fetch %s: it describes %q", path, list.GroupVersion)
	}
	return list.APIResources, nil
}

// render orders what was fetched into groups.
func (r *RemoteDiscovery) render() []discovery.RemoteGroup {
	var services []*apiregistrationv1.APIService
	for _, f := range r.fetched {
		if f.fetched {
			services = append(services, f.service)
		}
	}
	var out []discovery.RemoteGroup
	for _, group := range helper.SortedByGroupAndVersion(services) {
		g := discovery.RemoteGroup{Name: group[0].Spec.Group}
		for _, s := range group {
			f := r.fetched[s.Name]
			g.Versions = append(g.Versions, discovery.RemoteVersion{Version: s.Spec.Version, Resources: f.resources, Stale: f.failed})
		}
		out = append(out, g)
	}
	return out
}

func equalGroups(a, b []discovery.RemoteGroup) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// Remote returns the non-local APIServices, by name.
func (s *Services) Remote() []*apiregistrationv1.APIService {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*apiregistrationv1.APIService
	for _, a := range s.indexLocked() {
		if a.Spec.Service != nil {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// memWriter is the response of a fetch through the proxy, held in
// memory up to maxDiscoveryBytes.
type memWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
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
	if w.body.Len()+len(p) > maxDiscoveryBytes {
		w.over = true
		return 0, io.ErrShortWrite
	}
	return w.body.Write(p)
}

// Flush is a no-op: the reverse proxy flushes as it copies.
func (w *memWriter) Flush() {}
