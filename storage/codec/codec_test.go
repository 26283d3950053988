package codec_test

import (
	"bytes"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
)

func newCodec(t testing.TB) (*codec.Codec, *runtime.Scheme) {
	t.Helper()
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return codec.New(scheme), scheme
}

func samplePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "7", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func TestEncodeJSONSetsKindAndNoNewline(t *testing.T) {
	c, _ := newCodec(t)
	b, err := c.EncodeJSON(samplePod())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte(`{"kind":"Pod","apiVersion":"v1"`)) {
		t.Errorf("JSON starts %q, want kind and apiVersion first", b[:min(len(b), 40)])
	}
	if bytes.HasSuffix(b, []byte("\n")) {
		t.Error("JSON ends with a newline")
	}
	if codec.IsProtobuf(b) {
		t.Error("JSON reported as protobuf")
	}
}

// TestRoundTrip: what kgate writes (JSON) and what kube-apiserver writes
// (protobuf with the k8s magic) both decode to the object written.
func TestRoundTrip(t *testing.T) {
	c, _ := newCodec(t)
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		into func() runtime.Object
	}{
		{"pod", samplePod(), func() runtime.Object { return &corev1.Pod{} }},
		{"deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"}}, func() runtime.Object { return &appsv1.Deployment{} }},
		{"namespace", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}, func() runtime.Object { return &corev1.Namespace{} }},
	} {
		for _, enc := range []struct {
			name  string
			f     func(runtime.Object) ([]byte, error)
			proto bool
		}{{"json", c.EncodeJSON, false}, {"protobuf", c.EncodeProtobuf, true}} {
			t.Run(tc.name+"/"+enc.name, func(t *testing.T) {
				want := tc.obj.DeepCopyObject()
				b, err := enc.f(tc.obj.DeepCopyObject())
				if err != nil {
					t.Fatal(err)
				}
				if codec.IsProtobuf(b) != enc.proto {
					t.Fatalf("IsProtobuf = %v, want %v", codec.IsProtobuf(b), enc.proto)
				}
				got := tc.into()
				if err := c.Decode(b, got); err != nil {
					t.Fatal(err)
				}
				gvk, err := c.Kind(want)
				if err != nil {
					t.Fatal(err)
				}
				want.GetObjectKind().SetGroupVersionKind(gvk)
				// Both decoders leave the kind as read; compare without it.
				got.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
				want.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
				if !equalJSON(t, c, got, want) {
					t.Errorf("round trip changed the object")
				}
			})
		}
	}
}

func equalJSON(t *testing.T, c *codec.Codec, a, b runtime.Object) bool {
	t.Helper()
	ja, err := c.EncodeJSON(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := c.EncodeJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja, jb) {
		t.Logf("got  %s\nwant %s", ja, jb)
		return false
	}
	return true
}

// TestDecodeUpstreamProtobuf decodes a value as kube-apiserver's own
// protobuf serializer writes it, not through this package's encoder.
func TestDecodeUpstreamProtobuf(t *testing.T) {
	c, scheme := newCodec(t)
	pod := samplePod()
	pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme, scheme).Encode(pod, &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("k8s\x00")) {
		t.Fatalf("upstream value %q lacks the magic", buf.Bytes()[:4])
	}
	var got corev1.Pod
	if err := c.Decode(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "p" || got.Spec.NodeName != "n1" || got.Labels["app"] != "web" || got.ResourceVersion != "7" {
		t.Errorf("decoded %+v", got.ObjectMeta)
	}
}

func TestEncodeRawProtobufIsBare(t *testing.T) {
	c, _ := newCodec(t)
	raw, err := c.EncodeRawProtobuf(samplePod())
	if err != nil {
		t.Fatal(err)
	}
	if codec.IsProtobuf(raw) {
		t.Fatal("raw protobuf carries the envelope magic")
	}
	var got corev1.Pod
	if err := got.Unmarshal(raw); err != nil {
		t.Fatalf("raw protobuf is not a Pod message: %v", err)
	}
	if got.Name != "p" || got.Spec.Containers[0].Image != "busybox" {
		t.Errorf("decoded %+v", got)
	}
}

func TestDecodeBadInput(t *testing.T) {
	c, _ := newCodec(t)
	svcProto, err := c.EncodeProtobuf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		value []byte
	}{
		{"empty", nil},
		{"not json", []byte("{not json")},
		// A value of another kind must not decode into an empty object.
		{"wrong kind", []byte(`{"kind":"Service","apiVersion":"v1","metadata":{"name":"p"}}`)},
		{"wrong kind protobuf", svcProto},
		{"unknown kind", []byte(`{"kind":"Nope","apiVersion":"v9","metadata":{"name":"p"}}`)},
		{"magic only", []byte("k8s\x00")},
		{"magic and garbage", []byte("k8s\x00\xff\xff\xff\xff")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pod corev1.Pod
			err := c.Decode(tc.value, &pod)
			if err == nil {
				t.Fatalf("decoded %q into %+v", tc.value, pod.ObjectMeta)
			}
		})
	}
}

func TestKindOfUnknownType(t *testing.T) {
	c, _ := newCodec(t)
	type notRegistered struct{ corev1.Pod }
	if _, err := c.Kind(&notRegistered{}); err == nil {
		t.Fatal("kind of an unregistered type")
	}
	if _, err := c.EncodeJSON(&notRegistered{}); err == nil {
		t.Fatal("encoded an unregistered type")
	}
	if _, err := c.EncodeProtobuf(&notRegistered{}); err == nil {
		t.Fatal("encoded an unregistered type as protobuf")
	}
}

// FuzzDecode: stored values are untrusted (anything may write etcd); no
// input may panic the decoder, and what decodes re-encodes and decodes to
// the same object.
func FuzzDecode(f *testing.F) {
	c, _ := newCodec(f)
	j, _ := c.EncodeJSON(samplePod())
	p, _ := c.EncodeProtobuf(samplePod())
	f.Add(j)
	f.Add(p)
	f.Add([]byte("k8s\x00"))
	f.Add([]byte(`{"kind":"Pod","apiVersion":"v1"}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		var pod corev1.Pod
		if err := c.Decode(value, &pod); err != nil {
			return
		}
		b, err := c.EncodeJSON(&pod)
		if err != nil {
			t.Fatalf("decoded object does not encode: %v", err)
		}
		var again corev1.Pod
		if err := c.Decode(b, &again); err != nil {
			t.Fatalf("re-encoded object does not decode: %v\n%s", err, b)
		}
	})
}

func TestUnstructured(t *testing.T) {
	c := codec.New(runtime.NewScheme())
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns"},
		"spec":     map[string]any{"size": int64(3), "ratio": 0.5},
	}}
	b, err := c.EncodeJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
	if err := c.Decode(b, out); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(in.Object, out.Object) {
		t.Fatalf("round trip of %s: got %v, want %v", b, out.Object, in.Object)
	}
	if _, err := c.EncodeJSON(&unstructured.Unstructured{Object: map[string]any{}}); err == nil {
		t.Error("encoded an unstructured object without kind")
	}
}
