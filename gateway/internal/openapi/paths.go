package openapi

import (
	"maps"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kgate/kgate/gateway/internal/openapi/defs"
	"github.com/kgate/kgate/storage/registry"
)

// Media types of request and response bodies.
const (
	mediaJSON          = "application/json"
	mediaYAML          = "application/yaml"
	mediaProtobuf      = "application/vnd.kubernetes.protobuf"
	mediaJSONWatch     = "application/json;stream=watch"
	mediaProtobufWatch = "application/vnd.kubernetes.protobuf;stream=watch"
)

// patchMediaTypes are the PATCH bodies a built-in resource accepts.
// kubectl apply computes a strategic merge patch from the schema only when
// the PATCH operation lists application/strategic-merge-patch+json.
func patchMediaTypes() []string {
	return []string{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}
}

// operation is one HTTP operation before rendering.
type operation struct {
	method    string // get, put, post, patch, delete
	id        string
	desc      string
	action    string // x-kubernetes-action
	gvk       schema.GroupVersionKind
	query     []string
	body      string // definition name of the request body
	patch     bool   // the body is a patch: Patch schema, patch media types
	responses []int  // status codes answered with result
	result    string // definition name of the response body
	watch     bool   // the response is a stream of WatchEvent
}

// pathsBuilder collects the paths of one OpenAPI v3 document and the
// definitions they refer to.
type pathsBuilder struct {
	defs   *defs.Definitions
	paths  map[string]*spec3.Path
	roots  map[string]bool         // definitions the paths refer to
	custom map[string]*spec.Schema // kinds without a definition, by name (see customSchema, customResource)
	built  map[string]bool         // paths apiextensions' builder made (customResource): final as they are
	crd    map[string]bool         // the custom schemas the builder made: the v2 document has its own (customV2)
	gv     *schema.GroupVersion    // of a group/version document, else nil
	idPart string                  // "AppsV1", "CoreV1", "RbacAuthorizationV1"
	tag    string                  // "apps_v1", "core_v1", "rbacAuthorization_v1"
}

func newPathsBuilder(d *defs.Definitions, idPart, tag string) *pathsBuilder {
	return &pathsBuilder{
		defs:   d,
		paths:  map[string]*spec3.Path{},
		roots:  map[string]bool{},
		custom: map[string]*spec.Schema{},
		built:  map[string]bool{},
		crd:    map[string]bool{},
		idPart: idPart,
		tag:    tag,
	}
}

// groupNames returns how kube-apiserver spells a group in operation ids
// ("RbacAuthorization", "Core") and tags ("rbacAuthorization", "core").
func groupNames(group string) (id, tag string) {
	if group == "" {
		return "Core", "core"
	}
	var idb, tagb strings.Builder
	for i, part := range strings.FieldsFunc(strings.TrimSuffix(group, ".k8s.io"), func(r rune) bool { return r == '.' || r == '-' }) {
		title := strings.ToUpper(part[:1]) + part[1:]
		idb.WriteString(title)
		if i == 0 {
			tagb.WriteString(part)
		} else {
			tagb.WriteString(title)
		}
	}
	return idb.String(), tagb.String()
}

// versionNames returns the operation id part ("AppsV1") and tag
// ("apps_v1") of a group/version.
func versionNames(gv schema.GroupVersion) (id, tag string) {
	id, tag = groupNames(gv.Group)
	return id + strings.ToUpper(gv.Version[:1]) + gv.Version[1:], tag + "_" + gv.Version
}

// define returns the definition name of gvk: upstream's definition of
// the type the scheme registers for it, or else (a custom resource) an
// object schema of its own (customSchema).
func (b *pathsBuilder) define(gvk schema.GroupVersionKind) string {
	if name, ok := b.defs.Name(gvk); ok {
		b.roots[name] = true
		return name
	}
	name := customName(gvk)
	b.custom[name] = customSchema(gvk)
	return name
}

// use marks the definition name as referred to by the document.
func (b *pathsBuilder) use(name string) string {
	b.roots[name] = true
	return name
}

