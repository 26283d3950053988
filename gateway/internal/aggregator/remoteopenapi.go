package aggregator

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	"k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/openapiconv"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kgate/kgate/gateway/internal/openapi"
)

// maxOpenAPIBytes bounds one OpenAPI document of an extension server.
const maxOpenAPIBytes = 32 << 20

// openAPIUser is who asks extension servers for their OpenAPI documents,
// as kube-aggregator's OpenAPI downloaders (no group: the server adds
// system:authenticated, which system:discovery lets read /openapi/*).
var openAPIUser = &user.DefaultInfo{Name: "system:aggregator"}

// RemoteOpenAPI is what each gateway knows of the extension servers'
// OpenAPI documents (openapi.Remote), as kube-aggregator's OpenAPI v2
// and v3 controllers learn them, through Proxy as system:aggregator,
// when an APIService appears or changes and again every Refresh:
//   - v2: the server's /openapi/v2 (conditional on its ETag), cut down
//     to the paths under its APIService's /apis/<group>/<version>/ and
//     the definitions they use (kube-openapi's
//     FilterSpecByPathsWithoutSideEffects), merged after kgate's own in
//     priority order;
//   - v3: the documents its /openapi/v3 index lists for the APIService's
//     group/version and group, fetched at the address the index gives
//     (fetched again only when that address, which carries the
//     document's hash, changes); a server without /openapi/v3 (404) gets
//     its v2 paths converted (kube-openapi's openapiconv), as upstream
//     serves such "legacy" APIServices.
//
// A server that stops answering keeps its last documents; one never
// fetched adds none.
type RemoteOpenAPI struct {
	Services *Services
	Proxy    *Proxy
	// Refresh fetches every server's documents again this often;
	// default 1m, as upstream.
	Refresh time.Duration
	// Poll looks for changed APIServices this often; default 1s.
	Poll time.Duration
	// Timeout bounds one APIService's fetches; default 30s.
	Timeout time.Duration
	Log     *slog.Logger

	gen     atomic.Uint64
	fetched perService[*remoteSpec] // used by Sync alone
	mu      sync.Mutex              // guards specs and print
	specs   openapi.RemoteSpecs
	print   string // of what specs were rendered from
}

// remoteSpec is what was fetched for one APIService.
type remoteSpec struct {
	v2     *spec.Swagger // its paths alone; nil when the server has none
	v2ETag string        // for If-None-Match
	v2Sum  string        // of the document v2 was cut from
	v3     map[string]remoteV3
}

// remoteV3 is one v3 document and the address it came from.
type remoteV3 struct {
	url  string
	body []byte
}

// Generation changes whenever Specs would return something else.
func (r *RemoteOpenAPI) Generation() uint64 { return r.gen.Load() }

// Specs returns the extension servers' documents.
func (r *RemoteOpenAPI) Specs() openapi.RemoteSpecs {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.specs
}

// Run keeps the documents until ctx ends.
func (r *RemoteOpenAPI) Run(ctx context.Context) {
	every(ctx, cmp.Or(r.Poll, time.Second), r.Sync)
}

// Sync fetches the documents of the APIServices that are new, changed
// or due, and renders the specs again when any document changed. Calls
// must not overlap.
func (r *RemoteOpenAPI) Sync(ctx context.Context) {
	if !r.fetched.sync(ctx, r.Services.Remote(), cmp.Or(r.Refresh, time.Minute), r.Log, "openapi", r.fetch) {
		return
	}
	var order []*apiregistrationv1.APIService
	for _, group := range helper.SortedByGroupAndVersion(r.fetched.held()) {
		order = append(order, group...)
	}
	var (
		specs = openapi.RemoteSpecs{V3: map[string][]byte{}}
		print strings.Builder
	)
	for _, s := range order {
		f := r.fetched.get(s.Name).value
		fmt.Fprintf(&print, "%s %s;", s.Name, f.v2Sum)
		if f.v2 != nil {
			specs.V2 = append(specs.V2, f.v2)
		}
		keys := make([]string, 0, len(f.v3))
		for key := range f.v3 {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			fmt.Fprintf(&print, " %s=%s;", key, f.v3[key].url)
			if _, taken := specs.V3[key]; !taken {
				specs.V3[key] = f.v3[key].body
			}
		}
		print.WriteByte('\n')
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if print.String() != r.print {
		r.specs, r.print = specs, print.String()
		r.gen.Add(1)
	}
}

// fetch reads s's documents through the proxy; prev is what was fetched
// before (nil at first).
func (r *RemoteOpenAPI) fetch(ctx context.Context, s *apiregistrationv1.APIService, prev *remoteSpec) (*remoteSpec, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(r.Timeout, 30*time.Second))
	defer cancel()
	out := &remoteSpec{v3: map[string]remoteV3{}}
	if err := r.fetchV2(ctx, s, prev, out); err != nil {
		return nil, err
	}
	if err := r.fetchV3(ctx, s, prev, out); err != nil {
		return nil, err
	}
	return out, nil
}

