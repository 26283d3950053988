package negotiate

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kgate/kgate/gateway/internal/apierror"
)

// FieldValidation is how a create, update or patch body treats unknown
// and duplicate fields (the fieldValidation query parameter).
type FieldValidation uint8

// Field validation directives; the zero value is kube-apiserver's default.
const (
	Warn   FieldValidation = iota // decode, and warn about each problem
	Ignore                        // decode, drop unknown fields silently
	Strict                        // fail with a 400 listing the problems
)

// ParseFieldValidation reads the fieldValidation query parameter of a
// request whose options are of kind optionsKind ("CreateOptions",
// "UpdateOptions", "PatchOptions"). Empty means Warn; an unknown value is
// the 422 Invalid kube-apiserver returns.
func ParseFieldValidation(value, optionsKind string) (FieldValidation, error) {
	switch value {
	case "", metav1.FieldValidationWarn:
		return Warn, nil
	case metav1.FieldValidationIgnore:
		return Ignore, nil
	case metav1.FieldValidationStrict:
		return Strict, nil
	}
	errs := validation.ValidateFieldValidation(field.NewPath("fieldValidation"), value)
	return Warn, apierror.Invalid(schema.GroupKind{Group: metav1.GroupName, Kind: optionsKind}, "", errs)
}

// Codec decodes request bodies and encodes objects built on the fly
// (Status, Table, discovery documents) with apimachinery's serializers for
// one scheme. It is safe for concurrent use.
type Codec struct {
	scheme  *runtime.Scheme
	factory serializer.CodecFactory
	infos   [Protobuf + 1]runtime.SerializerInfo
}

// NewCodec returns a codec for the types of scheme (registry.NewScheme).
func NewCodec(scheme *runtime.Scheme) (*Codec, error) {
	c := &Codec{scheme: scheme, factory: serializer.NewCodecFactory(scheme)}
	for f := JSON; f <= Protobuf; f++ {
		info, ok := runtime.SerializerInfoForMediaType(c.factory.SupportedMediaTypes(), f.MediaType())
		if !ok {
			return nil, fmt.Errorf("cannot find a serializer for %s", f.MediaType())
		}
		c.infos[f] = info
	}
	return c, nil
}

// Decode decodes a request body of format f into into, a new object of
// gvk, the kind the endpoint serves, as kube-apiserver's create and update
// handlers do. It returns the decoded object (into, unless the body names
// another kind of the same version) and, for Warn, one warning per unknown
// or duplicate field. Errors are 400 BadRequest.
func (c *Codec) Decode(body []byte, f Format, v FieldValidation, gvk schema.GroupVersionKind, into runtime.Object) (runtime.Object, []string, error) {
	if f > Protobuf {
		return nil, nil, apierror.BadRequest(fmt.Sprintf("unknown format %d", f))
	}
	info := c.infos[f]
	s := info.Serializer
	if v != Ignore {
		s = info.StrictSerializer
	}
	dec := c.factory.DecoderToVersion(s, gvk.GroupVersion())
	obj, got, err := dec.Decode(body, &gvk, into)
	var warnings []string
	if err != nil {
		strictErr, isStrict := runtime.AsStrictDecodingError(err)
		if !isStrict || obj == nil || v != Warn {
			return nil, nil, c.decodeError(err, into, got, body)
		}
		for _, e := range strictErr.Errors() {
			warnings = append(warnings, yamlWarnings(e.Error())...)
		}
	}
	if got == nil {
		return nil, nil, c.decodeError(fmt.Errorf("no kind decoded"), into, got, body)
	}
	if got.GroupVersion() != gvk.GroupVersion() {
		return nil, nil, apierror.BadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%v)",
			got.GroupVersion(), gvk.GroupVersion()))
	}
	return obj, warnings, nil
}

// decodeError is upstream's transformDecodeError.
func (c *Codec) decodeError(err error, into runtime.Object, got *schema.GroupVersionKind, body []byte) error {
	kinds, _, kerr := c.scheme.ObjectKinds(into)
	if kerr != nil {
		return apierror.BadRequest(kerr.Error())
	}
	if got != nil && got.Kind != "" {
		return apierror.BadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", got.Kind, got.Version, kinds[0].Kind, err))
	}
	return apierror.BadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", kinds[0].Kind, err, summarize(body, 30)))
}

// summarize is upstream's summarizeData.
func summarize(data []byte, max int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > max {
			return string(data[:max]) + " ..."
		}
		return string(data)
	default:
		if len(data) > max {
			return hex.EncodeToString(data[:max]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// yamlWarnings splits a YAML strict error into one warning per problem,
// as upstream's parseYAMLWarnings; other errors are one warning.
func yamlWarnings(msg string) []string {
	const (
		short = "yaml: unmarshal errors:\n"
		long  = "error converting YAML to JSON: yaml: unmarshal errors:\n"
	)
	var rest string
	switch {
	case strings.HasPrefix(msg, short):
		rest = msg[len(short):]
	case strings.HasPrefix(msg, long):
		rest = msg[len(long):]
	default:
		return []string{msg}
	}
	lines := strings.Split(rest, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}

// Encode encodes obj in format f as kube-apiserver writes a response
// body; pretty indents JSON. When obj's apiVersion and kind are unset they
// are set (on obj) from the scheme's first kind for its type.
func (c *Codec) Encode(obj runtime.Object, f Format, pretty bool) ([]byte, error) {
	if f > Protobuf {
		return nil, fmt.Errorf("cannot encode %T: unknown format %d", obj, f)
	}
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		kinds, _, err := c.scheme.ObjectKinds(obj)
		if err != nil {
			return nil, fmt.Errorf("cannot encode %T: %w", obj, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(kinds[0])
	}
	info := c.infos[f]
	s := info.Serializer
	if pretty && info.PrettySerializer != nil {
		s = info.PrettySerializer
	}
	var buf bytes.Buffer
	if err := s.Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("cannot encode %T as %s: %w", obj, f, err)
	}
	return buf.Bytes(), nil
}
