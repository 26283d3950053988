package openapi

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The OpenAPI v2 document's paths are the v3 documents' paths in the v2
// dialect, as go-restful's routes describe themselves to kube-openapi's
// v2 builder: parameters typed inline, the request body a "body"
// parameter, media types as consumes and produces, responses with a
// schema, the scheme https, references to #/definitions/.

// v2Path converts the operations of p.
func v2Path(p *spec3.Path) spec.PathItem {
	var item spec.PathItem
	for _, q := range p.Parameters {
		item.Parameters = append(item.Parameters, v2Param(q))
	}
	item.Get = v2Operation(p.Get)
	item.Put = v2Operation(p.Put)
	item.Post = v2Operation(p.Post)
	item.Patch = v2Operation(p.Patch)
	item.Delete = v2Operation(p.Delete)
	return item
}

func v2Param(q *spec3.Parameter) spec.Parameter {
	out := spec.Parameter{ParamProps: spec.ParamProps{Name: q.Name, In: q.In, Description: q.Description, Required: q.Required}}
	if q.Schema != nil {
		if len(q.Schema.Type) > 0 {
			out.Type = q.Schema.Type[0]
		}
		out.UniqueItems = q.Schema.UniqueItems
	}
	return out
}

// mediaOrder is the order go-restful lists media types in.
var mediaOrder = []string{"*/*", mediaJSON, "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json",
	"application/apply-patch+yaml", "application/apply-patch+cbor", mediaYAML, mediaProtobuf, mediaJSONWatch, mediaProtobufWatch, "application/cbor", "application/cbor-seq"}

func sortedMedia(content map[string]*spec3.MediaType) []string {
	out := make([]string, 0, len(content))
	for t := range content {
		out = append(out, t)
	}
	rank := func(t string) int {
		if i := slices.Index(mediaOrder, t); i >= 0 {
			return i
		}
		return len(mediaOrder)
	}
	sort.Slice(out, func(i, j int) bool {
		if ri, rj := rank(out[i]), rank(out[j]); ri != rj {
			return ri < rj
		}
		return out[i] < out[j]
	})
	return out
}

// v2Ref rewrites a v3 schema reference to the v2 definitions.
func v2Ref(s *spec.Schema) *spec.Schema {
	if s == nil {
		return nil
	}
	ref := s.Ref.String()
	if name, ok := strings.CutPrefix(ref, "#/components/schemas/"); ok {
		return &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/definitions/" + name)}}
	}
	return s
}

func v2Operation(op *spec3.Operation) *spec.Operation {
	if op == nil {
		return nil
	}
	out := &spec.Operation{OperationProps: spec.OperationProps{
		Description: op.Description,
		ID:          op.OperationId,
		Tags:        op.Tags,
		Schemes:     []string{"https"},
		Consumes:    []string{"*/*"},
	}}
	out.Extensions = op.Extensions
	for _, q := range op.Parameters {
		out.Parameters = append(out.Parameters, v2Param(q))
	}
	if rb := op.RequestBody; rb != nil {
		out.Consumes = sortedMedia(rb.Content)
		var body *spec.Schema
		for _, t := range out.Consumes {
			body = v2Ref(rb.Content[t].Schema)
			break
		}
		out.Parameters = append([]spec.Parameter{{ParamProps: spec.ParamProps{Name: "body", In: "body", Required: rb.Required, Schema: body}}}, out.Parameters...)
	}
	if op.Responses != nil {
		out.Responses = &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{}}}
		produces := map[string]bool{}
		for code, r := range op.Responses.StatusCodeResponses {
			resp := spec.Response{ResponseProps: spec.ResponseProps{Description: r.Description}}
			for _, t := range sortedMedia(r.Content) {
				produces[t] = true
				if resp.Schema == nil {
					resp.Schema = v2Ref(r.Content[t].Schema)
				}
			}
			out.Responses.StatusCodeResponses[code] = resp
		}
		content := map[string]*spec3.MediaType{}
		for t := range produces {
			content[t] = nil
		}
		out.Produces = sortedMedia(content)
	}
	if _, resource := op.Extensions["x-kubernetes-action"]; !resource && op.RequestBody == nil {
		// The discovery and version operations consume what they
		// produce.
		out.Consumes = out.Produces
	}
	return out
}

// jsonRefs returns every "$ref" in v's JSON form.
func jsonRefs(v any) []string {
	body, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var raw any
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "$ref" {
					out = append(out, s)
				} else {
					walk(x)
				}
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(raw)
	return out
}