// customName is the definition name kube-apiserver gives a custom
// resource's kind: the group reversed, version and kind
// ("com.example.stable.v1.CronTab").
func customName(gvk schema.GroupVersionKind) string {
	parts := strings.Split(gvk.Group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + gvk.Version + "." + gvk.Kind
}

// customSchema describes a kind that upstream's definitions lack (a
// custom resource, until its own schema is published): an object of any
// fields, which clients neither validate nor prune, tagged with its kind
// so that kubectl finds it.
func customSchema(gvk schema.GroupVersionKind) *spec.Schema {
	s := &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
	s.AddExtension("x-kubernetes-preserve-unknown-fields", true)
	s.AddExtension(gvkExtension, []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}})
	return s
}

// scopeMetaKinds narrows the kinds of DeleteOptions and WatchEvent, which
// every group/version registers, to those of gv and of core v1 in a
// group/version document, as kube-apiserver does since 1.36 (its
// routes.OpenAPI filterScopedGVKs); the v2 document keeps them all.
func scopeMetaKinds(schemas map[string]*spec.Schema, gv schema.GroupVersion) {
	for _, name := range []string{modelName[metav1.DeleteOptions](), modelName[metav1.WatchEvent]()} {
		s := schemas[name]
		if s == nil {
			continue
		}
		gvks, ok := s.Extensions[gvkExtension].([]any)
		if !ok {
			continue
		}
		var scoped []any
		for _, v := range gvks {
			m, _ := v.(map[string]any)
			g, _ := m["group"].(string)
			ver, _ := m["version"].(string)
			if (g == gv.Group && ver == gv.Version) || (g == "" && ver == "v1") {
				scoped = append(scoped, v)
			}
		}
		c := *s // the definitions' extensions are shared: copy before changing
		c.Extensions = maps.Clone(s.Extensions)
		if len(scoped) > 0 {
			c.Extensions[gvkExtension] = scoped
		} else {
			delete(c.Extensions, gvkExtension)
		}
		schemas[name] = &c
	}
}

const gvkExtension = "x-kubernetes-group-version-kind"

// schemaRef is a reference to the definition name.
func schemaRef(name string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/components/schemas/" + name)}}
}

// add renders o on path, whose shared parameters are params.
func (b *pathsBuilder) add(path string, params []*spec3.Parameter, o operation) {
	p := b.paths[path]
	if p == nil {
		p = &spec3.Path{PathProps: spec3.PathProps{Parameters: params}}
		b.paths[path] = p
	}
	op := &spec3.Operation{OperationProps: spec3.OperationProps{
		Tags:        []string{b.tag},
		Description: o.desc,
		OperationId: o.id,
	}}
	if len(o.query) > 0 {
		op.Parameters = queryParams(o.query...)
		if o.patch {
			op.Parameters = patchParams(o.query...)
		}
	}
	if o.body != "" {
		types := []string{"*/*"}
		if o.patch {
			types = patchMediaTypes()
		}
		// DeleteOptions may be left out; every other body is required.
		op.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Content: b.content(o.body, types), Required: o.method != "delete"}}
	}
	types := []string{mediaJSON, mediaYAML, mediaProtobuf}
	switch {
	case o.watch:
		types = []string{mediaJSON, mediaJSONWatch, mediaProtobuf, mediaProtobufWatch, mediaYAML}
	case o.action == "list":
		types = []string{mediaJSON, mediaJSONWatch, mediaProtobuf, mediaProtobufWatch, mediaYAML}
	}
	op.Responses = &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
		401: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}},
	}}}
	for _, code := range o.responses {
		op.Responses.StatusCodeResponses[code] = &spec3.Response{ResponseProps: spec3.ResponseProps{
			Description: statusText(code),
			Content:     b.content(o.result, types),
		}}
	}
	op.AddExtension("x-kubernetes-action", o.action)
	op.AddExtension("x-kubernetes-group-version-kind", map[string]any{"group": o.gvk.Group, "version": o.gvk.Version, "kind": o.gvk.Kind})
	switch o.method {
	case "get":
		p.Get = op
	case "put":
		p.Put = op
	case "post":
		p.Post = op
	case "patch":
		p.Patch = op
	case "delete":
		p.Delete = op
	}
}