// fetchV2 fetches s's /openapi/v2 into out.v2, unless it is unchanged
// since prev.
func (r *RemoteOpenAPI) fetchV2(ctx context.Context, s *apiregistrationv1.APIService, prev, out *remoteSpec) error {
	const path = "/openapi/v2"
	h := http.Header{"Accept": {"application/json"}}
	if prev != nil && prev.v2ETag != "" {
		h.Set("If-None-Match", prev.v2ETag)
	}
	status, header, body, err := getThrough(ctx, r.Proxy, s, openAPIUser, path, h, maxOpenAPIBytes)
	switch {
	case err != nil:
		return err
	case status == http.StatusNotModified && prev != nil:
		out.v2, out.v2ETag, out.v2Sum = prev.v2, prev.v2ETag, prev.v2Sum
		return nil
	case status == http.StatusNotFound:
		return nil // a server without OpenAPI v2: nothing to merge
	case status != http.StatusOK:
		return statusError(path, status, body)
	}
	var whole spec.Swagger
	if err := json.Unmarshal(body, &whole); err != nil {
		return fmt.Errorf("cannot fetch %s: %w", path, err)
	}
	out.v2 = aggregator.FilterSpecByPathsWithoutSideEffects(&whole, []string{"/apis/" + s.Spec.Group + "/" + s.Spec.Version + "/"})
	out.v2ETag = header.Get("Etag")
	out.v2Sum = fmt.Sprintf("%x", sha256.Sum256(body))
	return nil
}

// fetchV3 fetches the v3 documents of s's group/version and group into
// out.v3, each unless its address is unchanged since prev; a server
// without /openapi/v3 gets out.v2 converted.
func (r *RemoteOpenAPI) fetchV3(ctx context.Context, s *apiregistrationv1.APIService, prev, out *remoteSpec) error {
	const path = "/openapi/v3"
	gv := "apis/" + s.Spec.Group + "/" + s.Spec.Version
	status, _, body, err := getThrough(ctx, r.Proxy, s, openAPIUser, path, http.Header{"Accept": {"application/json"}}, maxOpenAPIBytes)
	switch {
	case err != nil:
		return err
	case status == http.StatusNotFound:
		if out.v2 == nil {
			return nil
		}
		doc, err := json.Marshal(openapiconv.ConvertV2ToV3(out.v2))
		if err != nil {
			return fmt.Errorf("cannot convert the OpenAPI v2 document of %s: %w", s.Name, err)
		}
		out.v3[gv] = remoteV3{url: "v2:" + out.v2Sum, body: doc}
		return nil
	case status != http.StatusOK:
		return statusError(path, status, body)
	}
	var index handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(body, &index); err != nil {
		return fmt.Errorf("cannot fetch %s: %w", path, err)
	}
	for _, key := range []string{gv, "apis/" + s.Spec.Group} {
		entry, ok := index.Paths[key]
		if !ok {
			continue
		}
		url := entry.ServerRelativeURL
		if !strings.HasPrefix(url, "/openapi/v3/"+key) {
			return fmt.Errorf("cannot fetch %s: it lists %s at %q", path, key, url)
		}
		if prev != nil && prev.v3[key].url == url {
			out.v3[key] = prev.v3[key]
			continue
		}
		status, _, doc, err := getThrough(ctx, r.Proxy, s, openAPIUser, url, http.Header{"Accept": {"application/json"}}, maxOpenAPIBytes)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return statusError(url, status, doc)
		}
		var probe struct {
			OpenAPI string `json:"openapi"`
		}
		if err := json.Unmarshal(doc, &probe); err != nil || !strings.HasPrefix(probe.OpenAPI, "3.") {
			return fmt.Errorf("cannot fetch %s: not an OpenAPI v3 document (%v)", url, err)
		}
		out.v3[key] = remoteV3{url: url, body: doc}
	}
	return nil
}
