package aggregator

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
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
	Proxy    *Proxy
	// Refresh fetches every version again this often; default 1m.
	Refresh time.Duration
	// Poll looks for changed APIServices this often; default 1s.
	Poll time.Duration
	// Timeout bounds one fetch; default 10s.
	Timeout time.Duration
	Log     *slog.Logger

	gen     atomic.Uint64
	fetched perService[[]metav1.APIResource] // used by Sync alone
	mu      sync.Mutex                       // guards groups
	groups  []discovery.RemoteGroup
}

// Generation changes whenever Groups would return something else.
func (r *RemoteDiscovery) Generation() uint64 { return r.gen.Load() }

// Groups returns the extension servers' groups in discovery's order.
func (r *RemoteDiscovery) Groups() []discovery.RemoteGroup {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.groups
}

// Run keeps the groups until ctx ends.
func (r *RemoteDiscovery) Run(ctx context.Context) {
	every(ctx, cmp.Or(r.Poll, time.Second), r.Sync)
}

// every calls f at once and then every period until ctx ends.
func every(ctx context.Context, period time.Duration, f func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync fetches the versions whose APIService is new or changed, or
// whose time is up (Refresh, or retryFailed after a failure), and
// renders the groups again when anything differs. Calls must not
// overlap.
func (r *RemoteDiscovery) Sync(ctx context.Context) {
	if !r.fetched.sync(ctx, r.Services.Remote(), cmp.Or(r.Refresh, time.Minute), r.Log, "discovery", r.fetch) {
		return
	}
	groups := r.render()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !equalGroups(groups, r.groups) {
		r.groups = groups
		r.gen.Add(1)
	}
}

// fetch reads the APIResourceList of s's group/version through the
// proxy.
func (r *RemoteDiscovery) fetch(ctx context.Context, s *apiregistrationv1.APIService, _ []metav1.APIResource) ([]metav1.APIResource, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(r.Timeout, 10*time.Second))
	defer cancel()
	path := "/apis/" + s.Spec.Group + "/" + s.Spec.Version
	status, _, body, err := getThrough(ctx, r.Proxy, s, discoveryUser, path, http.Header{"Accept": {"application/json"}}, maxDiscoveryBytes)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, statusError(path, status, body)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("cannot fetch %s: %w", path, err)
	}
	if list.GroupVersion != s.Spec.Group+"/"+s.Spec.Version {
		return nil, fmt.Errorf("cannot fetch %s: it describes %q", path, list.GroupVersion)
	}
	return list.APIResources, nil
}

// render orders what was fetched into groups.
func (r *RemoteDiscovery) render() []discovery.RemoteGroup {
	var out []discovery.RemoteGroup
	for _, group := range helper.SortedByGroupAndVersion(r.fetched.held()) {
		g := discovery.RemoteGroup{Name: group[0].Spec.Group}
		for _, s := range group {
			f := r.fetched.get(s.Name)
			g.Versions = append(g.Versions, discovery.RemoteVersion{Version: s.Spec.Version, Resources: f.value, Stale: f.failed})
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