func statusText(code int) string {
	switch code {
	case 200:
		return "OK"
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	}
	return ""
}

// content maps each media type to a reference to the definition name.
func (b *pathsBuilder) content(name string, types []string) map[string]*spec3.MediaType {
	out := make(map[string]*spec3.MediaType, len(types))
	for _, t := range types {
		ref := schemaRef(name)
		out[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: &ref}}
	}
	return out
}

// metaNames are the definitions of the meta types every group/version
// document uses.
type metaNames struct {
	deleteOptions, status, patch, watchEvent, resourceList string
}

// resource adds the paths of res and its subresources, the ones
// kube-apiserver installs for its verbs.
func (b *pathsBuilder) resource(res *registry.Resource, m metaNames) {
	kind := b.define(res.GVK())
	verbs := map[string]bool{}
	for _, v := range res.SupportedVerbs() {
		verbs[v] = true
	}
	prefix := "/apis/" + res.Group + "/" + res.Version
	if res.Group == "" {
		prefix = "/api/" + res.Version
	}
	ns, nsPath := "", ""
	if res.Namespaced {
		ns, nsPath = "Namespaced", "/namespaces/{namespace}"
	}
	gvk := res.GVK()
	k := res.Kind
	collection := prefix + nsPath + "/" + res.Resource
	item := collection + "/{name}"
	collParams := pathParams(k, false, res.Namespaced)
	itemParams := pathParams(k, true, res.Namespaced)

	if verbs["list"] {
		list := b.define(gvk.GroupVersion().WithKind(res.ListKind()))
		b.add(collection, collParams, operation{method: "get", id: "list" + b.idPart + ns + k, desc: "list or watch objects of kind " + k,
			action: "list", gvk: gvk, query: listQuery(), responses: []int{200}, result: list})
		if res.Namespaced {
			b.add(prefix+"/"+res.Resource, pathParams(k, false, false), operation{method: "get", id: "list" + b.idPart + k + "ForAllNamespaces",
				desc: "list or watch objects of kind " + k, action: "list", gvk: gvk, query: listQuery(), responses: []int{200}, result: list})
		}
	}
	if verbs["create"] {
		b.add(collection, collParams, operation{method: "post", id: "create" + b.idPart + ns + k, desc: "create " + article(k),
			action: "post", gvk: gvk, query: writeQuery(), body: kind, responses: []int{200, 201, 202}, result: kind})
	}
	if verbs["deletecollection"] {
		b.add(collection, collParams, operation{method: "delete", id: "delete" + b.idPart + "Collection" + ns + k, desc: "delete collection of " + k,
			action: "deletecollection", gvk: gvk, query: deleteCollectionQuery(), body: m.deleteOptions, responses: []int{200}, result: m.status})
	}
	if verbs["get"] {
		b.add(item, itemParams, operation{method: "get", id: "read" + b.idPart + ns + k, desc: "read the specified " + k,
			action: "get", gvk: gvk, responses: []int{200}, result: kind})
	}
	if verbs["update"] {
		b.add(item, itemParams, operation{method: "put", id: "replace" + b.idPart + ns + k, desc: "replace the specified " + k,
			action: "put", gvk: gvk, query: writeQuery(), body: kind, responses: []int{200, 201}, result: kind})
	}
	if verbs["patch"] {
		b.add(item, itemParams, operation{method: "patch", id: "patch" + b.idPart + ns + k, desc: "partially update the specified " + k,
			action: "patch", gvk: gvk, query: patchQuery(), body: m.patch, patch: true, responses: []int{200, 201}, result: kind})
	}
	if verbs["delete"] {
		b.add(item, itemParams, operation{method: "delete", id: "delete" + b.idPart + ns + k, desc: "delete " + article(k),
			action: "delete", gvk: gvk, query: deleteQuery(), body: m.deleteOptions, responses: []int{200, 202}, result: m.status})
	}
	if verbs["watch"] {
		watchColl := prefix + "/watch" + nsPath + "/" + res.Resource
		b.add(watchColl+"/{name}", sortParams(append(pathParams(k, true, res.Namespaced), queryParams(listQuery()...)...)), operation{method: "get",
			id: "watch" + b.idPart + ns + k, desc: "watch changes to an object of kind " + k + ". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.",
			action: "watch", gvk: gvk, responses: []int{200}, result: m.watchEvent, watch: true})
		b.add(watchColl, sortParams(append(pathParams(k, false, res.Namespaced), queryParams(listQuery()...)...)), operation{method: "get",
			id: "watch" + b.idPart + ns + k + "List", desc: "watch individual changes to a list of " + k + ". deprecated: use the 'watch' parameter with a list operation instead.",
			action: "watchlist", gvk: gvk, responses: []int{200}, result: m.watchEvent, watch: true})
		if res.Namespaced {
			b.add(prefix+"/watch/"+res.Resource, sortParams(append(pathParams(k, false, false), queryParams(listQuery()...)...)), operation{method: "get",
				id: "watch" + b.idPart + k + "ListForAllNamespaces", desc: "watch individual changes to a list of " + k + ". deprecated: use the 'watch' parameter with a list operation instead.",
				action: "watchlist", gvk: gvk, responses: []int{200}, result: m.watchEvent, watch: true})
		}
	}

	for _, sub := range res.Subresources {
		subGVK, methods, ok := subresourceOperations(sub, gvk)
		if !ok {
			continue // connect-style subresources (log, exec, proxy, ...) need no schema
		}
		subKind := b.define(subGVK)
		path := item + "/" + sub
		params := pathParams(subGVK.Kind, true, res.Namespaced)
		idKind := ns + k + strings.ToUpper(sub[:1]) + sub[1:]
		for _, method := range methods {
			o := operation{method: method, gvk: subGVK, result: subKind}
			switch method {
			case "get":
				o.id, o.desc, o.action, o.responses = "read"+b.idPart+idKind, "read "+sub+" of the specified "+k, "get", []int{200}
			case "put":
				o.id, o.desc, o.action, o.query, o.body, o.responses = "replace"+b.idPart+idKind, "replace "+sub+" of the specified "+k, "put", writeQuery(), subKind, []int{200, 201}
			case "patch":
				o.id, o.desc, o.action, o.query, o.body, o.patch, o.responses = "patch"+b.idPart+idKind, "partially update "+sub+" of the specified "+k, "patch", patchQuery(), m.patch, true, []int{200, 201}
			case "post":
				o.id, o.desc, o.action, o.query, o.body, o.responses = "create"+b.idPart+idKind, "create "+sub+" of "+article(k), "post", writeQuery(), subKind, []int{200, 201, 202}
			}
			b.add(path, params, o)
		}
	}
}

