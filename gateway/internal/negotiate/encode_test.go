package negotiate

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"math"
	"testing"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

func ptr[T any](v T) *T { return &v }

// objects are single objects of several kinds, as stored.
func objects() []runtime.Object {
	return []runtime.Object{
		bigPod(1),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns", ResourceVersion: "7"}, Data: map[string]string{"a": "<b>&", "z": "\u2028"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"}, Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(3))}},
		&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"},
	}
}

func TestObjectProtobuf(t *testing.T) {
	f := newFixture(t)
	for _, obj := range objects() {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			_, raw := f.served(t, obj)
			kinds, _, _ := f.scheme.ObjectKinds(obj)
			gvk := kinds[0]
			got := ObjectProtobuf(gvk.GroupVersion().String(), gvk.Kind, raw)

			typed := obj.DeepCopyObject()
			typed.GetObjectKind().SetGroupVersionKind(gvk)
			if want := encode(t, f.proto, typed); !bytes.Equal(got, want) {
				t.Fatalf("differs from apimachinery:\ngot  %q\nwant %q", got, want)
			}
			back, _, err := f.proto.Decode(got, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(back, typed) {
				t.Fatalf("decoded %#v, want %#v", back, typed)
			}
			if n := len(AppendObjectProtobuf([]byte("x"), gvk.GroupVersion().String(), gvk.Kind, raw)); n != len(got)+1 {
				t.Fatalf("append wrote %d bytes, want %d", n, len(got)+1)
			}
		})
	}
}

func TestObjectJSONAndYAML(t *testing.T) {
	f := newFixture(t)
	for _, obj := range objects() {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			js, _ := f.served(t, obj)
			typed := obj.DeepCopyObject()
			kinds, _, _ := f.scheme.ObjectKinds(obj)
			typed.GetObjectKind().SetGroupVersionKind(kinds[0])

			if got, want := ObjectJSON(js), bytes.TrimRight(encode(t, f.json, typed), "\n"); !bytes.Equal(got, want) {
				t.Fatalf("JSON:\ngot  %s\nwant %s", got, want)
			}
			y, err := ObjectYAML(js)
			if err != nil {
				t.Fatal(err)
			}
			if want := encode(t, f.yaml, typed); !bytes.Equal(y, want) {
				t.Fatalf("YAML:\ngot  %s\nwant %s", y, want)
			}
			p, err := PrettyJSON(js)
			if err != nil {
				t.Fatal(err)
			}
			if want := encode(t, f.pretty, typed); !bytes.Equal(p, want) {
				t.Fatalf("pretty JSON:\ngot  %s\nwant %s", p, want)
			}
		})
	}
}

// listCase is a PodList and the List built from its items' served bytes.
type listCase struct {
	name string
	want *corev1.PodList
}

func listCases() []listCase {
	pods := func(n int) []corev1.Pod {
		out := make([]corev1.Pod, n)
		for i := range out {
			out[i] = *bigPod(i)
		}
		return out
	}
	return []listCase{
		{"empty", &corev1.PodList{Items: []corev1.Pod{}}},
		{"empty with rv", &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: []corev1.Pod{}}},
		{"one", &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: pods(1)}},
		{"page", &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDIsInN0YXJ0IjoiZGVmYXVsdC93ZWIifQ", RemainingItemCount: ptr(int64(497))}, Items: pods(3)}},
		{"remaining zero", &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "c", RemainingItemCount: ptr(int64(0))}, Items: pods(2)}},
		{"odd strings", &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "<&>\"\\\n\u2028\xff", Continue: "é", RemainingItemCount: ptr(int64(math.MaxInt64))}, Items: pods(1)}},
		{"negative remaining", &corev1.PodList{ListMeta: metav1.ListMeta{RemainingItemCount: ptr(int64(-1))}, Items: pods(1)}},
	}
}

// list builds the List of want from the served bytes of its items.
func (f *fixture) list(t testing.TB, want *corev1.PodList, protobufItems bool) *List {
	l := &List{APIVersion: "v1", Kind: "PodList", ResourceVersion: want.ResourceVersion, Continue: want.Continue, RemainingItemCount: want.RemainingItemCount}
	for i := range want.Items {
		js, raw := f.served(t, &want.Items[i])
		if protobufItems {
			l.Items = append(l.Items, raw)
		} else {
			l.Items = append(l.Items, js)
		}
	}
	return l
}

