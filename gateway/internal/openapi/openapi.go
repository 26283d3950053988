// Package openapi serves the OpenAPI documents kubectl and client-go read:
// /openapi/v3 (the index of group/version documents, each addressed with a
// content hash), /openapi/v3/<api|apis/group>/<version> (paths with their
// operations and the schemas of every type they use) and /openapi/v2 (the
// schemas only, JSON or protobuf).
//
// The Kubernetes OpenAPI definitions live in k8s.io/kubernetes and cannot
// be imported, so the schemas are built by reflection over the k8s.io/api
// Go types the gateway decodes into: field names and types from the Go
// structure and JSON tags, descriptions from the generated SwaggerDoc
// methods, patch strategies and merge keys from the patchStrategy and
// patchMergeKey tags, list and map types from the server-side apply schema
// client-go ships. That is what kubectl apply needs to compute a strategic
// merge patch and kubectl explain needs to describe fields. Unlike
// kube-apiserver's, the schemas publish no "required" lists, enum values or
// defaults: those come from +optional/+enum/+default comment markers that
// do not survive compilation, and a wrong "required" would make kubectl's
// client-side validation reject valid objects.
//
// Every document is rendered into ready-to-send bytes: in New, and again in
// the background after the registry changed (a custom resource or an
// aggregated API came or went; requests get the previous documents until
// then), when hashes and ETags change with the content.
package openapi

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"github.com/munnerz/goautoneg"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kgate/kgate/storage/registry"
)

// Content types of the documents.
const (
	contentJSON          = "application/json"
	contentV2Protobuf    = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	contentV2ProtobufOld = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	contentV3Protobuf    = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	contentV3ProtobufOld = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
	v3Prefix             = "/openapi/v3/"
	documentTitle        = "Kubernetes"
)

// Response is one ready-to-send answer. Body is shared: callers must not
// modify it.
type Response struct {
	Status      int
	ContentType string
	Body        []byte
	// ETag is the quoted entity tag of the document; like kube-apiserver
	// the router sends it and answers 304 Not Modified when NotModified
	// says the client holds it. Responses that depend on Accept also get
	// "Vary: Accept".
	ETag string
	// Location is the target of a 301 redirect: a group/version document
	// requested with a stale hash moved to its current hash.
	Location string
	// Immutable is set when a group/version document was requested with
	// its current hash: the router sends "Cache-Control: public, immutable"
	// and an Expires header one year ahead, as kube-apiserver does.
	Immutable bool
}

// NotModified reports whether a request whose If-None-Match header is
// ifNoneMatch already holds the document r carries.
func (r Response) NotModified(ifNoneMatch string) bool {
	return r.ETag != "" && r.Status == http.StatusOK && ifNoneMatch == r.ETag
}

// document is one OpenAPI document, ready to send.
type document struct {
	json, protobuf []byte
	hash           string // upper-case hex SHA-512 of json, as kube-apiserver
	etag           string // hash, quoted
}

func newDocument(body, pb []byte) document {
	h := fmt.Sprintf("%X", sha512.Sum512(body))
	return document{json: body, protobuf: pb, hash: h, etag: strconv.Quote(h)}
}

// Documents serves the OpenAPI documents of a registry that may change.
// It is safe for concurrent use.
type Documents struct {
	reg *registry.Registry
	v   version.Info

	cur atomic.Pointer[rendered]

	mu        sync.Mutex // guards rendering and closed
	rendering bool       // a render goroutine runs
	closed    bool
	wg        sync.WaitGroup // the render goroutine
}

// rendered is the documents of one registry generation.
type rendered struct {
	gen  uint64
	root document            // /openapi/v3 (JSON only)
	v3   map[string]document // by "api/v1", "apis/apps/v1", "apis/apps", ...
	v2   document
	err  error // rendering gen failed: the documents are the previous ones
}

