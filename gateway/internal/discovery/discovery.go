// Package discovery serves everything kubectl and client-go read to learn
// what the API offers: /api (APIVersions), /apis (APIGroupList), /apis/<g>
// (APIGroup), /api/v1 and /apis/<g>/<v> (APIResourceList), the aggregated
// discovery documents (apidiscovery.k8s.io/v2 APIGroupDiscoveryList) on
// /api and /apis, and /version.
//
// Every document is rendered from the resource registry, and from the
// groups of extension API servers (a Remote, set with SetRemote), into
// ready-to-send JSON, YAML and protobuf bytes: in New, and again on the
// first request after either changed; Serve only negotiates the Accept
// header (precomputed for the headers clients really send) and returns a
// slice of those bytes.
package discovery

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage/registry"
)

// Response is one ready-to-send answer. Body is shared: callers must not
// modify it.
type Response struct {
	Status      int
	ContentType string
	Body        []byte
	// ETag is set (quoted) on aggregated discovery answers. Like
	// kube-apiserver, the router then also sends "Vary: Accept" and
	// "Cache-Control: public", and answers 304 Not Modified with no body
	// when NotModified reports the client already has this document.
	ETag string
}

// NotModified reports whether a request whose If-None-Match header is
// ifNoneMatch already holds the document r carries.
func (r Response) NotModified(ifNoneMatch string) bool {
	return r.ETag != "" && ifNoneMatch == r.ETag
}

// Discovery serves the discovery documents of a registry that may change.
// It is safe for concurrent use.
type Discovery struct {
	reg           *registry.Registry
	negotiated    map[negotiationKey]negotiated
	version       Response
	notAcceptable Response
	remote        atomic.Pointer[Remote]

	mu  sync.Mutex // serializes renders
	cur atomic.Pointer[rendered]
}

// Remote is the groups extension API servers serve, as the aggregator
// found them in their own discovery.
type Remote interface {
	// Generation changes whenever Groups would return something else.
	Generation() uint64
	// Groups are the extension servers' groups, in discovery's order.
	Groups() []RemoteGroup
}

// RemoteGroup is one group of extension servers.
type RemoteGroup struct {
	Name string
	// Versions, the preferred first.
	Versions []RemoteVersion
}

// RemoteVersion is one group/version of an extension server and its
// resources; Stale when its server stopped answering since they were
// fetched (upstream's freshness).
type RemoteVersion struct {
	Version   string
	Resources []metav1.APIResource
	Stale     bool
}

// rendered is the documents of one registry and remote generation.
type rendered struct {
	gen, remoteGen uint64
	docs           map[string]*document // by URL path, without trailing slash
	err            error                // rendering gen failed: docs are the previous ones
}

// document is one discovery endpoint in every format.
type document struct {
	plain encoded
	// aggregated is the APIGroupDiscoveryList served on /api and /apis
	// when the client asks for it; nil elsewhere.
	aggregated *encoded
	etag       string
}

// New renders the discovery documents of every group, version and
// resource in reg, and /version from v. It fails when reg lists a
// subresource discovery cannot describe or when v.GitVersion is not a
// semantic version agreeing with v.Major and v.Minor. The documents
// follow reg's later changes.
func New(reg *registry.Registry, v version.Info) (*Discovery, error) {
	d := &Discovery{reg: reg, negotiated: precompute()}
	body, err := versionBody(v)
	if err != nil {
		return nil, err
	}
	d.version = Response{Status: http.StatusOK, ContentType: runtime.ContentTypeJSON, Body: body}

	if d.notAcceptable, err = notAcceptable(); err != nil {
		return nil, err
	}
	s := reg.Snapshot()
	docs, err := render(s, nil)
	if err != nil {
		return nil, err
	}
	d.cur.Store(&rendered{gen: s.Generation(), docs: docs})
	return d, nil
}

