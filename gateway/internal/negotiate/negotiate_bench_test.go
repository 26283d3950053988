package negotiate

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

const benchPods = 500

// benchList is a list of 500 ~4.7 KB pods as the cache node keeps them.
func benchList(b *testing.B) (f *fixture, jsonList, protoList *List, pods *corev1.PodList) {
	f = newFixture(b)
	pods = &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "123456"}}
	jsonList = &List{APIVersion: "v1", Kind: "PodList", ResourceVersion: "123456"}
	protoList = &List{APIVersion: "v1", Kind: "PodList", ResourceVersion: "123456"}
	size := 0
	for i := range benchPods {
		p := bigPod(i)
		js, raw := f.served(b, p)
		jsonList.Items = append(jsonList.Items, js)
		protoList.Items = append(protoList.Items, raw)
		pods.Items = append(pods.Items, *p)
		size += len(js)
	}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	b.ReportMetric(float64(size/benchPods), "json-bytes/pod")
	return f, jsonList, protoList, pods
}

func BenchmarkListJSON(b *testing.B) {
	_, l, _, _ := benchList(b)
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = ListJSON(l)
		}
	})
	b.Run("append", func(b *testing.B) {
		buf := make([]byte, 0, listJSONSize(l))
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendListJSON(buf[:0], l)
		}
		b.SetBytes(int64(len(buf)))
	})
}

func BenchmarkListProtobuf(b *testing.B) {
	_, _, l, _ := benchList(b)
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = ListProtobuf(l)
		}
	})
	b.Run("append", func(b *testing.B) {
		buf := make([]byte, 0, listProtobufSize(l))
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendListProtobuf(buf[:0], l)
		}
		b.SetBytes(int64(len(buf)))
	})
}

// BenchmarkListUpstream is apimachinery encoding the same typed list, for
// comparison.
func BenchmarkListUpstream(b *testing.B) {
	f, _, _, pods := benchList(b)
	var buf bytes.Buffer
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := f.json.Encode(pods, &buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := f.proto.Encode(pods, &buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkWatchFrame(b *testing.B) {
	f := newFixture(b)
	js, raw := f.served(b, bigPod(1))
	buf := make([]byte, 0, 2*len(js))
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendWatchJSON(buf[:0], watch.Modified, js)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendWatchProtobuf(buf[:0], watch.Modified, "v1", "Pod", raw)
		}
		b.SetBytes(int64(len(buf)))
	})
}

func BenchmarkNegotiate(b *testing.B) {
	for _, h := range []struct{ name, accept string }{
		{"client-go", "application/vnd.kubernetes.protobuf, */*"},
		{"kubectl", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"},
		{"empty", ""},
	} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Negotiate(h.accept, builtin); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("content-type", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ContentType("application/json; charset=utf-8"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
