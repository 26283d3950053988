// Package requestinfo turns a request's method, path and query into the
// Kubernetes request attributes: verb, API group and version, namespace,
// resource, subresource and name. It reproduces kube-apiserver's
// RequestInfoFactory (k8s.io/apiserver/pkg/endpoints/request) configured
// with API prefixes "api" and "apis" and groupless prefix "api", without
// building an *http.Request and without allocating for ordinary requests.
package requestinfo

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// ErrNoResource is returned for a verb-in-path URL without anything after
// the verb (/api/v1/watch). kube-apiserver answers such a request with 500.
var ErrNoResource = errors.New("requestinfo: cannot determine kind and namespace from URL")

// Query gives a request's query parameters: the first value of key, and
// whether key is present at all (with or without a value).
// *fasthttp.Args satisfies it.
type Query interface {
	Peek(key string) []byte
	Has(key string) bool
}

// inlineParts is how many path segments Info holds without allocating.
const inlineParts = 10

// Info describes one request, with the same fields and values as
// kube-apiserver's RequestInfo (selectors aside).
type Info struct {
	// IsResourceRequest is false for non-resource URLs (/version,
	// /healthz, /apis/apps, ...).
	IsResourceRequest bool
	// Path is the URL path as given.
	Path string
	// Verb is the Kubernetes verb (get, list, watch, create, update,
	// patch, delete, deletecollection, proxy) for resource requests, the
	// lower-case HTTP method for non-resource requests, and empty for a
	// resource request with an unknown method.
	Verb string

	APIPrefix   string // "api" or "apis"
	APIGroup    string // "" for the core group
	APIVersion  string
	Namespace   string
	Resource    string
	Subresource string
	Name        string
	// Parts are the path segments from the resource on:
	// resource/name/subresource/... It may point into the Info it came
	// from: do not reuse that Info while Parts is in use.
	Parts []string

	parts [inlineParts]string
}

// Parse fills dst from an HTTP method, a decoded URL path and the query.
// q may be nil when there is no query. The error is ErrNoResource or nil;
// on error dst holds what was known, as upstream.
func Parse(dst *Info, method, path string, q Query) error {
	return parse(dst, method, lowerMethod(method), path, q)
}

// ParseBytes is Parse for fasthttp's byte slices (ctx.Method(), ctx.Path(),
// ctx.QueryArgs()). The strings in dst do not alias method or path, so dst
// may outlive the request. Note that fasthttp normalizes ctx.Path() ("..",
// "//") unless the server disables it, where kube-apiserver sees the
// decoded path as sent.
func ParseBytes(dst *Info, method, path []byte, q Query) error {
	m := knownMethod(method)
	if m == "" {
		m = string(method)
	}
	return parse(dst, m, lowerMethod(m), string(path), q)
}

func parse(dst *Info, method, lowerVerb, path string, q Query) error {
	*dst = Info{Path: path, Verb: lowerVerb}

	parts := split(dst, path)
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return nil
	}
	dst.APIPrefix = parts[0]
	parts = parts[1:]
	if dst.APIPrefix != "api" {
		// one part (the prefix) is consumed: "do we have four parts?"
		if len(parts) < 3 {
			return nil
		}
		dst.APIGroup = parts[0]
		parts = parts[1:]
	}
	dst.IsResourceRequest = true
	dst.APIVersion = parts[0]
	parts = parts[1:]

	// /{specialVerb}/...
	if parts[0] == "proxy" || parts[0] == "watch" {
		if len(parts) < 2 {
			return ErrNoResource
		}
		dst.Verb = parts[0]
		parts = parts[1:]
	} else {
		dst.Verb = verbForMethod(method)
	}

	// /namespaces/{namespace}/{resource}/...: parts relative to the resource,
	// unless the next part is a namespace subresource.
	if parts[0] == "namespaces" && len(parts) > 1 {
		dst.Namespace = parts[1]
		if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		}
	}
	dst.Parts = parts

	switch {
	case len(parts) >= 3 && dst.Verb != "proxy":
		dst.Subresource = parts[2]
		fallthrough
	case len(parts) >= 2:
		dst.Name = parts[1]
		fallthrough
	default:
		dst.Resource = parts[0]
	}

	if dst.Name == "" && dst.Verb == "get" {
		dst.Verb = "list"
		if q != nil {
			if isWatch(q) {
				dst.Verb = "watch"
			}
			dst.Name = nameFromFieldSelector(q)
		}
	}
	if dst.Name == "" && dst.Verb == "delete" {
		dst.Verb = "deletecollection"
	}
	return nil
}