// SetRemote adds the extension servers' groups to the documents, from
// the next request on.
func (d *Discovery) SetRemote(r Remote) {
	d.remote.Store(&r)
	d.mu.Lock()
	defer d.mu.Unlock()
	c := *d.cur.Load()
	c.remoteGen = r.Generation() - 1 // rendered again on the next request
	d.cur.Store(&c)
}

// current returns the documents of the registry's and the remote
// groups' current generations, rendering them when either changed since
// the last render.
func (d *Discovery) current() *rendered {
	s := d.reg.Snapshot()
	var (
		remote    Remote
		remoteGen uint64
	)
	if r := d.remote.Load(); r != nil {
		remote = *r
		remoteGen = remote.Generation()
	}
	fresh := func(c *rendered) bool { return c.gen >= s.Generation() && c.remoteGen == remoteGen }
	if c := d.cur.Load(); fresh(c) {
		return c
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.cur.Load()
	if fresh(c) {
		return c // rendered by a concurrent request
	}
	var groups []RemoteGroup
	if remote != nil {
		groups = remote.Groups()
	}
	docs, err := render(s, groups)
	if err != nil {
		// A resource discovery cannot describe: keep serving what we
		// had rather than documents that lie.
		c = &rendered{gen: s.Generation(), remoteGen: remoteGen, docs: c.docs, err: err}
	} else {
		c = &rendered{gen: s.Generation(), remoteGen: remoteGen, docs: docs}
	}
	d.cur.Store(c)
	return c
}

// Err returns why the documents could not follow the registry's latest
// change, or nil.
func (d *Discovery) Err() error { return d.current().err }

// render renders the documents of every group, version and resource of
// s, then of the remote groups s does not serve itself: their group
// documents and their place in /apis, after the local groups (extension
// servers' priorities are below the built-ins' and CRDs'). Their version
// documents are the extension servers' own, proxied.
func render(s *registry.Snapshot, remote []RemoteGroup) (map[string]*document, error) {
	docs := map[string]*document{}
	enc := newEncoders()
	var (
		legacy     *apidiscoveryv2.APIGroupDiscovery // the core group, if served
		groups     []apidiscoveryv2.APIGroupDiscovery
		groupsList = &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	)
	for _, g := range s.Groups() {
		agg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Group}}
		var versions []metav1.GroupVersionForDiscovery
		for _, ver := range g.Versions {
			gv := schema.GroupVersion{Group: g.Group, Version: ver}
			list, err := apiResources(s, g.Group, ver)
			if err != nil {
				return nil, err
			}
			rl := &metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: gv.String(),
				APIResources: list,
			}
			path := "/apis/" + g.Group + "/" + ver
			if g.Group == "" {
				// kube-apiserver serves the legacy group without apiVersion.
				rl.APIVersion = ""
				path = "/api/" + ver
			}
			if err := add(docs, enc, path, rl, nil); err != nil {
				return nil, err
			}
			versions = append(versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: ver})
			agg.Versions = append(agg.Versions, apidiscoveryv2.APIVersionDiscovery{
				Version:   ver,
				Resources: aggregatedResources(list),
				Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
			})
		}
		if len(versions) == 0 {
			continue
		}
		if g.Group == "" {
			legacy = &agg
			continue
		}
		group := metav1.APIGroup{Name: g.Group, Versions: versions, PreferredVersion: versions[0]}
		groupsList.Groups = append(groupsList.Groups, group)
		group.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		if err := add(docs, enc, "/apis/"+g.Group, &group, nil); err != nil {
			return nil, err
		}
		groups = append(groups, agg)
	}
	local := map[string]bool{}
	for _, g := range s.Groups() {
		local[g.Group] = true
	}
	for _, g := range remote {
		if local[g.Name] || g.Name == "" || len(g.Versions) == 0 {
			continue
		}
		agg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
		var versions []metav1.GroupVersionForDiscovery
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			versions = append(versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v.Version})
			freshness := apidiscoveryv2.DiscoveryFreshnessCurrent
			if v.Stale {
				freshness = apidiscoveryv2.DiscoveryFreshnessStale
			}
			agg.Versions = append(agg.Versions, apidiscoveryv2.APIVersionDiscovery{
				Version: v.Version, Resources: aggregatedResources(v.Resources), Freshness: freshness,
			})
		}
		group := metav1.APIGroup{Name: g.Name, Versions: versions, PreferredVersion: versions[0]}
		groupsList.Groups = append(groupsList.Groups, group)
		group.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		if err := add(docs, enc, "/apis/"+g.Name, &group, nil); err != nil {
			return nil, err
		}
		groups = append(groups, agg)
	}

	if legacy != nil {
		versions := &metav1.APIVersions{
			TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{},
		}
		for _, v := range legacy.Versions {
			versions.Versions = append(versions.Versions, v.Version)
		}
		if err := add(docs, enc, "/api", versions, []apidiscoveryv2.APIGroupDiscovery{*legacy}); err != nil {
			return nil, err
		}
	}
	if err := add(docs, enc, "/apis", groupsList, groups); err != nil {
		return nil, err
	}
	return docs, nil
}