func TestListProtobuf(t *testing.T) {
	f := newFixture(t)
	streaming := protobuf.NewSerializerWithOptions(f.scheme, f.scheme, protobuf.SerializerOptions{StreamingCollectionsEncoding: true})
	for _, tc := range listCases() {
		t.Run(tc.name, func(t *testing.T) {
			l := f.list(t, tc.want, true)
			got := ListProtobuf(l)
			want := tc.want.DeepCopy()
			want.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
			if w := encode(t, f.proto, want); !bytes.Equal(got, w) {
				t.Fatalf("differs from apimachinery (%d vs %d bytes)", len(got), len(w))
			}
			if w := encode(t, streaming, want); !bytes.Equal(got, w) {
				t.Fatalf("differs from apimachinery's streaming encoder (%d vs %d bytes)", len(got), len(w))
			}
			if len(got) != listProtobufSize(l) {
				t.Fatalf("size %d, computed %d", len(got), listProtobufSize(l))
			}
			back := &corev1.PodList{}
			if _, _, err := f.proto.Decode(got, nil, back); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(back, want) {
				t.Fatalf("decoded list differs")
			}
		})
	}
}

func TestListJSON(t *testing.T) {
	f := newFixture(t)
	streaming := json.NewSerializerWithOptions(json.DefaultMetaFactory, f.scheme, f.scheme, json.SerializerOptions{StreamingCollectionsEncoding: true})
	for _, tc := range listCases() {
		t.Run(tc.name, func(t *testing.T) {
			l := f.list(t, tc.want, false)
			got := ListJSON(l)
			want := tc.want.DeepCopy()
			want.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
			if w := encode(t, f.json, want); !bytes.Equal(got, w) {
				t.Fatalf("differs from apimachinery:\ngot  %.300s\nwant %.300s", got, w)
			}
			if w := encode(t, streaming, want); !bytes.Equal(got, w) {
				t.Fatalf("differs from apimachinery's streaming encoder:\ngot  %.300s\nwant %.300s", got, w)
			}
			if cap(got) < len(got) || len(got) > listJSONSize(l) {
				t.Fatalf("size bound %d < %d", listJSONSize(l), len(got))
			}
			back := &corev1.PodList{}
			if _, _, err := f.json.Decode(got, nil, back); err != nil {
				t.Fatal(err)
			}
			// invalid UTF-8 becomes U+FFFD in JSON, upstream too
			if utf8.ValidString(want.ResourceVersion) && !equality.Semantic.DeepEqual(back, want) {
				t.Fatalf("decoded list differs")
			}

			y, err := ListYAML(l)
			if err != nil {
				t.Fatal(err)
			}
			if w := encode(t, f.yaml, want); !bytes.Equal(y, w) {
				t.Fatalf("YAML differs:\ngot  %.300s\nwant %.300s", y, w)
			}
		})
	}
}

func TestListJSONKeepItemTypeMeta(t *testing.T) {
	items := [][]byte{[]byte(`{"apiVersion":"x.io/v1","kind":"Foo","metadata":{"name":"a"}}` + "\n"), []byte(`{"kind":"Foo","apiVersion":"x.io/v1"}`)}
	got := ListJSON(&List{APIVersion: "x.io/v1", Kind: "FooList", ResourceVersion: "3", Items: items, KeepItemTypeMeta: true})
	want := `{"kind":"FooList","apiVersion":"x.io/v1","metadata":{"resourceVersion":"3"},"items":[{"apiVersion":"x.io/v1","kind":"Foo","metadata":{"name":"a"}},{"kind":"Foo","apiVersion":"x.io/v1"}]}` + "\n"
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestAfterTypeMeta(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"kind":"Pod","apiVersion":"v1","metadata":{}}`, `{"metadata":{}}`},
		{`{"kind":"Pod","apiVersion":"v1"}`, `{}`},
		{`{"metadata":{}}`, `{"metadata":{}}`},
		{`{"apiVersion":"v1","kind":"Pod","metadata":{}}`, `{"apiVersion":"v1","kind":"Pod","metadata":{}}`},
		{`{"kind":"P\"od","apiVersion":"v1","metadata":{}}`, `{"kind":"P\"od","apiVersion":"v1","metadata":{}}`},
		{`{"kind":"Pod","metadata":{}}`, `{"kind":"Pod","metadata":{}}`},
		{`{"kind":"Pod","apiVersion":"v1"`, `{"kind":"Pod","apiVersion":"v1"`},
		{`{"kind":"Pod`, `{"kind":"Pod`},
		{``, ``},
	}
	for _, tt := range tests {
		if got := appendItemJSON(nil, []byte(tt.in), false); string(got) != tt.want {
			t.Errorf("appendItemJSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "abc", "<a href=\"x\">&</a>", "\x00\x01\x1f\x7f", "\b\f\n\r\t\\", "é ü 日本", "\u2028\u2029", "\xff\xfe", "a\xc3", "\U0001F600", "\ufffd"} {
		want, err := stdjson.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
		if len(appendJSONString(nil, s)) > jsonStringSize(s) {
			t.Errorf("size bound too small for %q", s)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "<>&", "\u2028", "\xff", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := stdjson.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := appendJSONString(nil, s)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
		if len(got) > jsonStringSize(s) {
			t.Fatalf("size bound %d < %d", jsonStringSize(s), len(got))
		}
	})
}
