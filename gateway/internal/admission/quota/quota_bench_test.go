package quota

import (
	"context"
	"testing"

	"github.com/kgate/kgate/gateway/internal/admission"
)

// BenchmarkNoQuota is a pod update, and its stored status update, in a
// namespace without quotas: quota admission costs nothing.
func BenchmarkNoQuota(b *testing.B) {
	p := Plugin{List: list{}}
	ctx := context.Background()
	old, next := pod("100m"), pod("200m")
	b.ReportAllocs()
	for b.Loop() {
		a := &admission.Attributes{Resource: pods, Operation: admission.Update, Namespace: "ns", Name: "p", Object: next, OldObject: old}
		if err := p.Validate(ctx, a); err != nil {
			b.Fatal(err)
		}
		a.Subresource = "status"
		p.Finish(ctx, a, next, nil)
	}
}