// add renders the document at path: plain, and aggregated when agg is not
// nil.
func add(docs map[string]*document, enc *encoders, path string, plain runtime.Object, agg []apidiscoveryv2.APIGroupDiscovery) error {
	doc := &document{}
	var err error
	if doc.plain, err = enc.encode(plain); err != nil {
		return fmt.Errorf("cannot render %s: %w", path, err)
	}
	if agg != nil {
		list := &apidiscoveryv2.APIGroupDiscoveryList{
			TypeMeta: metav1.TypeMeta{Kind: aggregatedKind, APIVersion: apidiscoveryv2.SchemeGroupVersion.String()},
			Items:    agg,
		}
		body, err := enc.encode(list)
		if err != nil {
			return fmt.Errorf("cannot render aggregated %s: %w", path, err)
		}
		doc.aggregated = &body
		doc.etag = strconv.Quote(fmt.Sprintf("%X", sha512.Sum512(body[formatJSON])))
	}
	docs[path] = doc
	return nil
}

// Serve returns the discovery document at path in the representation the
// Accept header asks for: 200 with the document, or 406 with a Status when
// no served representation is acceptable. ok is false when path is not a
// discovery endpoint, including an unknown group or version; the router
// answers those (404).
func (d *Discovery) Serve(path, accept string) (resp Response, ok bool) {
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	if path == "/version" {
		return d.version, true
	}
	doc, found := d.current().docs[path]
	if !found {
		return Response{}, false
	}
	canAggregate := doc.aggregated != nil
	n, known := d.negotiated[negotiationKey{accept, canAggregate}]
	if !known {
		n.choice, n.ok = negotiate(accept, canAggregate)
	}
	switch {
	case !n.ok:
		return d.notAcceptable, true
	case n.choice.aggregated:
		return Response{
			Status:      http.StatusOK,
			ContentType: aggregatedMediaType(n.choice.format),
			Body:        doc.aggregated[n.choice.format],
			ETag:        doc.etag,
		}, true
	default:
		return Response{Status: http.StatusOK, ContentType: n.choice.format.mediaType(), Body: doc.plain[n.choice.format]}, true
	}
}

// notAcceptable renders kube-apiserver's answer when no representation
// matches the Accept header.
func notAcceptable() (Response, error) {
	var types []string
	for f := format(0); f < numFormats; f++ {
		types = append(types, f.mediaType())
	}
	status := apierror.Status(apierror.NotAcceptable(types), schema.GroupResource{}, "")
	body, err := json.MarshalIndent(status, "", "  ")
	if err != nil {
		return Response{}, fmt.Errorf("cannot encode status: %w", err)
	}
	return Response{Status: http.StatusNotAcceptable, ContentType: runtime.ContentTypeJSON, Body: body}, nil
}
