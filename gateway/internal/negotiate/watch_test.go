package negotiate

import (
	"bytes"
	"errors"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	restclientwatch "k8s.io/client-go/rest/watch"
)

type event struct {
	typ watch.EventType
	obj runtime.Object
}

// events is a watch stream of every event type, the objects typed as a
// client decodes them (apiVersion and kind set).
func events() []event {
	typed := func(o runtime.Object, kind string) runtime.Object {
		o.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		return o
	}
	pod := typed(bigPod(1), "Pod")
	changed := typed(bigPod(1), "Pod").(*corev1.Pod)
	changed.ResourceVersion = "200001"
	changed.Labels["x"] = "y"
	bookmark := typed(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "200002",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}, "Pod")
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (40)"}
	return []event{
		{watch.Added, pod},
		{watch.Modified, changed},
		{watch.Bookmark, bookmark},
		{watch.Deleted, changed},
		{watch.Error, status},
	}
}

// upstreamWatch frames events as kube-apiserver's watch encoder does: the
// object encoded by the embedded encoder, wrapped in a metav1.WatchEvent
// encoded by the stream serializer through the framer.
func upstreamWatch(t *testing.T, embedded, stream runtime.Encoder, framer runtime.Framer, evs []event) []byte {
	var out bytes.Buffer
	w := framer.NewFrameWriter(&out)
	for _, e := range evs {
		raw := encode(t, embedded, e.obj)
		if err := stream.Encode(&metav1.WatchEvent{Type: string(e.typ), Object: runtime.RawExtension{Raw: raw}}, w); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// clientDecode reads a watch stream as client-go does.
func clientDecode(t *testing.T, f *fixture, stream []byte, streamSerializer runtime.Serializer, framer runtime.Framer) []event {
	t.Helper()
	frames := framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(frames, streamSerializer), f.codec.factory.UniversalDeserializer())
	var out []event
	for {
		typ, obj, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("client-go cannot decode event %d: %v", len(out), err)
		}
		out = append(out, event{typ, obj})
	}
}

func checkEvents(t *testing.T, got, want []event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("decoded %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].typ != want[i].typ || !equality.Semantic.DeepEqual(got[i].obj, want[i].obj) {
			t.Errorf("event %d: got %s %#v\nwant %s %#v", i, got[i].typ, got[i].obj, want[i].typ, want[i].obj)
		}
	}
}

func TestWatchJSON(t *testing.T) {
	f := newFixture(t)
	evs := events()
	var stream []byte
	for _, e := range evs {
		var obj []byte
		if e.typ == watch.Error {
			var err error
			if obj, err = f.codec.Encode(e.obj.DeepCopyObject(), JSON, false); err != nil {
				t.Fatal(err)
			}
		} else {
			obj, _ = f.served(t, e.obj)
		}
		stream = AppendWatchJSON(stream, e.typ, obj)
	}
	if want := upstreamWatch(t, f.json, f.json, json.Framer, evs); !bytes.Equal(stream, want) {
		t.Fatalf("differs from kube-apiserver's framing:\ngot  %.400s\nwant %.400s", stream, want)
	}
	checkEvents(t, clientDecode(t, f, stream, f.json, json.Framer), evs)
}

func TestWatchProtobuf(t *testing.T) {
	f := newFixture(t)
	evs := events()
	var stream []byte
	for _, e := range evs {
		if e.typ == watch.Error {
			status, err := f.codec.Encode(e.obj.DeepCopyObject(), Protobuf, false)
			if err != nil {
				t.Fatal(err)
			}
			stream = AppendWatchProtobufObject(stream, e.typ, status)
			continue
		}
		_, raw := f.served(t, e.obj)
		gvk := e.obj.GetObjectKind().GroupVersionKind()
		stream = AppendWatchProtobuf(stream, e.typ, gvk.GroupVersion().String(), gvk.Kind, raw)
	}
	if want := upstreamWatch(t, f.proto, f.raw, protobuf.LengthDelimitedFramer, evs); !bytes.Equal(stream, want) {
		t.Fatalf("differs from kube-apiserver's framing (%d vs %d bytes)", len(stream), len(want))
	}
	checkEvents(t, clientDecode(t, f, stream, f.raw, protobuf.LengthDelimitedFramer), evs)
}
