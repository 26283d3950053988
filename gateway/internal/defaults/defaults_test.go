package defaults

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// applyCase is one object as a client sends it and as kube-apiserver
// stores it after defaulting (system metadata and what admission plugins
// and strategies add left out).
type applyCase struct {
	name string
	in   string
	want string
}

// runCases decodes each case's input into a new object of obj's type,
// applies the defaults and compares the result with want, both in their
// canonical JSON form.
func runCases(t *testing.T, obj runtime.Object, cases []applyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decode(t, obj, c.in)
			Apply(got)
			want := decode(t, obj, c.want)
			if g, w := encode(t, got), encode(t, want); !bytes.Equal(g, w) {
				t.Errorf("defaulted object differs\n got: %s\nwant: %s", g, w)
			}
		})
	}
}

// decode returns a new object of obj's type decoded from s.
func decode(t *testing.T, obj runtime.Object, s string) runtime.Object {
	t.Helper()
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("cannot decode %T from %s: %v", obj, s, err)
	}
	return out
}

func encode(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("cannot encode %T: %v", obj, err)
	}
	return b
}
