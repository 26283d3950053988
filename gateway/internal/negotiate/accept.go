package negotiate

import (
	"sort"
	"strconv"
	"strings"

	"github.com/kgate/kgate/gateway/internal/apierror"
)

// Negotiate picks the response form for an Accept header the way
// kube-apiserver does (goautoneg's clause order, then JSON, YAML,
// protobuf for each clause; the first clause whose parameters the
// endpoint allows wins). An empty header means JSON. The error is a 406
// NotAcceptable.
func Negotiate(accept string, e Endpoint) (Media, error) {
	m, ok := negotiate(accept, e)
	if !ok {
		return Media{}, apierror.NotAcceptable([]string{MediaJSON, MediaYAML, MediaProtobuf})
	}
	if e.Watch {
		// upstream negotiates once more for the stream and gives up,
		// rather than look further, when the pick cannot stream.
		if !m.Format.streams() {
			return Media{}, apierror.NotAcceptable([]string{MediaJSON + ";stream=watch", MediaProtobuf + ";stream=watch"})
		}
		m.Stream = true
	}
	return m, nil
}

// PrettyHint reports whether kube-apiserver would indent a JSON response
// regardless of Accept: the query parameter pretty (when set, parsed as a
// bool), else a User-Agent of curl, Wget or a browser.
func PrettyHint(pretty, userAgent string) bool {
	if pretty != "" {
		p, _ := strconv.ParseBool(pretty)
		return p
	}
	return strings.HasPrefix(userAgent, "curl") || strings.HasPrefix(userAgent, "Wget") ||
		strings.HasPrefix(userAgent, "Mozilla/5.0")
}

// clause is one media range of an Accept header.
type clause struct {
	typ, sub string
	q        float64
	params   string // everything after the first ';'
}

// maxInsertion is the length up to which sort.Sort uses insertion sort.
const maxInsertion = 12

func negotiate(accept string, e Endpoint) (Media, bool) {
	if accept == "" {
		return Media{Format: JSON}, true
	}
	var buf [maxInsertion]clause
	clauses := parseAccept(accept, buf[:0])
	for i := range clauses {
		c := &clauses[i]
		for f := JSON; f <= Protobuf; f++ {
			if !(c.typ == "application" && (c.sub == f.subtype() || c.sub == "*") || c.typ == "*" && c.sub == "*") {
				continue
			}
			if m, ok := accepts(c.params, f, e); ok {
				return m, true
			}
		}
	}
	return Media{}, false
}

// parseAccept is goautoneg.ParseAccept without the parameter map: same
// splitting, same skipped clauses, same (unstable) order.
func parseAccept(header string, clauses []clause) []clause {
	var part string
	for remaining := header; len(remaining) > 0; {
		part, remaining = next(remaining, ',')
		part = trimSpace(part)
		mediaRange, params := next(part, ';')
		typ, rest := next(mediaRange, '/')
		c := clause{typ: trimSpace(typ), q: 1, params: params}
		if rest == "" {
			if c.typ != "*" {
				continue
			}
			c.sub = "*"
		} else {
			sub, more := next(rest, '/')
			if more != "" {
				continue
			}
			c.sub = trimSpace(sub)
		}
		for p := params; p != ""; {
			var kv string
			kv, p = next(p, ';')
			if k, _, raw, ok := param(kv); ok && k == "q" {
				c.q, _ = strconv.ParseFloat(raw, 32)
			}
		}
		clauses = append(clauses, c)
	}
	if len(clauses) <= maxInsertion {
		// what sort.Sort does for short input, without boxing the slice
		for i := 1; i < len(clauses); i++ {
			for j := i; j > 0 && less(&clauses[j], &clauses[j-1]); j-- {
				clauses[j], clauses[j-1] = clauses[j-1], clauses[j]
			}
		}
		return clauses
	}
	// sorting through an interface moves the slice to the heap: copy
	// first so that short headers keep theirs on the stack.
	long := make([]clause, len(clauses))
	copy(long, clauses)
	sort.Sort(byPreference(long))
	return long
}

// less is goautoneg's ordering: higher q first, then specific types
// before wildcards (not a strict weak order; kept as is).
func less(a, b *clause) bool {
	if a.q > b.q {
		return true
	}
	if a.typ != "*" && b.typ == "*" {
		return true
	}
	return a.sub != "*" && b.sub == "*"
}

type byPreference []clause

func (s byPreference) Len() int           { return len(s) }
func (s byPreference) Less(i, j int) bool { return less(&s[i], &s[j]) }
func (s byPreference) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }

// accepts is upstream's acceptMediaTypeOptions with kube-apiserver's
// resource endpoint restrictions. Repeated parameters: the last wins.
func accepts(params string, f Format, e Endpoint) (Media, bool) {
	var as, group, version, stream, sv, pretty, profile string
	convert := false
	for p := params; p != ""; {
		var kv string
		kv, p = next(p, ';')
		k, v, _, ok := param(kv)
		if !ok {
			continue
		}
		switch k {
		case "q":
		case "as":
			as, convert = v, true
		case "g":
			group, convert = v, true
		case "v":
			version, convert = v, true
		case "stream":
			stream = v
		case "sv":
			sv = v
		case "pretty":
			pretty = v
		case "profile":
			profile = v
		}
	}
	if stream != "" && (!f.streams() || stream != "watch") {
		return Media{}, false
	}
	if sv != "" && !(e.Resource && sv == "v1") {
		return Media{}, false
	}
	m := Media{Format: f, Pretty: pretty == "1" && f == JSON, Profile: profile}
	if !convert {
		return m, f != Protobuf || e.Protobuf
	}
	if !e.Resource || group != "meta.k8s.io" || (version != "v1" && version != "v1beta1") {
		return Media{}, false
	}
	switch as {
	case "Table":
		if f == Protobuf {
			return Media{}, false
		}
		m.As = AsTable
	case "PartialObjectMetadata":
		m.As = AsPartialObjectMetadata
	case "PartialObjectMetadataList":
		m.As = AsPartialObjectMetadataList
	default:
		return Media{}, false
	}
	m.AsVersion = version
	return m, true
}

// param splits "key=value" as goautoneg does: exactly one '=' with
// something after it; key and value trimmed of spaces, raw untrimmed.
func param(kv string) (key, value, raw string, ok bool) {
	k, rest := next(kv, '=')
	if rest == "" {
		return "", "", "", false
	}
	raw, more := next(rest, '=')
	if more != "" {
		return "", "", "", false
	}
	return trimSpace(k), trimSpace(raw), raw, true
}

// next is goautoneg's nextSplitElement.
func next(s string, sep byte) (item, remaining string) {
	if i := strings.IndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

func trimSpace(s string) string { return strings.Trim(s, " ") }
