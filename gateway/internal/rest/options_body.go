package rest

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/kgate/kgate/gateway/internal/negotiate"
)

// protoMessage is a gogo-generated protobuf type of k8s.io/api.
type protoMessage interface{ Unmarshal([]byte) error }

var protobufMagic = []byte("k8s\x00")

// decodeOptions decodes an options body (DeleteOptions) leniently in any
// format: clients send it with whatever apiVersion they were built with.
func decodeOptions(body []byte, f negotiate.Format, into protoMessage) error {
	switch f {
	case negotiate.Protobuf:
		raw, ok := bytes.CutPrefix(body, protobufMagic)
		if !ok {
			return fmt.Errorf("cannot decode options: protobuf body without the k8s magic")
		}
		var u runtime.Unknown
		if err := u.Unmarshal(raw); err != nil {
			return fmt.Errorf("cannot decode options: %w", err)
		}
		if err := into.Unmarshal(u.Raw); err != nil {
			return fmt.Errorf("cannot decode options: %w", err)
		}
		return nil
	case negotiate.YAML:
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return fmt.Errorf("cannot decode options: %w", err)
		}
		body = j
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, into); err != nil {
		return fmt.Errorf("cannot decode options: %w", err)
	}
	return nil
}
