// Package openapi serves the OpenAPI documents kubectl and client-go read:
// /openapi/v3 (the index of group/version documents, each addressed with a
// content hash), /openapi/v3/<api|apis/group>/<version> (paths with their
// operations and the schemas of every type they use) and /openapi/v2 (the
// same paths and schemas in one Swagger 2.0 document, JSON or protobuf).
//
// The schemas are kube-apiserver's own (package defs: the definitions
// generated into k8s.io/kubernetes, with descriptions, required fields,
// defaults, enums, list and map types and patch strategies, tagged with
// x-kubernetes-group-version-kind), so kubectl explain, kubectl apply's
// strategic merge patch and client-side validation see what they see
// against kube-apiserver. The paths and operations of built-in resources
// are kgate's own, generated from the registry the way kube-apiserver's
// go-restful routes describe themselves (operation ids, parameters,
// responses, media types, x-kubernetes-action), and converted to the v2
// dialect for /openapi/v2. A custom resource's paths and schemas come from
// its CRD through apiextensions-apiserver's OpenAPI builder, v3 and v2,
// as kube-apiserver's apiextensions server publishes them (custom.go); a
// served kind with neither (a CRD the builder rejects) is described as an
// object with x-kubernetes-preserve-unknown-fields: clients then neither
// validate nor prune its fields. Extension API servers' documents (a
// Remote, set with SetRemote: the aggregator fetches them) join in as
// kube-aggregator merges them: their v2 paths and definitions after
// kgate's (kube-openapi's merge, renaming a conflicting definition), their
// v3 group/version documents in the index, never in place of kgate's own.
//
// Every document is rendered into ready-to-send bytes: in New, and again in
// the background after the registry or the remote documents changed (a
// custom resource or an aggregated API came or went; requests get the
// previous documents until then), when hashes and ETags change with the
// content.
package openapi

import (
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"github.com/munnerz/goautoneg"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kgate/kgate/gateway/internal/openapi/defs"
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
	// says the client holds it.
	ETag string
	// Vary is set on group/version documents, whose body depends on the
	// Accept header: the router sends "Vary: Accept".
	Vary bool
	// Location is the target of a 301 redirect: a group/version document
	// requested with a stale hash moved to its current hash.
	Location string
	// Immutable is set when a group/version document was requested with
	// its current hash: the router sends "Cache-Control: public, immutable"
	// and an Expires header one year ahead (ExpiresIn), as kube-apiserver
	// does.
	Immutable bool
}

// ExpiresIn is how far ahead an Immutable response expires.
const ExpiresIn = 365 * 24 * time.Hour

// NotModified reports whether a request whose If-None-Match header is
// ifNoneMatch already holds the document r carries: the header lists its
// entity tag (compared weakly) or is "*", as net/http's ServeContent,
// which kube-apiserver answers with, decides.
func (r Response) NotModified(ifNoneMatch string) bool {
	if r.ETag == "" || r.Status != http.StatusOK || ifNoneMatch == "" {
		return false
	}
	for tag := range strings.SplitSeq(ifNoneMatch, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == r.ETag {
			return true
		}
	}
	return false
}

// document is one OpenAPI document, ready to send.
type document struct {
	json []byte
	pb   *protobufForm // nil for the index, which is JSON only
	hash string        // upper-case hex SHA-512 of json, as kube-apiserver
	etag string        // hash, quoted
}

// protobufForm is a document's protobuf encoding, made on its first
// request, as kube-openapi's handlers do: parsing a document back from its
// JSON takes most of the rendering time, and most clients (client-go's
// OpenAPI v3 client, kubectl explain) read JSON.
type protobufForm struct {
	once   sync.Once
	encode func([]byte) ([]byte, error)
	body   []byte
	err    error
}

func newDocument(body []byte, encode func([]byte) ([]byte, error)) document {
	h := fmt.Sprintf("%X", sha512.Sum512(body))
	d := document{json: body, hash: h, etag: strconv.Quote(h)}
	if encode != nil {
		d.pb = &protobufForm{encode: encode}
	}
	return d
}

// protobuf returns the document's protobuf encoding.
func (d document) protobuf() ([]byte, error) {
	if d.pb == nil {
		return nil, errors.New("no protobuf form")
	}
	d.pb.once.Do(func() { d.pb.body, d.pb.err = d.pb.encode(d.json) })
	return d.pb.body, d.pb.err
}

// Documents serves the OpenAPI documents of a registry that may change.
// It is safe for concurrent use.
type Documents struct {
	reg *registry.Registry
	v   version.Info

	cur    atomic.Pointer[rendered]
	remote atomic.Pointer[Remote]

	mu        sync.Mutex // guards rendering and closed
	rendering bool       // a render goroutine runs
	closed    bool
	wg        sync.WaitGroup // the render goroutine
}

