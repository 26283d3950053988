package defaults

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	"github.com/kgate/kgate/storage/registry"
)

// TestIdempotent checks for every built-in kind that applying the defaults
// a second time changes nothing, on random objects in which about half the
// strings are empty and the resource lists hold real resource names.
func TestIdempotent(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	rounds := 30
	if testing.Short() {
		rounds = 5
	}
	for _, res := range registry.Builtin() {
		t.Run(res.Group+"/"+res.Resource, func(t *testing.T) {
			fill := randfill.NewWithSeed(int64(len(res.Resource))).
				NilChance(0.4).NumElements(0, 2).MaxDepth(12).Funcs(
				func(s *string, c randfill.Continue) {
					if c.Bool() {
						*s = c.String(6)
					}
				},
				func(q *resource.Quantity, c randfill.Continue) {
					*q = *resource.NewScaledQuantity(c.Int63n(5_000_000), -6)
				},
				func(r *runtime.RawExtension, c randfill.Continue) {
					r.Raw = []byte(`{"k":"v"}`)
				},
				func(l *corev1.ResourceList, c randfill.Continue) {
					names := []corev1.ResourceName{"cpu", "memory", "hugepages-2Mi", "example.com/gpu"}
					*l = corev1.ResourceList{}
					for _, n := range names {
						if c.Bool() {
							var q resource.Quantity
							c.Fill(&q)
							(*l)[n] = q
						}
					}
				},
			)
			for range rounds {
				obj, err := scheme.New(res.GVK())
				if err != nil {
					t.Fatal(err)
				}
				fill.Fill(obj)
				Apply(obj)
				again := obj.DeepCopyObject()
				Apply(again)
				if !apiequality.Semantic.DeepEqual(obj, again) {
					t.Fatalf("second Apply changed the object\nonce:  %s\ntwice: %s", dump(obj), dump(again))
				}
			}
			empty, _ := scheme.New(res.GVK())
			Apply(empty) // must not panic on an empty object
		})
	}
}

func dump(obj runtime.Object) string {
	b, err := json.Marshal(obj)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
