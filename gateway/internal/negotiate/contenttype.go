package negotiate

import (
	"mime"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/gateway/internal/apierror"
)

// ContentType returns the format of a create or update body from its
// Content-Type, as kube-apiserver reads it: empty means JSON, parameters
// are allowed, the media type is case-insensitive. Anything else is a 415
// UnsupportedMediaType.
func ContentType(contentType string) (Format, error) {
	switch contentType {
	case "", MediaJSON:
		return JSON, nil
	case MediaProtobuf:
		return Protobuf, nil
	case MediaYAML:
		return YAML, nil
	}
	if mediaType, _, err := mime.ParseMediaType(contentType); err == nil {
		switch mediaType {
		case MediaJSON:
			return JSON, nil
		case MediaYAML:
			return YAML, nil
		case MediaProtobuf:
			return Protobuf, nil
		}
	}
	return JSON, apierror.UnsupportedMediaType([]string{MediaJSON, MediaYAML, MediaProtobuf})
}

// PatchType returns the patch type of a PATCH body from its Content-Type,
// as kube-apiserver reads it: anything from the first ';' on is dropped,
// the rest must match exactly. strategic is false for custom resources,
// which have no strategic merge patch. Anything else is a 415.
func PatchType(contentType string, strategic bool) (types.PatchType, error) {
	if i := strings.IndexByte(contentType, ';'); i > 0 {
		contentType = contentType[:i]
	}
	switch pt := types.PatchType(contentType); pt {
	case types.JSONPatchType, types.MergePatchType, types.ApplyYAMLPatchType:
		return pt, nil
	case types.StrategicMergePatchType:
		if strategic {
			return pt, nil
		}
	}
	accepted := []string{string(types.JSONPatchType), string(types.MergePatchType)}
	if strategic {
		accepted = append(accepted, string(types.StrategicMergePatchType))
	}
	accepted = append(accepted, string(types.ApplyYAMLPatchType))
	return "", apierror.UnsupportedMediaType(accepted)
}
