package openapi

import (
	"testing"

	"k8s.io/apimachinery/pkg/version"

	"github.com/kgate/kgate/storage/registry"
)

// BenchmarkNew is the gateway's startup render: every document of the
// built-in registry.
func BenchmarkNew(b *testing.B) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(reg, version.Info{GitVersion: "v1.37.2"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkServe(b *testing.B) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		b.Fatal(err)
	}
	o, err := New(reg, version.Info{GitVersion: "v1.37.2"})
	if err != nil {
		b.Fatal(err)
	}
	hash := o.current().v3["apis/apps/v1"].hash
	b.ReportAllocs()
	for b.Loop() {
		if resp, ok := o.Serve("/openapi/v3/apis/apps/v1", hash, "application/json"); !ok || resp.Status != 200 {
			b.Fatal("not served")
		}
	}
}
