package node

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	nodeauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/node"

	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
)

// BenchmarkPodStatusUpdate is what a gateway's Node authorizer feed
// spends on a status update of a bound pod (most pod changes): the
// pod's decode, as the feed did for every change, against the sink's
// skip from the JSON alone.
func BenchmarkPodStatusUpdate(b *testing.B) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		b.Fatal(err)
	}
	c := codec.New(reg.Scheme())
	p := pod("ns", "web-0", "node-1", "u1", uses("sa", "s1", "s2", "cm", "claim"))
	for i := range 6 {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", i), Image: "registry.example.com/team/app:v1.2.3", Args: []string{"--port=8080", "--verbose"},
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "two"}, {Name: "C", Value: "three"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: fmt.Sprintf("c%d", i), Ready: true, Image: "registry.example.com/team/app:v1.2.3",
			ImageID: "registry.example.com/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		})
	}
	p.Status.Phase = corev1.PodRunning
	data, err := c.EncodeJSON(p)
	if err != nil {
		b.Fatal(err)
	}
	sink := Sinks(nodeauthorizer.NewGraph())[podsGVR]
	if err := sink.Upsert(p); err != nil {
		b.Fatal(err)
	}
	res, _ := reg.Lookup(podsGVR)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			obj, err := reg.NewStored(res)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Decode(data, obj); err != nil {
				b.Fatal(err)
			}
			if err := sink.Upsert(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("skip", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if !sink.(feed.Skipper).Skip("ns", "web-0", data) {
				b.Fatal("not skipped")
			}
		}
	})
}
