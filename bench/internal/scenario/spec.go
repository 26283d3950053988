package scenario

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults fill what a spec leaves out.
type Defaults struct {
	Common
	// Watchers and WatchEvents (events/s) shape watch-fanout.
	Watchers    int
	WatchEvents float64
	// Informers shape mixed.
	Informers int
	// MemoryPods is how many pods the memory scenario loads.
	MemoryPods int
	// ConfigMapBytes sizes written ConfigMaps.
	ConfigMapBytes int
}

// Kinds lists the scenario kinds in the order a full suite runs them.
var Kinds = []string{"get", "list", "watch", "write", "mixed", "etcd", "memory"}

// Parse reads one spec: a kind, then comma-separated key=value settings,
// e.g. "get,c=16,rate=2000,d=10s" or "list,variants=ns/rv0/all/json". It
// returns the scenarios the spec expands to (a kind has variants).
func Parse(spec string, d Defaults) ([]Scenario, error) {
	parts := strings.Split(spec, ",")
	kind := strings.TrimSpace(parts[0])
	kv := map[string]string{}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("scenario %q: setting %q is not key=value", spec, p)
		}
		kv[k] = v
	}
	a := &args{spec: spec, kv: kv, used: map[string]bool{}}
	c := Common{
		Concurrency: a.int("c", d.Concurrency),
		Duration:    a.duration("d", d.Duration),
		Rate:        a.float("rate", d.Rate),
	}
	var out []Scenario
	switch kind {
	case "get":
		out = newGets(c, a)
	case "list":
		out = newLists(c, a)
	case "watch", "watch-fanout":
		out = newWatch(c, a, d)
	case "write":
		out = newWrites(c, a, d)
	case "mixed":
		out = newMixed(c, a, d)
	case "etcd", "etcd-baseline":
		out = newEtcd(c, a)
	case "memory":
		out = newMemory(c, a, d)
	default:
		return nil, fmt.Errorf("scenario %q: unknown kind %q (one of %s)", spec, kind, strings.Join(Kinds, ", "))
	}
	if err := a.err(); err != nil {
		return nil, err
	}
	if c.Concurrency <= 0 || c.Duration <= 0 || c.Rate < 0 {
		return nil, fmt.Errorf("scenario %q: concurrency and duration must be positive, rate not negative", spec)
	}
	return out, nil
}

// args reads a spec's settings and remembers errors and unknown keys.
type args struct {
	spec string
	kv   map[string]string
	used map[string]bool
	errs []string
}

func (a *args) str(k, def string) string {
	a.used[k] = true
	if v, ok := a.kv[k]; ok {
		return v
	}
	return def
}

func (a *args) int(k string, def int) int {
	v := a.str(k, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		a.errs = append(a.errs, fmt.Sprintf("%s=%q is not an integer", k, v))
	}
	return n
}

func (a *args) float(k string, def float64) float64 {
	v := a.str(k, "")
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "/s"), 64)
	if err != nil {
		a.errs = append(a.errs, fmt.Sprintf("%s=%q is not a number", k, v))
	}
	return f
}

func (a *args) duration(k string, def time.Duration) time.Duration {
	v := a.str(k, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		a.errs = append(a.errs, fmt.Sprintf("%s=%q is not a duration", k, v))
	}
	return d
}

// choices splits a "+"-separated list, checking each against allowed; def
// is used when the key is absent, "all" means every allowed value.
func (a *args) choices(k string, def []string, allowed []string) []string {
	v := a.str(k, "")
	if v == "" {
		return def
	}
	if v == "all" {
		return allowed
	}
	var out []string
	for _, c := range strings.Split(v, "+") {
		ok := false
		for _, x := range allowed {
			ok = ok || x == c
		}
		if !ok {
			a.errs = append(a.errs, fmt.Sprintf("%s: %q is not one of %s", k, c, strings.Join(allowed, ", ")))
		}
		out = append(out, c)
	}
	return out
}

func (a *args) err() error {
	for _, k := range slices.Sorted(maps.Keys(a.kv)) {
		if !a.used[k] {
			a.errs = append(a.errs, fmt.Sprintf("unknown setting %q", k))
		}
	}
	if len(a.errs) == 0 {
		return nil
	}
	return fmt.Errorf("scenario %q: %s", a.spec, strings.Join(a.errs, "; "))
}

func itoa(n int) string { return strconv.Itoa(n) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
