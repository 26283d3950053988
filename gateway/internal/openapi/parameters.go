package openapi

import (
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
		Schema:      &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, UniqueItems: in == "query"}},
	}}
}

func queryParams(names ...string) []*spec3.Parameter {
	out := make([]*spec3.Parameter, 0, len(names))
	for _, n := range names {
		out = append(out, queryParam(n))
	}
	return out
}

func queryParam(name string) *spec3.Parameter {
	switch name {
	case "allowWatchBookmarks":
		return param(name, "query", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval.")
	case "continue":
		return param(name, "query", "string", "The continue option should be set when retrieving more results from the server. Its value is the opaque token returned by the previous page of a list and it selects the same snapshot as the first page.")
	case "dryRun":
		return param(name, "query", "string", "When present, indicates that modifications should not be persisted. Valid values are: All (process all dry run stages).")
	case "fieldManager":
		return param(name, "query", "string", "fieldManager is a name associated with the actor or entity that is making these changes.")
	case "fieldSelector":
		return param(name, "query", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything.")
	case "fieldValidation":
		return param(name, "query", "string", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore (drop them silently), Warn (drop them and send a warning for each) and Strict (fail the request, the default).")
	case "force":
		return param(name, "query", "boolean", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.")
	case "gracePeriodSeconds":
		return param(name, "query", "integer", "The duration in seconds before the object should be deleted. Zero means delete immediately; unset means the default grace period of the type.")
	case "ignoreStoreReadErrorWithClusterBreakingPotential":
		return param(name, "query", "boolean", "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.")
	case "labelSelector":
		return param(name, "query", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything.")
	case "limit":
		return param(name, "query", "integer", "limit is a maximum number of responses to return for a list call. If more items exist, the server sets the continue field on the list metadata.")
	case "orphanDependents":
		return param(name, "query", "boolean", "Deprecated: please use the PropagationPolicy. Should the dependent objects be orphaned.")
	case "propagationPolicy":
		return param(name, "query", "string", "Whether and how garbage collection will be performed: Orphan, Background or Foreground.")
	case "resourceVersion":
		return param(name, "query", "string", "resourceVersion sets a constraint on what resource versions a request may be served from. Defaults to unset.")
	case "resourceVersionMatch":
		return param(name, "query", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls: NotOlderThan or Exact.")
	case "sendInitialEvents":
		return param(name, "query", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`. The watch stream then begins with synthetic events for the current state of the objects, followed by a bookmark annotated \"k8s.io/initial-events-end\".")
	case "timeoutSeconds":
		return param(name, "query", "integer", "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.")
	case "watch":
		return param(name, "query", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.")
	case "pretty":
		return param(name, "query", "string", "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).")
	}
	return param(name, "query", "string", "")
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
	return append(out, queryParam("pretty"))
}
