package ranges

import (
	"errors"
	"slices"
	"testing"

	"github.com/kgate/kgate/storage/registry"
)

func builtin(t testing.TB) *registry.Registry {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func ids(rs []*Range) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func TestWithSplits(t *testing.T) {
	reg := builtin(t)
	base, err := Default(reg)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := WithSplits(reg, Config{Splits: map[string][]string{"pods": {"g", "n", "t"}, "events": {"h", "p"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(tbl.All()), len(base.All())+3+2; got != want {
		t.Fatalf("%d ranges, want %d", got, want)
	}
	if _, ok := tbl.ByID("pods"); ok {
		t.Error("pods still present after the split")
	}
	basePods, _ := base.ByID("pods")
	want := []Range{
		{ID: "pods-0", Start: "/registry/pods/", End: "/registry/pods/g"},
		{ID: "pods-1", Start: "/registry/pods/g", End: "/registry/pods/n"},
		{ID: "pods-2", Start: "/registry/pods/n", End: "/registry/pods/t"},
		{ID: "pods-3", Start: "/registry/pods/t", End: "/registry/pods0"},
		{ID: "events-0", Start: "/registry/events/", End: "/registry/events/h"},
		{ID: "events-1", Start: "/registry/events/h", End: "/registry/events/p"},
		{ID: "events-2", Start: "/registry/events/p", End: "/registry/events0"},
	}
	for _, w := range want {
		r, ok := tbl.ByID(w.ID)
		if !ok {
			t.Errorf("no range %s", w.ID)
			continue
		}
		if r.Start != w.Start || r.End != w.End {
			t.Errorf("%s = [%q, %q), want [%q, %q)", w.ID, r.Start, r.End, w.Start, w.End)
		}
		if w.ID[:4] == "pods" && r.Resource != basePods.Resource {
			t.Errorf("%s resource %v, want the pods resource", w.ID, r.Resource)
		}
	}
	// Unsplit ranges are untouched.
	for _, id := range []string{"leases", "configmaps", "services-specs"} {
		a, _ := base.ByID(id)
		b, ok := tbl.ByID(id)
		if !ok || *a != *b {
			t.Errorf("%s changed: %+v -> %+v", id, a, b)
		}
	}
	// Empty config is Default.
	same, err := WithSplits(reg, Config{})
	if err != nil || !slices.Equal(ids(same.All()), ids(base.All())) {
		t.Errorf("WithSplits(empty) = %v, %v; want Default", ids(same.All()), err)
	}
}

func TestDefaultSplits(t *testing.T) {
	tbl, err := WithSplits(builtin(t), DefaultSplits())
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []string{"pods", "events", "leases", "endpointslices"} {
		for i := range 4 {
			id := res + "-" + string(rune('0'+i))
			if _, ok := tbl.ByID(id); !ok {
				t.Errorf("no range %s", id)
			}
		}
	}
	if DefaultSplits().String() != "endpointslices=g,n,t;events=g,n,t;leases=g,n,t;pods=g,n,t" {
		t.Errorf("String = %s", DefaultSplits())
	}
}

func TestWithSplitsErrors(t *testing.T) {
	reg := builtin(t)
	f := func(name string, splits map[string][]string) {
		t.Run(name, func(t *testing.T) {
			if _, err := WithSplits(reg, Config{Splits: splits}); !errors.Is(err, ErrBadSplits) {
				t.Errorf("err = %v, want ErrBadSplits", err)
			}
		})
	}
	f("unknown range", map[string][]string{"gadgets": {"m"}})
	f("empty key", map[string][]string{"pods": {"g", ""}})
	f("not increasing", map[string][]string{"pods": {"n", "g"}})
	f("duplicate key", map[string][]string{"pods": {"g", "g"}})
	f("separator in key", map[string][]string{"pods": {"a,b"}})
	f("control character", map[string][]string{"pods": {"a\n"}})

	// A key relative to a range that is not a prefix range can overshoot.
	tbl, err := WithSplits(reg, Config{Splits: map[string][]string{"pods": {"m"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Split(Config{Splits: map[string][]string{"pods-0": {"z"}}}); !errors.Is(err, ErrBadSplits) {
		t.Errorf("split past the end: err = %v", err)
	}
}

func TestLookupAndIntersectingOverSplits(t *testing.T) {
	tbl, err := WithSplits(builtin(t), DefaultSplits())
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(key, want string) {
		t.Helper()
		r, ok := tbl.Lookup(key)
		got := ""
		if ok {
			got = r.ID
		}
		if got != want {
			t.Errorf("Lookup(%q) = %q, want %q", key, got, want)
		}
	}
	lookup("/registry/pods/default/web-0", "pods-0")
	lookup("/registry/pods/0ns/x", "pods-0")
	lookup("/registry/pods/f/x", "pods-0")
	lookup("/registry/pods/g", "pods-1")
	lookup("/registry/pods/kube-system/coredns", "pods-1")
	lookup("/registry/pods/monitoring/x", "pods-1")
	lookup("/registry/pods/n/x", "pods-2")
	lookup("/registry/pods/staging/x", "pods-2")
	lookup("/registry/pods/t/x", "pods-3")
	lookup("/registry/pods/zeta/x", "pods-3")
	lookup("/registry/leases/kube-node-lease/node-1", "leases-1")
	lookup("/registry/configmaps/default/x", "configmaps")
	lookup("/registry/pods", "") // the prefix itself holds no object

	intersecting := func(prefix string, want ...string) {
		t.Helper()
		if got := ids(tbl.Intersecting(prefix)); !slices.Equal(got, want) {
			t.Errorf("Intersecting(%q) = %v, want %v", prefix, got, want)
		}
	}
	intersecting("/registry/pods/", "pods-0", "pods-1", "pods-2", "pods-3")
	intersecting("/registry/pods/default/", "pods-0")
	intersecting("/registry/pods/kube-system/", "pods-1")
	intersecting("/registry/pods/zeta/", "pods-3")
	intersecting("/registry/pods/g", "pods-1") // every namespace starting with g
	intersecting("/registry/events/", "events-0", "events-1", "events-2", "events-3")
	intersecting("/registry/configmaps/", "configmaps")
}

func TestParseSplits(t *testing.T) {
	f := func(in string, want map[string][]string, wantErr bool) {
		t.Helper()
		got, err := ParseSplits(in)
		if wantErr {
			if !errors.Is(err, ErrBadSplits) {
				t.Errorf("ParseSplits(%q) err = %v, want ErrBadSplits", in, err)
			}
			return
		}
		if err != nil {
			t.Errorf("ParseSplits(%q): %v", in, err)
			return
		}
		if len(got.Splits) != len(want) {
			t.Errorf("ParseSplits(%q) = %v, want %v", in, got.Splits, want)
		}
		for id, keys := range want {
			if !slices.Equal(got.Splits[id], keys) {
				t.Errorf("ParseSplits(%q)[%s] = %v, want %v", in, id, got.Splits[id], keys)
			}
		}
	}
	f("", nil, false)
	f("  ", nil, false)
	f("pods=g,n,t;events=h,p", map[string][]string{"pods": {"g", "n", "t"}, "events": {"h", "p"}}, false)
	f(" pods = g , n ; ", map[string][]string{"pods": {"g", "n"}}, false)
	f("pods=kube-system/m", map[string][]string{"pods": {"kube-system/m"}}, false)
	f("pods", nil, true)
	f("=g", nil, true)
	f("pods=", nil, true)
	f("pods=g,,n", nil, true)
	f("pods=n,g", nil, true)
	f("pods=g;pods=n", nil, true)
	f("pods=g=h", nil, true)

	// String and ParseSplits round-trip.
	in := DefaultSplits()
	out, err := ParseSplits(in.String())
	if err != nil || out.String() != in.String() {
		t.Errorf("round trip: %q -> %q, %v", in, out, err)
	}
}

func FuzzParseSplits(f *testing.F) {
	f.Add("pods=g,n,t;events=h,p")
	f.Add("a=b;;c=d,e")
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseSplits(s)
		if err != nil {
			return
		}
		again, err := ParseSplits(cfg.String())
		if err != nil || again.String() != cfg.String() {
			t.Fatalf("round trip of %q: %q, %v", s, again, err)
		}
	})
}
