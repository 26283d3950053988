package openapi

import "k8s.io/kube-openapi/pkg/validation/spec"

// Remote is what extension API servers add to the documents, as the
// aggregator learns it (aggregator.RemoteOpenAPI).
type Remote interface {
	// Generation changes whenever Specs would return something else.
	Generation() uint64
	Specs() RemoteSpecs
}

// RemoteSpecs are the extension servers' documents.
type RemoteSpecs struct {
	// V2 are their OpenAPI v2 documents, each holding the paths of its
	// APIService's group/version alone, in kube-aggregator's merge
	// order; they are merged into /openapi/v2 after kgate's own paths
	// and definitions. Not modified.
	V2 []*spec.Swagger
	// V3 are their OpenAPI v3 documents (JSON) by index key
	// ("apis/<group>/<version>", "apis/<group>"); a key kgate serves
	// itself is left out.
	V3 map[string][]byte
}