// subresourceOperations returns the kind a subresource reads and writes
// and its HTTP methods, as kube-apiserver installs them. ok is false for
// subresources whose operations carry no schema (log, exec, attach,
// portforward, proxy).
func subresourceOperations(sub string, parent schema.GroupVersionKind) (schema.GroupVersionKind, []string, bool) {
	getPutPatch := []string{"get", "put", "patch"}
	switch sub {
	case "status", "ephemeralcontainers", "resize", "approval":
		return parent, getPutPatch, true
	case "scale":
		return schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, getPutPatch, true
	case "finalize":
		return parent, []string{"put"}, true
	case "binding":
		return schema.GroupVersionKind{Version: "v1", Kind: "Binding"}, []string{"post"}, true
	case "eviction":
		return schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, []string{"post"}, true
	case "token":
		return schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"}, []string{"post"}, true
	}
	return schema.GroupVersionKind{}, nil, false
}

// hoistCommonParams moves the query parameters every operation of p
// takes to p's own parameters, as kube-openapi's builder does.
func hoistCommonParams(p *spec3.Path) {
	var ops []*spec3.Operation
	for _, op := range []*spec3.Operation{p.Get, p.Put, p.Post, p.Patch, p.Delete} {
		if op != nil {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return
	}
	common := map[string]int{}
	for _, op := range ops {
		for _, q := range op.Parameters {
			common[q.Name]++
		}
	}
	moved := false
	for _, q := range ops[0].Parameters {
		if common[q.Name] == len(ops) {
			p.Parameters = append(p.Parameters, q)
			moved = true
		}
	}
	if !moved {
		return
	}
	for _, op := range ops {
		kept := op.Parameters[:0:0]
		for _, q := range op.Parameters {
			if common[q.Name] != len(ops) {
				kept = append(kept, q)
			}
		}
		op.Parameters = kept
	}
	p.Parameters = sortParams(p.Parameters)
}

// article returns "a Pod", "an Ingress" or "Endpoints": kube-apiserver
// takes a kind ending in a single "s" for a plural, without article.
func article(kind string) string {
	if strings.HasSuffix(kind, "s") && !strings.HasSuffix(kind, "ss") {
		return kind
	}
	if strings.ContainsRune("AEIOU", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// apiResources adds the discovery operation of the group/version at
// prefix ("/apis/apps/v1/").
func (b *pathsBuilder) apiResources(prefix string, m metaNames) {
	op := &spec3.Operation{OperationProps: spec3.OperationProps{
		Tags:        []string{b.tag},
		Description: "get available resources",
		OperationId: "get" + b.idPart + "APIResources",
		Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
			200: {ResponseProps: spec3.ResponseProps{Description: "OK", Content: b.content(m.resourceList, []string{mediaJSON, mediaYAML, mediaProtobuf})}},
			401: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}},
		}}},
	}}
	b.paths[prefix+"/"] = &spec3.Path{PathProps: spec3.PathProps{Get: op}}
	b.roots[m.resourceList] = true
}

