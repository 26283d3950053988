package reflector

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func benchPod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0", UID: "6f1c1b5e-3d7a-4f0e-9a51-1c2d3e4f5a6b",
			Labels:      map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "5d8f7c9b6"},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}},
		Spec: corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "default"},
	}
	for i := range 3 {
		c := corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "registry.example.com/team/app:v1.2.3",
			Args: []string{"--port=8080", "--verbose"},
			Env:  []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "two"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

func benchDecoder(b *testing.B, eager bool) (*decoder, *codec.Codec) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		b.Fatal(err)
	}
	table, err := ranges.Default(reg)
	if err != nil {
		b.Fatal(err)
	}
	rng, _ := table.ByID("pods")
	c := codec.New(reg.Scheme())
	d, err := newDecoder(rng, reg, c, eager, nil)
	if err != nil {
		b.Fatal(err)
	}
	return d, c
}

// BenchmarkDecode is the per-object cost of the reflector: decode the etcd
// value, set resourceVersion, compute labels and fields, encode the served
// JSON (and, eager, the protobuf).
func BenchmarkDecode(b *testing.B) {
	for _, tc := range []struct {
		name         string
		proto, eager bool
	}{{"json", false, false}, {"protobuf", true, false}, {"protobuf eager", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			d, c := benchDecoder(b, tc.eager)
			var value []byte
			var err error
			if tc.proto {
				value, err = c.EncodeProtobuf(benchPod())
			} else {
				value, err = c.EncodeJSON(benchPod())
			}
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.entry("/registry/pods/default/web-0", value, 42); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLazyProtobuf is the cost of an entry's first protobuf read.
func BenchmarkLazyProtobuf(b *testing.B) {
	d, c := benchDecoder(b, false)
	json, err := c.EncodeJSON(benchPod())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.protobufFromJSON(json); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRetained is what the store keeps per object: the heap held by
// entries of distinct pods (b.N of them) after a GC, per entry, with the
// served JSON's size for comparison; "protobuf read" once every entry
// also served protobuf (client-go's default), which keeps both forms.
func BenchmarkRetained(b *testing.B) {
	for _, withProto := range []bool{false, true} {
		name := "json only"
		if withProto {
			name = "protobuf read"
		}
		b.Run(name, func(b *testing.B) {
			d, c := benchDecoder(b, false)
			values := make([][]byte, b.N)
			for i := range values {
				p := benchPod()
				p.Name = fmt.Sprintf("web-%d", i)
				v, err := c.EncodeJSON(p)
				if err != nil {
					b.Fatal(err)
				}
				values[i] = v
			}
			entries := make([]*store.Entry, b.N)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := range entries {
				e, err := d.entry(fmt.Sprintf("/registry/pods/default/web-%d", i), values[i], int64(i+1))
				if err != nil {
					b.Fatal(err)
				}
				if withProto {
					if _, err := e.Protobuf(); err != nil {
						b.Fatal(err)
					}
				}
				entries[i] = e
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			var jsonBytes int
			for _, e := range entries {
				jsonBytes += len(e.JSON)
			}
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heapB/object")
			b.ReportMetric(float64(jsonBytes)/float64(b.N), "jsonB/object")
			runtime.KeepAlive(entries)
		})
	}
}