// New builds the OpenAPI v3 document of every group/version in reg (and
// of the group, /api, /apis and /version endpoints), their index, and the
// OpenAPI v2 document holding every definition; v names the Kubernetes
// version in the documents' info. The documents follow reg's later
// changes; Close stops following.
func New(reg *registry.Registry, v version.Info) (*Documents, error) {
	s := reg.Snapshot()
	r, err := render(s, v)
	if err != nil {
		return nil, err
	}
	r.gen = s.Generation()
	o := &Documents{reg: reg, v: v}
	o.cur.Store(r)
	return o, nil
}

// current returns the latest rendered documents. When the registry has
// changed since, it starts rendering its current generation in the
// background: rendering every schema takes seconds, too long to hold a
// request, so requests get the previous documents until then, as
// kube-apiserver's OpenAPI follows its CRDs a moment later.
func (o *Documents) current() *rendered {
	c := o.cur.Load()
	if c.gen >= o.reg.Generation() {
		return c
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rendering || o.closed {
		return c
	}
	o.rendering = true
	o.wg.Go(o.follow)
	return c
}

// follow renders until the documents match the registry's generation.
func (o *Documents) follow() {
	for {
		s := o.reg.Snapshot()
		c := o.cur.Load()
		o.mu.Lock()
		if c.gen >= s.Generation() || o.closed {
			o.rendering = false
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		r, err := render(s, o.v)
		if err != nil {
			r = &rendered{root: c.root, v3: c.v3, v2: c.v2, err: err}
		}
		r.gen = s.Generation()
		o.cur.Store(r)
	}
}

// Close waits for a render in progress and starts no other.
func (o *Documents) Close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.wg.Wait()
}

// Rendered returns the registry generation the served documents
// describe.
func (o *Documents) Rendered() uint64 { return o.current().gen }

// Err returns why the documents could not follow the registry's latest
// change, or nil.
func (o *Documents) Err() error { return o.current().err }

// render renders the documents of the snapshot reg.
func render(reg *registry.Snapshot, v version.Info) (*rendered, error) {
	scheme := reg.Scheme()
	lists, err := newListTypes(scheme)
	if err != nil {
		return nil, err
	}
	gvks, err := kindsByType(reg)
	if err != nil {
		return nil, err
	}
	defs := newDefinitions(v3, gvks, lists)
	meta := metaNames{
		deleteOptions: defs.define(reflect.TypeFor[metav1.DeleteOptions]()),
		status:        defs.define(reflect.TypeFor[metav1.Status]()),
		patch:         defs.define(reflect.TypeFor[metav1.Patch]()),
		watchEvent:    defs.define(reflect.TypeFor[metav1.WatchEvent]()),
		resourceList:  defs.define(reflect.TypeFor[metav1.APIResourceList]()),
	}

	o := &rendered{v3: map[string]document{}}
	docs := map[string]*spec3.OpenAPI{}
	for _, g := range reg.Groups() {
		for _, ver := range g.Versions {
			gv := schema.GroupVersion{Group: g.Group, Version: ver}
			id, tag := versionNames(gv)
			b := newPathsBuilder(defs, scheme, id, tag)
			for _, res := range reg.GroupVersionResources(g.Group, ver) {
				if err := b.resource(res, meta); err != nil {
					return nil, err
				}
			}
			for _, name := range []string{meta.deleteOptions, meta.status, meta.patch, meta.watchEvent} {
				b.roots[name] = true
			}
			key := "apis/" + g.Group + "/" + ver
			if g.Group == "" {
				key = "api/" + ver
			}
			b.apiResources("/"+key, meta)
			docs[key] = b.document(documentTitle, v.GitVersion)
		}
		if g.Group != "" {
			id, tag := groupNames(g.Group)
			b := newPathsBuilder(defs, scheme, id, tag)
			b.simple("/apis/"+g.Group+"/", "get"+id+"APIGroup", "get information of a group", reflect.TypeFor[metav1.APIGroup]())
			docs["apis/"+g.Group] = b.document(documentTitle, v.GitVersion)
		}
	}
	core := newPathsBuilder(defs, scheme, "Core", "core")
	core.simple("/api/", "getCoreAPIVersions", "get available API versions", reflect.TypeFor[metav1.APIVersions]())
	docs["api"] = core.document(documentTitle, v.GitVersion)
	apis := newPathsBuilder(defs, scheme, "", "apis")
	apis.simple("/apis/", "getAPIVersions", "get available API versions", reflect.TypeFor[metav1.APIGroupList]())
	docs["apis"] = apis.document(documentTitle, v.GitVersion)
	ver := newPathsBuilder(defs, scheme, "", "version")
	ver.simple("/version/", "getCodeVersion", "get the version information for this server", reflect.TypeFor[version.Info]())
	docs["version"] = ver.document(documentTitle, v.GitVersion)

	index := indexDocument{Paths: map[string]indexEntry{}}
	for key, doc := range docs {
		body, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("cannot encode OpenAPI v3 document %s: %w", key, err)
		}
		pb, err := v3Protobuf(body)
		if err != nil {
			return nil, fmt.Errorf("cannot encode OpenAPI v3 document %s: %w", key, err)
		}
		d := newDocument(body, pb)
		o.v3[key] = d
		index.Paths[key] = indexEntry{ServerRelativeURL: hashedURL(key, d.hash)}
	}
	body, err := json.Marshal(index)
	if err != nil {
		return nil, fmt.Errorf("cannot encode OpenAPI v3 index: %w", err)
	}
	o.root = newDocument(body, nil)

	if o.v2, err = v2Document(defs, gvks, lists, v); err != nil {
		return nil, err
	}
	return o, nil
}

