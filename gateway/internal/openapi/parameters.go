package openapi

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Query and path parameters of the resource operations, as kube-apiserver
// documents them. kubectl looks for fieldValidation among a PATCH
// operation's parameters to decide that the server validates fields
// itself (cli-runtime resource.QueryParamVerifierV3).

func param(name, in, typ, desc string) *spec3.Parameter {
	return &spec3.Parameter{ParameterProps: spec3.ParameterProps{
		Name:        name,
		In:          in,
		Description: desc,
		Required:    in == "path",
		Schema:      &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, UniqueItems: true}},
	}}
}

func queryParams(names ...string) []*spec3.Parameter {
	out := make([]*spec3.Parameter, 0, len(names))
	for _, n := range names {
		out = append(out, queryParam(n))
	}
	return out
}

// queryTypes are the types of the options' query parameters.
var queryTypes = map[string]string{
	"allowWatchBookmarks": "boolean", "force": "boolean", "orphanDependents": "boolean", "sendInitialEvents": "boolean",
	"watch": "boolean", "ignoreStoreReadErrorWithClusterBreakingPotential": "boolean",
	"gracePeriodSeconds": "integer", "limit": "integer", "timeoutSeconds": "integer",
}

// optionDocs are the options structs whose fields are the query
// parameters; kube-apiserver describes each parameter with its field's
// documentation.
var optionDocs = []map[string]string{
	metav1.ListOptions{}.SwaggerDoc(), metav1.DeleteOptions{}.SwaggerDoc(), metav1.CreateOptions{}.SwaggerDoc(),
	metav1.PatchOptions{}.SwaggerDoc(), metav1.UpdateOptions{}.SwaggerDoc(),
}

// patchParams are the query parameters of a PATCH, described by
// PatchOptions first.
func patchParams(names ...string) []*spec3.Parameter {
	docs := metav1.PatchOptions{}.SwaggerDoc()
	out := make([]*spec3.Parameter, 0, len(names))
	for _, n := range names {
		q := queryParam(n)
		if d, ok := docs[n]; ok {
			q.Description = d
		}
		out = append(out, q)
	}
	return out
}

func queryParam(name string) *spec3.Parameter {
	if name == "pretty" {
		return param(name, "query", "string", "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).")
	}
	typ := queryTypes[name]
	if typ == "" {
		typ = "string"
	}
	for _, docs := range optionDocs {
		if d, ok := docs[name]; ok {
			return param(name, "query", typ, d)
		}
	}
	return param(name, "query", typ, "")
}

// sortParams orders parameters by name, then location, as kube-openapi's
// builder does.
func sortParams(p []*spec3.Parameter) []*spec3.Parameter {
	sort.SliceStable(p, func(i, j int) bool {
		if p[i].Name != p[j].Name {
			return p[i].Name < p[j].Name
		}
		return p[i].In < p[j].In
	})
	return p
}

// The query parameters of each kind of operation.
func listQuery() []string {
	return []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit",
		"resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"}
}

func writeQuery() []string { return []string{"dryRun", "fieldManager", "fieldValidation"} }

func patchQuery() []string { return []string{"dryRun", "fieldManager", "fieldValidation", "force"} }

func deleteQuery() []string {
	return []string{"dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential", "orphanDependents", "propagationPolicy"}
}

func deleteCollectionQuery() []string {
	return []string{"continue", "dryRun", "fieldSelector", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential",
		"labelSelector", "limit", "orphanDependents", "propagationPolicy", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds"}
}

// pathParams returns the parameters shared by the operations of a path:
// name (for an item), namespace (for a namespaced resource) and pretty.
func pathParams(kind string, item, namespaced bool) []*spec3.Parameter {
	var out []*spec3.Parameter
	if item {
		out = append(out, param("name", "path", "string", "name of the "+kind))
	}
	if namespaced {
		out = append(out, param("namespace", "path", "string", "object name and auth scope, such as for teams and projects"))
	}
	return sortParams(append(out, queryParam("pretty")))
}