// split splits the path like upstream's splitPath (trim "/", split on "/")
// into dst's inline storage when it fits.
func split(dst *Info, path string) []string {
	p := strings.Trim(path, "/")
	if p == "" {
		return nil
	}
	if strings.Count(p, "/") >= inlineParts {
		return strings.Split(p, "/")
	}
	n := 0
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			dst.parts[n] = p
			n++
			break
		}
		dst.parts[n] = p[:i]
		n++
		p = p[i+1:]
	}
	return dst.parts[:n:n]
}

// isWatch reads the watch parameter as upstream's ListOptions conversion
// does: present and neither "0" nor "false" (any case) means true. A
// ListOptions decoding failure falls back to the same rule upstream.
func isWatch(q Query) bool {
	if !q.Has("watch") {
		return false
	}
	v := q.Peek("watch")
	return !(string(v) == "0" || bytes.EqualFold(v, []byte("false")))
}

// nameFromFieldSelector returns the name a list or watch is restricted to
// by fieldSelector=metadata.name=<name>, as upstream: only when all of
// ListOptions decodes and the name is a valid path segment.
func nameFromFieldSelector(q Query) string {
	fs := q.Peek("fieldSelector")
	if !bytes.Contains(fs, []byte("metadata.name")) {
		// the field name is never unescaped: no match is possible.
		return ""
	}
	if !listOptionsDecode(q) {
		return ""
	}
	sel, err := fields.ParseSelector(string(fs))
	if err != nil {
		return ""
	}
	name, ok := sel.RequiresExactMatch("metadata.name")
	if !ok || !isPathSegmentName(name) {
		return ""
	}
	return name
}

// listOptionsDecode reports whether upstream's ListOptions decoding of the
// query succeeds, leaving the field selector to the caller: only the
// integers and the label selector can fail.
func listOptionsDecode(q Query) bool {
	for _, k := range [...]string{"limit", "timeoutSeconds"} {
		if q.Has(k) {
			if _, err := strconv.ParseInt(string(q.Peek(k)), 10, 64); err != nil {
				return false
			}
		}
	}
	if q.Has("labelSelector") {
		if _, err := labels.Parse(string(q.Peek("labelSelector"))); err != nil {
			return false
		}
	}
	return true
}

// isPathSegmentName is apimachinery's content.IsPathSegmentName without
// the messages.
func isPathSegmentName(name string) bool {
	return name != "." && name != ".." && !strings.ContainsAny(name, "/%")
}

// verbForMethod maps an HTTP method to the verb of a request naming one
// object; methods are case-sensitive, as in upstream.
func verbForMethod(method string) string {
	switch method {
	case "POST":
		return "create"
	case "GET", "HEAD":
		return "get"
	case "PUT":
		return "update"
	case "PATCH":
		return "patch"
	case "DELETE":
		return "delete"
	}
	return ""
}

// knownMethod returns the constant string of a common method, or "".
func knownMethod(m []byte) string {
	switch string(m) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "PATCH":
		return "PATCH"
	case "DELETE":
		return "DELETE"
	case "HEAD":
		return "HEAD"
	case "OPTIONS":
		return "OPTIONS"
	}
	return ""
}

// lowerMethod is strings.ToLower without allocating for common methods.
func lowerMethod(m string) string {
	switch m {
	case "GET":
		return "get"
	case "POST":
		return "post"
	case "PUT":
		return "put"
	case "PATCH":
		return "patch"
	case "DELETE":
		return "delete"
	case "HEAD":
		return "head"
	case "OPTIONS":
		return "options"
	}
	return strings.ToLower(m)
}

// Scope is the scope label of kube-apiserver's request metrics
// (CleanScope): "resource" for a named object or a create, "namespace",
// "cluster", or "" for a non-resource request.
func (i *Info) Scope() string {
	switch {
	case i.Name != "" || i.Verb == "create":
		return "resource"
	case i.Namespace != "":
		return "namespace"
	case i.IsResourceRequest:
		return "cluster"
	}
	return ""
}
