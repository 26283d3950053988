package builtin

import (
	"testing"

	"github.com/kgate/kgate/storage/registry"
)

// TestEveryServedResourceHasAStrategy fails when registry.Builtin() serves
// a resource that has no upstream strategy and is not a listed exception,
// and when an exception or a strategy names a resource no longer served.
func TestEveryServedResourceHasAStrategy(t *testing.T) {
	s, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	table := newStrategies(s, resolverFor(registry.Builtin()))
	served := make(map[string]bool)
	covered := 0
	for _, r := range registry.Builtin() {
		gr := r.GVR().GroupResource()
		served[gr.String()] = true
		why, exempt := noStrategy[gr]
		st, ok := table[gr]
		switch {
		case exempt && ok:
			t.Errorf("%s has a strategy and is listed in noStrategy (%s): keep one", gr, why)
		case exempt:
			if !r.CreateOnly() {
				t.Errorf("%s is listed in noStrategy but is not create-only: it is stored, so upstream runs a strategy for it", gr)
			}
		case !ok:
			t.Errorf("%s is served but has no upstream strategy: add it to newStrategies", gr)
		default:
			covered++
			if st.main == nil {
				t.Errorf("%s: nil strategy", gr)
			}
			if got, want := st.main.NamespaceScoped(), r.Namespaced; got != want {
				t.Errorf("%s: upstream strategy NamespaceScoped() = %v, registry says namespaced = %v", gr, got, want)
			}
			for _, sub := range r.Subresources {
				switch sub {
				case "status", "finalize":
					if st.sub[sub] == nil {
						t.Errorf("%s/%s is served but has no upstream strategy", gr, sub)
					}
				}
			}
		}
	}
	for gr := range table {
		if !served[gr.String()] {
			t.Errorf("newStrategies lists %s, which registry.Builtin() does not serve", gr)
		}
	}
	for gr := range noStrategy {
		if !served[gr.String()] {
			t.Errorf("noStrategy lists %s, which registry.Builtin() does not serve", gr)
		}
	}
	if covered < 20 {
		t.Errorf("%d resources covered by upstream strategies, want at least 20", covered)
	}
	t.Logf("%d served resources run upstream strategies, %d are exceptions", covered, len(noStrategy))
}

func TestNew(t *testing.T) {
	if _, err := New(registry.Builtin()); err != nil {
		t.Fatalf("New(registry.Builtin()): %v", err)
	}
	unknown := []registry.Resource{{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget"}}
	if _, err := New(unknown); err == nil {
		t.Error("New accepted a resource with no upstream strategy")
	}
}
