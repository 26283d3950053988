package negotiate

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestDecode(t *testing.T) {
	f := newFixture(t)
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	_, podRaw := f.served(t, bigPod(1))
	podProto := ObjectProtobuf("v1", "Pod", podRaw)

	const (
		bad      = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","name":"b"},"spec":{"foo":1,"containers":[{"name":"c","bar":2}]}}`
		badYAML  = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\nspec:\n  foo: 1\n"
		strictJS = `Pod in version "v1" cannot be handled as a Pod: strict decoding error: duplicate field "metadata.name", unknown field "spec.foo", unknown field "spec.containers[0].bar"`
	)
	tests := []struct {
		name     string
		body     string
		format   Format
		v        FieldValidation
		wantName string   // decoded metadata.name
		warnings []string // for Warn
		err      string   // error message; the code is always 400
	}{
		{"json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, JSON, Strict, "p", nil, ""},
		{"json without kind", `{"metadata":{"name":"p"}}`, JSON, Strict, "p", nil, ""},
		{"yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n", YAML, Strict, "p", nil, ""},
		{"protobuf", string(podProto), Protobuf, Strict, bigPod(1).Name, nil, ""},
		{"json strict", bad, JSON, Strict, "", nil, strictJS},
		{"json warn", bad, JSON, Warn, "b", []string{`duplicate field "metadata.name"`, `unknown field "spec.foo"`, `unknown field "spec.containers[0].bar"`}, ""},
		{"json ignore", bad, JSON, Ignore, "b", nil, ""},
		{"yaml strict", badYAML, YAML, Strict, "", nil,
			"Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: yaml: unmarshal errors:\n  line 5: key \"name\" already set in map, unknown field \"spec.foo\""},
		{"yaml warn", badYAML, YAML, Warn, "b", []string{`line 5: key "name" already set in map`, `unknown field "spec.foo"`}, ""},
		{"yaml ignore", badYAML, YAML, Ignore, "b", nil, ""},
		{"other kind", `{"apiVersion":"v1","kind":"Service"}`, JSON, Strict, "", nil,
			`Service in version "v1" cannot be handled as a Pod: converting (v1.Service) to (v1.Pod): unknown conversion`},
		{"unknown version", `{"apiVersion":"v9","kind":"Pod"}`, JSON, Ignore, "", nil,
			`Pod in version "v9" cannot be handled as a Pod: no kind "Pod" is registered for version "v9"`},
		{"malformed json", `{"metadata":`, JSON, Warn, "", nil,
			`the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: unexpected end of JSON input ({"metadata":)`},
		{"empty json", ``, JSON, Warn, "", nil,
			`the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)`},
		{"json as protobuf", `{"kind":"Pod"}`, Protobuf, Warn, "", nil,
			`the object provided is unrecognized (must be of type Pod): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] ({"kind":"Pod"})`},
		{"truncated protobuf", string(podProto[:40]), Protobuf, Warn, "", nil, "the object provided is unrecognized (must be of type Pod): "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, warnings, err := f.codec.Decode([]byte(tt.body), tt.format, tt.v, podGVK, &corev1.Pod{})
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("error %v is not a 400", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok || pod.Name != tt.wantName {
				t.Fatalf("decoded %#v, want a pod named %q", obj, tt.wantName)
			}
			if !reflect.DeepEqual(warnings, tt.warnings) {
				t.Fatalf("warnings %q, want %q", warnings, tt.warnings)
			}
		})
	}
}

func TestDecodeOtherGroup(t *testing.T) {
	f := newFixture(t)
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	obj, _, err := f.codec.Decode([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":2}}`), JSON, Strict, gvk, &appsv1.Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	if d := obj.(*appsv1.Deployment); d.Name != "d" || *d.Spec.Replicas != 2 {
		t.Fatalf("decoded %#v", d)
	}
}

func TestParseFieldValidation(t *testing.T) {
	tests := []struct {
		in   string
		want FieldValidation
		err  string
	}{
		{"", Warn, ""},
		{"Warn", Warn, ""},
		{"Ignore", Ignore, ""},
		{"Strict", Strict, ""},
		{"strict", Warn, `CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn"`},
	}
	for _, tt := range tests {
		got, err := ParseFieldValidation(tt.in, "CreateOptions")
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
			t.Errorf("ParseFieldValidation(%q) = %v, %v; want %v, %q", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && !apierrors.IsInvalid(err) {
			t.Errorf("error %v is not a 422", err)
		}
	}
}

func TestEncode(t *testing.T) {
	f := newFixture(t)
	status := func() *metav1.Status {
		return &metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: `pods "p" not found`,
			Details: &metav1.StatusDetails{Name: "p", Kind: "pods"}}
	}
	t.Run("status json", func(t *testing.T) {
		got, err := f.codec.Encode(status(), JSON, false)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"p\" not found","reason":"NotFound","details":{"name":"p","kind":"pods"},"code":404}` + "\n"
		if string(got) != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("status pretty", func(t *testing.T) {
		got, err := f.codec.Encode(status(), JSON, true)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, []byte("{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",")) {
			t.Fatalf("not indented: %s", got)
		}
	})
	for _, format := range []Format{JSON, YAML, Protobuf} {
		t.Run("status round trip "+format.String(), func(t *testing.T) {
			got, err := f.codec.Encode(status(), format, false)
			if err != nil {
				t.Fatal(err)
			}
			back, gvk, err := f.codec.factory.UniversalDeserializer().Decode(got, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := status()
			want.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Status"})
			if gvk.Kind != "Status" || !reflect.DeepEqual(back, want) {
				t.Fatalf("decoded %v %#v", gvk, back)
			}
		})
	}
	t.Run("table keeps the asked version", func(t *testing.T) {
		table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string"}},
			Rows: []metav1.TableRow{{Cells: []any{"p"}}}}
		table.SetGroupVersionKind(metav1beta1.SchemeGroupVersion.WithKind("Table"))
		got, err := f.codec.Encode(table, JSON, false)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, []byte(`{"kind":"Table","apiVersion":"meta.k8s.io/v1beta1","metadata":{},"columnDefinitions":[`)) {
			t.Fatalf("got %s", got)
		}
	})
	t.Run("unknown type", func(t *testing.T) {
		if _, err := f.codec.Encode(&unregistered{}, JSON, false); err == nil {
			t.Fatal("no error")
		}
	})
}

type unregistered struct{ metav1.TypeMeta }

func (u *unregistered) DeepCopyObject() runtime.Object { c := *u; return &c }

// FuzzDecode feeds random bodies to every format and validation: no
// panic, and every failure is a 400.
func FuzzDecode(f *testing.F) {
	fx := newFixture(f)
	_, raw := fx.served(f, bigPod(1))
	seeds := [][]byte{
		[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","name":"b"},"spec":{"foo":1}}`),
		[]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n"),
		ObjectProtobuf("v1", "Pod", raw),
		[]byte(`[1,2]`), []byte(`null`), []byte("k8s\x00\x0a\x00"),
	}
	for i, s := range seeds {
		f.Add(s, uint8(i), uint8(i))
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	f.Fuzz(func(t *testing.T, body []byte, format, validation uint8) {
		fm := Format(format % 3)
		v := FieldValidation(validation % 3)
		obj, _, err := fx.codec.Decode(body, fm, v, gvk, &corev1.Pod{})
		if err != nil {
			if !apierrors.IsBadRequest(err) {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if _, ok := obj.(*corev1.Pod); !ok {
			t.Fatalf("decoded %T", obj)
		}
	})
}
