package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime"
)

// protobufMagic starts every Kubernetes protobuf body.
var protobufMagic = []byte("k8s\x00")

// rawList reads what a list scenario needs from an undecoded body — the
// item count and the continue token — without building objects, so that
// decode=false measures the server rather than the client's decoding.
func rawList(body []byte, format string) (items int, cont string, err error) {
	if format == "json" {
		var l struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &l); err != nil {
			return 0, "", fmt.Errorf("cannot read list: %w", err)
		}
		return len(l.Items), l.Metadata.Continue, nil
	}
	if !bytes.HasPrefix(body, protobufMagic) {
		return 0, "", errors.New("not a Kubernetes protobuf body")
	}
	var u runtime.Unknown
	if err := u.Unmarshal(body[len(protobufMagic):]); err != nil {
		return 0, "", fmt.Errorf("cannot read protobuf envelope: %w", err)
	}
	// PodList: 1 = ListMeta, 2 = items (repeated). ListMeta: 3 = continue.
	b := u.Raw
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, "", protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return 0, "", protowire.ParseError(m)
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return 0, "", protowire.ParseError(m)
		}
		b = b[m:]
		switch num {
		case 1:
			if cont, err = listMetaContinue(v); err != nil {
				return 0, "", err
			}
		case 2:
			items++
		}
	}
	return items, cont, nil
}

func listMetaContinue(b []byte) (string, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		b = b[n:]
		if num == 3 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return "", protowire.ParseError(m)
			}
			return string(v), nil
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", protowire.ParseError(m)
		}
		b = b[m:]
	}
	return "", nil
}