// rendered is the documents of one registry generation.
type rendered struct {
	gen       uint64
	remoteGen uint64              // of the remote specs merged in
	root      document            // /openapi/v3 (JSON only)
	v3        map[string]document // by "api/v1", "apis/apps/v1", "apis/apps", ...
	v2        document
	err       error // rendering gen failed: the documents are the previous ones
}

// New builds the OpenAPI v3 document of every group/version in reg (and
// of the group, /api, /apis and /version endpoints), their index, and the
// OpenAPI v2 document holding every definition; v names the Kubernetes
// version in the documents' info. The documents follow reg's later
// changes; Close stops following.
func New(reg *registry.Registry, v version.Info) (*Documents, error) {
	s := reg.Snapshot()
	r, err := render(s, v, RemoteSpecs{})
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
	if o.fresh(c, o.reg.Generation()) {
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

// fresh reports whether c describes registry generation gen and the
// remote specs' current generation.
func (o *Documents) fresh(c *rendered, gen uint64) bool {
	remoteGen := c.remoteGen
	if r := o.remote.Load(); r != nil {
		remoteGen = (*r).Generation()
	}
	return c.gen >= gen && c.remoteGen == remoteGen
}

// SetRemote merges the extension servers' documents into these,
// following r's changes from the next request on.
func (o *Documents) SetRemote(r Remote) {
	o.remote.Store(&r)
	o.current()
}

// follow renders until the documents match the registry's and the
// remote specs' generations.
func (o *Documents) follow() {
	for {
		s := o.reg.Snapshot()
		c := o.cur.Load()
		o.mu.Lock()
		if o.fresh(c, s.Generation()) || o.closed {
			o.rendering = false
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		var (
			specs     RemoteSpecs
			remoteGen uint64
		)
		if r := o.remote.Load(); r != nil {
			// The generation first: specs newer than it render again.
			remoteGen = (*r).Generation()
			specs = (*r).Specs()
		}
		r, err := render(s, o.v, specs)
		if err != nil {
			r = &rendered{root: c.root, v3: c.v3, v2: c.v2, err: err}
		}
		r.gen, r.remoteGen = s.Generation(), remoteGen
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

// render renders the documents of the snapshot reg. The definitions are
// built again each time (60ms) rather than kept (6.6MB) between the rare
// registry changes.
func render(reg *registry.Snapshot, v version.Info, remote RemoteSpecs) (*rendered, error) {
	d := defs.New(reg.Scheme())
	meta := metaNames{
		deleteOptions: modelName[metav1.DeleteOptions](),
		status:        modelName[metav1.Status](),
		patch:         modelName[metav1.Patch](),
		watchEvent:    modelName[metav1.WatchEvent](),
		resourceList:  modelName[metav1.APIResourceList](),
	}

	o := &rendered{v3: map[string]document{}}
	builders := map[string]*pathsBuilder{}
	var crs []*registry.Resource // custom resources described from their CRD
	for _, g := range reg.Groups() {
		for _, ver := range g.Versions {
			gv := schema.GroupVersion{Group: g.Group, Version: ver}
			id, tag := versionNames(gv)
			b := newPathsBuilder(d, id, tag)
			b.gv = &gv
			for _, res := range reg.GroupVersionResources(g.Group, ver) {
				if res.CRD != nil && b.customResource(res) {
					crs = append(crs, res)
					continue
				}
				b.resource(res, meta)
			}
			for _, name := range []string{meta.deleteOptions, meta.status, meta.patch, meta.watchEvent} {
				b.use(name)
			}
			key := "apis/" + g.Group + "/" + ver
			if g.Group == "" {
				key = "api/" + ver
			}
			b.apiResources("/"+key, meta)
			builders[key] = b
		}
		if g.Group != "" {
			id, tag := groupNames(g.Group)
			b := newPathsBuilder(d, id, tag)
			b.simple("/apis/"+g.Group+"/", "get"+id+"APIGroup", "get information of a group", modelName[metav1.APIGroup](), mediaJSON, mediaYAML, mediaProtobuf)
			builders["apis/"+g.Group] = b
		}
	}
	core := newPathsBuilder(d, "Core", "core")
	core.simple("/api/", "getCoreAPIVersions", "get available API versions", modelName[metav1.APIVersions](), mediaJSON, mediaYAML, mediaProtobuf)
	builders["api"] = core
	apis := newPathsBuilder(d, "", "apis")
	apis.simple("/apis/", "getAPIVersions", "get available API versions", modelName[metav1.APIGroupList](), mediaJSON, mediaYAML, mediaProtobuf)
	builders["apis"] = apis
	ver := newPathsBuilder(d, "", "version")
	ver.simple("/version/", "getCodeVersion", "get the version information for this server", modelName[version.Info](), mediaJSON)
	builders["version"] = ver

	index := indexDocument{Paths: map[string]indexEntry{}}
	v2Names := map[string]bool{}
	v2Custom := map[string]*spec.Schema{}
	v2Paths := map[string]spec.PathItem{}
	for key, b := range builders {
		doc, err := b.document(documentTitle, v.GitVersion)
		if err != nil {
			return nil, fmt.Errorf("cannot render OpenAPI v3 document %s: %w", key, err)
		}
		body, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("cannot encode OpenAPI v3 document %s: %w", key, err)
		}
		d := newDocument(body, v3Protobuf)
		o.v3[key] = d
		index.Paths[key] = indexEntry{ServerRelativeURL: hashedURL(key, d.hash)}
		for name := range b.roots {
			v2Names[name] = true
		}
		for name, s := range b.custom {
			if !b.crd[name] {
				v2Custom[name] = s
			}
		}
		for path, p := range doc.Paths.Paths {
			if !b.built[path] {
				v2Paths[path] = v2Path(p)
			}
		}
	}
	for key, body := range remote.V3 {
		if _, local := o.v3[key]; local {
			continue // kgate's own group: never shadowed
		}
		d := newDocument(body, v3Protobuf)
		o.v3[key] = d
		index.Paths[key] = indexEntry{ServerRelativeURL: hashedURL(key, d.hash)}
	}
	body, err := json.Marshal(index)
	if err != nil {
		return nil, fmt.Errorf("cannot encode OpenAPI v3 index: %w", err)
	}
	o.root = newDocument(body, nil)

	crPaths, crParams, crDefs, crRoots := customV2(crs, d.Has)
	for path, p := range crPaths {
		v2Paths[path] = p
	}
	for _, name := range crRoots {
		v2Names[name] = true
	}
	if o.v2, err = v2Document(d, v2Names, v2Custom, crDefs, v2Paths, crParams, remote.V2, v); err != nil {
		return nil, err
	}
	return o, nil
}

// modelName is the definition name of T ("io.k8s.apimachinery.pkg.apis.meta.v1.Status").
func modelName[T util.OpenAPIModelNamer]() string {
	var t T
	return t.OpenAPIModelName()
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
		return nil, fmt.Errorf("cannot encode OpenAPI v3 document: %w", err)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(doc)
}

func v2Protobuf(body []byte) ([]byte, error) {
	doc, err := openapiv2.ParseDocument(body)
	if err != nil {
		return nil, fmt.Errorf("cannot encode OpenAPI v2 document: %w", err)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(doc)
}

// v2Document renders the OpenAPI v2 document: every definition the v3
// documents use (names, the custom schemas among them apart) and those of
// the custom resources (crDefs), in the v2 dialect, with the paths of
// every document and the parameters the custom resources' paths share.
// kubectl reads it for client-side validation (only where it cannot rely
// on the server's fieldValidation, which older kubectls learn from these
// paths: kind List documents, create-only kinds) and for "kubectl explain
// --output plaintext-openapiv2"; a 404 here would make "kubectl apply -f"
// of a List fail.
func v2Document(d *defs.Definitions, names map[string]bool, custom map[string]*spec.Schema, crDefs map[string]spec.Schema, paths map[string]spec.PathItem, params map[string]spec.Parameter, remote []*spec.Swagger, v version.Info) (document, error) {
	roots := make([]string, 0, len(names))
	for name := range names {
		roots = append(roots, name)
	}
	sort.Strings(roots)
	definitions, err := d.V2(roots...)
	if err != nil {
		return document{}, err
	}
	for name, s := range custom {
		definitions[name] = *s
	}
	for name, s := range crDefs {
		definitions[name] = s
	}
	swagger := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: documentTitle, Version: v.GitVersion}},
		Paths:       &spec.Paths{Paths: paths},
		Parameters:  params,
		Definitions: definitions,
		SecurityDefinitions: spec.SecurityDefinitions{"BearerToken": &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Description: "Bearer Token authentication", Name: "authorization", In: "header",
		}}},
		Security: []map[string][]string{{"BearerToken": {}}},
	}}
	for _, r := range remote {
		// As kube-aggregator: kgate's paths win, and a definition that
		// differs from one of the same name is renamed.
		if err := aggregator.MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters(swagger, r); err != nil {
			return document{}, fmt.Errorf("cannot merge an extension server's OpenAPI v2 document: %w", err)
		}
	}
	body, err := json.Marshal(swagger)
	if err != nil {
		return document{}, fmt.Errorf("cannot encode OpenAPI v2 document: %w", err)
	}
	return newDocument(body, v2Protobuf), nil
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
	resp.Vary = true
	if resp.Status != http.StatusOK || hash == "" {
		return resp, true
	}
	if hash != doc.hash {
		return Response{Status: http.StatusMovedPermanently, Location: hashedURL(key, doc.hash), Vary: true}, true
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
					var err error
					if body, err = doc.protobuf(); err != nil {
						return Response{Status: http.StatusInternalServerError}
					}
				}
				return Response{Status: http.StatusOK, ContentType: c.contentType, Body: body, ETag: doc.etag}
			}
		}
	}
	return Response{Status: http.StatusNotAcceptable}
}
