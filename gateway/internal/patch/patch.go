// Package patch applies the patch types kube-apiserver accepts on PATCH:
// JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge
// patch, which needs the Go type of the object for its merge keys.
package patch

import (
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

var (
	// ErrBadPatch wraps the errors of a malformed patch document.
	ErrBadPatch = errors.New("patch: invalid patch")
	// ErrPatchFailed wraps the errors of a well-formed patch that cannot be
	// applied to the object (a failed test operation, a missing path).
	ErrPatchFailed = errors.New("patch: cannot apply patch")
)

// MaxJSONPatchOps bounds the operations of one JSON patch, as
// kube-apiserver does (10,000).
const MaxJSONPatchOps = 10000

// Apply returns original with p applied. original is the object's JSON;
// dataStruct is a typed value of the object's kind (only read for its
// strategic merge metadata) and may be nil for the other patch types.
func Apply(pt types.PatchType, original, p []byte, dataStruct any) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		ops, err := jsonpatch.DecodePatch(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadPatch, err)
		}
		if len(ops) > MaxJSONPatchOps {
			return nil, fmt.Errorf("%w: %d operations, the limit is %d", ErrBadPatch, len(ops), MaxJSONPatchOps)
		}
		out, err := ops.Apply(original)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPatchFailed, err)
		}
		return out, nil
	case types.MergePatchType:
		if !json.Valid(p) {
			return nil, fmt.Errorf("%w: not a JSON document", ErrBadPatch)
		}
		out, err := jsonpatch.MergePatch(original, p)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPatchFailed, err)
		}
		return out, nil
	case types.StrategicMergePatchType:
		if dataStruct == nil {
			return nil, fmt.Errorf("%w: strategic merge patch is not supported for this resource", ErrBadPatch)
		}
		var patchMap map[string]any
		if err := json.Unmarshal(p, &patchMap); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadPatch, err)
		}
		out, err := strategicpatch.StrategicMergePatch(original, p, dataStruct)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPatchFailed, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unsupported patch type %q", ErrBadPatch, pt)
}