// indexDocument is the /openapi/v3 index (kube-openapi's
// handler3.OpenAPIV3Discovery).
type indexDocument struct {
	Paths map[string]indexEntry `json:"paths"`
}

type indexEntry struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

// hashedURL is a group/version document's address in the index.
func hashedURL(key, hash string) string {
	return v3Prefix + key + "?" + url.Values{"hash": {hash}}.Encode()
}

func v3Protobuf(body []byte) ([]byte, error) {
	doc, err := openapiv3.ParseDocument(body)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(doc)
}

// v2Document renders the OpenAPI v2 document: every definition the v3
// documents use, in the v2 dialect, and no paths. kubectl reads it for
// client-side validation (only where it cannot rely on the server's
// fieldValidation: kind List documents, create-only kinds) and for
// "kubectl explain --output plaintext-openapiv2"; a 404 here would make
// "kubectl apply -f" of a List fail.
func v2Document(defs3 *definitions, gvks map[reflect.Type][]schema.GroupVersionKind, lists *listTypes, v version.Info) (document, error) {
	defs := newDefinitions(v2, gvks, lists)
	types := make([]reflect.Type, 0, len(defs3.names))
	for t := range defs3.names {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return defs3.names[types[i]] < defs3.names[types[j]] })
	for _, t := range types {
		defs.define(t)
	}
	swagger := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: documentTitle, Version: v.GitVersion}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions{},
		SecurityDefinitions: spec.SecurityDefinitions{"BearerToken": &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Description: "Bearer Token authentication", Name: "authorization", In: "header",
		}}},
		Security: []map[string][]string{{"BearerToken": {}}},
	}}
	for name, s := range defs.schemas {
		swagger.Definitions[name] = *s
	}
	body, err := json.Marshal(swagger)
	if err != nil {
		return document{}, fmt.Errorf("cannot encode OpenAPI v2 document: %w", err)
	}
	doc, err := openapiv2.ParseDocument(body)
	if err != nil {
		return document{}, fmt.Errorf("cannot encode OpenAPI v2 document: %w", err)
	}
	pb, err := proto.MarshalOptions{Deterministic: true}.Marshal(doc)
	if err != nil {
		return document{}, fmt.Errorf("cannot encode OpenAPI v2 document: %w", err)
	}
	return newDocument(body, pb), nil
}