// simple adds a GET operation without parameters returning the
// definition name at path in the media types: the group, root and
// version documents.
func (b *pathsBuilder) simple(path, id, desc, name string, types ...string) {
	b.use(name)
	op := &spec3.Operation{OperationProps: spec3.OperationProps{
		Tags:        []string{b.tag},
		Description: desc,
		OperationId: id,
		Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
			200: {ResponseProps: spec3.ResponseProps{Description: "OK", Content: b.content(name, types)}},
			401: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}},
		}}},
	}}
	b.paths[path] = &spec3.Path{PathProps: spec3.PathProps{Get: op}}
}

// document returns the OpenAPI v3 document of the collected paths, with
// every definition they reach.
func (b *pathsBuilder) document(title, version string) (*spec3.OpenAPI, error) {
	roots := make([]string, 0, len(b.roots))
	for name := range b.roots {
		roots = append(roots, name)
	}
	sort.Strings(roots)
	schemas, err := b.defs.V3(roots...)
	if err != nil {
		return nil, err
	}
	for name, s := range b.custom {
		schemas[name] = s
	}
	if b.gv != nil {
		scopeMetaKinds(schemas, *b.gv)
	}
	for path, p := range b.paths {
		if !b.built[path] {
			hoistCommonParams(p)
		}
	}
	return &spec3.OpenAPI{
		Version: "3.0.0",
		Info:    &spec.Info{InfoProps: spec.InfoProps{Title: title, Version: version}},
		Paths:   &spec3.Paths{Paths: b.paths},
		Components: &spec3.Components{
			Schemas: schemas,
			SecuritySchemes: spec3.SecuritySchemes{"BearerToken": {SecuritySchemeProps: spec3.SecuritySchemeProps{
				Type: "apiKey", Description: "Bearer Token authentication", Name: "authorization", In: "header",
			}}},
		},
		SecurityRequirement: []map[string][]string{{"BearerToken": {}}},
	}, nil
}
