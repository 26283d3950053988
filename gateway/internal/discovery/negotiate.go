package discovery

import (
	"strings"

	"github.com/munnerz/goautoneg"
	"k8s.io/apimachinery/pkg/runtime"
)

// Aggregated discovery is asked for with these media type parameters
// (client-go's discovery.AcceptV2). kube-apiserver 1.37 no longer serves
// v2beta1 (feature AggregatedDiscoveryRemoveBetaType is locked on), so a
// clause asking for it is skipped like any other unsupported one.
const (
	aggregatedGroup   = "apidiscovery.k8s.io"
	aggregatedVersion = "v2"
	aggregatedKind    = "APIGroupDiscoveryList"
)

// choice is the outcome of content negotiation for one request.
type choice struct {
	format     format
	aggregated bool
}

// negotiate picks the representation kube-apiserver would pick for an
// Accept header. canAggregate is true on /api and /apis, where, as in
// kube-apiserver's discovery wrapper, any acceptable aggregated clause wins
// over plain clauses, whatever their order. ok is false when nothing is
// acceptable (406).
func negotiate(accept string, canAggregate bool) (choice, bool) {
	if strings.TrimSpace(accept) == "" {
		return choice{format: formatJSON}, true
	}
	clauses := goautoneg.ParseAccept(accept)
	if canAggregate {
		if c, ok := firstAcceptable(clauses, true); ok {
			return c, true
		}
	}
	return firstAcceptable(clauses, false)
}

// firstAcceptable returns the first clause, in preference order, that one
// of the served formats satisfies, either as an aggregated discovery
// request (aggregated) or as a plain one.
func firstAcceptable(clauses []goautoneg.Accept, aggregated bool) (choice, bool) {
	for _, clause := range clauses {
		for f := format(0); f < numFormats; f++ {
			typ, sub, _ := strings.Cut(f.mediaType(), "/")
			matches := (clause.Type == typ && (clause.SubType == sub || clause.SubType == "*")) ||
				(clause.Type == "*" && clause.SubType == "*")
			if matches && acceptsParams(clause.Params, f, aggregated) {
				return choice{format: f, aggregated: aggregated}, true
			}
		}
	}
	return choice{}, false
}

// acceptsParams applies kube-apiserver's rules for media type parameters:
// g, v and as ask for a transformation, which discovery only grants for
// aggregated discovery v2; stream must be "watch" on a format with a
// stream serializer; sv (server version) is never allowed; others (pretty,
// profile, unknown) are ignored.
func acceptsParams(params map[string]string, f format, aggregated bool) bool {
	var g, v, as string
	transform := false
	for k, val := range params {
		switch k {
		case "g":
			g, transform = val, true
		case "v":
			v, transform = val, true
		case "as":
			as, transform = val, true
		case "stream":
			if val != "" && (val != "watch" || f == formatYAML) {
				return false
			}
		case "sv":
			if val != "" {
				return false
			}
		}
	}
	if !aggregated {
		return !transform
	}
	return transform && g == aggregatedGroup && v == aggregatedVersion && as == aggregatedKind
}

// aggregatedMediaType is the Content-Type of an aggregated response, as
// kube-apiserver writes it (parameters in g, v, as order).
func aggregatedMediaType(f format) string {
	const params = ";g=" + aggregatedGroup + ";v=" + aggregatedVersion + ";as=" + aggregatedKind
	switch f {
	case formatYAML:
		return runtime.ContentTypeYAML + params
	case formatProtobuf:
		return runtime.ContentTypeProtobuf + params
	default:
		return runtime.ContentTypeJSON + params
	}
}

// commonAccepts are the Accept headers clients actually send; their
// negotiation is computed once so that serving them parses nothing.
func commonAccepts() []string {
	const (
		v1       = "application/json"
		v2       = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		v2NoPeer = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer"
	)
	return []string{
		"", v1, "*/*", "application/json, */*",
		v2 + "," + v1,
		v2NoPeer + "," + v2 + "," + v1,
		"application/vnd.kubernetes.protobuf, */*",
		"application/vnd.kubernetes.protobuf,application/json",
		"application/yaml",
	}
}

// negotiationKey indexes precomputed negotiations.
type negotiationKey struct {
	accept       string
	canAggregate bool
}

// negotiated is a negotiation result, with ok false for 406.
type negotiated struct {
	choice choice
	ok     bool
}

// precompute negotiates the common Accept headers once.
func precompute() map[negotiationKey]negotiated {
	out := make(map[negotiationKey]negotiated)
	for _, accept := range commonAccepts() {
		for _, agg := range []bool{false, true} {
			c, ok := negotiate(accept, agg)
			out[negotiationKey{accept, agg}] = negotiated{c, ok}
		}
	}
	return out
}