// kindsByType maps each Go type to the group/version/kinds it is served
// as: every kind the scheme registers in a served group/version (so
// DeleteOptions and WatchEvent carry one kind per group/version, as in
// kube-apiserver) and the kinds of subresources from other groups
// (autoscaling/v1 Scale, policy/v1 Eviction, ...).
func kindsByType(reg *registry.Snapshot) (map[reflect.Type][]schema.GroupVersionKind, error) {
	served := map[schema.GroupVersion]bool{}
	extra := map[schema.GroupVersionKind]bool{}
	for _, res := range reg.Resources() {
		served[res.GVR().GroupVersion()] = true
		for _, sub := range res.Subresources {
			if gvk, _, ok := subresourceOperations(sub, res.GVK()); ok {
				extra[gvk] = true
			}
		}
	}
	out := map[reflect.Type][]schema.GroupVersionKind{}
	for gvk, t := range reg.Scheme().AllKnownTypes() {
		if served[gvk.GroupVersion()] || extra[gvk] {
			out[t] = append(out[t], gvk)
		}
	}
	for gvk := range extra {
		if !reg.Scheme().Recognizes(gvk) {
			return nil, fmt.Errorf("cannot describe subresource kind %v: unknown to the scheme", gvk)
		}
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.Group != b.Group {
				return a.Group < b.Group
			}
			if a.Version != b.Version {
				return a.Version < b.Version
			}
			return a.Kind < b.Kind
		})
	}
	return out, nil
}

// Serve returns the document at path ("/openapi/v2", "/openapi/v3" or
// "/openapi/v3/apis/apps/v1"). hash is the request's "hash" query
// parameter (empty if absent), accept its Accept header. A group/version
// document requested with a stale hash is a 301 to its current address; a
// representation the Accept header excludes is a 406 with an empty body,
// as kube-apiserver answers. ok is false when path is not an OpenAPI
// document; the router answers those (404).
func (d *Documents) Serve(path, hash, accept string) (resp Response, ok bool) {
	o := d.current()
	if len(path) > len(v3Prefix) {
		path = strings.TrimSuffix(path, "/")
	}
	switch path {
	case "/openapi/v2":
		return negotiate(o.v2, accept, contentV2Protobuf, contentV2ProtobufOld), true
	case "/openapi/v3", "/openapi/v3/":
		return Response{Status: http.StatusOK, ContentType: contentJSON, Body: o.root.json, ETag: o.root.etag}, true
	}
	key, found := strings.CutPrefix(path, v3Prefix)
	if !found {
		return Response{}, false
	}
	doc, found := o.v3[key]
	if !found {
		return Response{}, false
	}
	resp = negotiate(doc, accept, contentV3Protobuf, contentV3ProtobufOld)
	if resp.Status != http.StatusOK || hash == "" {
		return resp, true
	}
	if hash != doc.hash {
		return Response{Status: http.StatusMovedPermanently, Location: hashedURL(key, doc.hash)}, true
	}
	resp.Immutable = true
	return resp, true
}

// negotiate picks JSON or protobuf the way kube-openapi's handlers do: the
// first Accept clause (by preference) matching JSON, the protobuf media
// type or its deprecated spelling; "*/*" when Accept is empty.
func negotiate(doc document, accept, protobufType, protobufOld string) Response {
	if accept == "" || accept == contentJSON || accept == "*/*" {
		return Response{Status: http.StatusOK, ContentType: contentJSON, Body: doc.json, ETag: doc.etag}
	}
	candidates := []struct{ mediaType, contentType string }{
		{contentJSON, contentJSON},
		{protobufType, protobufType},
		{protobufOld, protobufType},
	}
	for _, clause := range goautoneg.ParseAccept(accept) {
		for _, c := range candidates {
			typ, sub, _ := strings.Cut(c.mediaType, "/")
			if (clause.Type == typ || clause.Type == "*") && (clause.SubType == sub || clause.SubType == "*") {
				body := doc.json
				if c.contentType != contentJSON {
					body = doc.protobuf
				}
				return Response{Status: http.StatusOK, ContentType: c.contentType, Body: body, ETag: doc.etag}
			}
		}
	}
	return Response{Status: http.StatusNotAcceptable}
}
