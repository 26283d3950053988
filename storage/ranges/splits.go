package ranges

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/kgate/kgate/storage/registry"
)

// ErrBadSplits is returned, wrapped, for a split configuration that cannot
// be applied or parsed.
var ErrBadSplits = errors.New("ranges: bad splits")

// Config configures the range table beyond Default.
type Config struct {
	// Splits maps the id of a Default range (e.g. "pods") to split keys
	// relative to its prefix, in increasing order. With "g", "n", "t" the
	// range [/registry/pods/, /registry/pods0) becomes pods-0
	// [/registry/pods/, /registry/pods/g), pods-1 [.../g, .../n), pods-2
	// [.../n, .../t) and pods-3 [.../t, /registry/pods0).
	//
	// A key may hold a namespace and a name ("kube-system/m") to split
	// inside one namespace; it must not be empty nor contain a control
	// character, ',', ';' or '='.
	Splits map[string][]string
}

// DefaultSplits splits the resources that dominate a large cluster's
// object count and event rate — pods, events, leases and endpointslices —
// into four ranges each, at "g", "n" and "t".
//
// The heuristic: these resources are namespaced and their keys are
// <prefix>/<namespace>/<name>, so a split key is the first letters of a
// namespace name. Namespace names are DNS labels ([a-z0-9-], starting with
// a letter or digit); cutting the alphabet at g, n and t gives four ranges
// of six to seven first letters (digits fall into the first). Real
// namespace names are not uniform — "default" lands in -0, "kube-system",
// "kube-public" and "kube-node-lease" in -1 — so clusters with a skewed
// layout should set their own splits. A namespace is never cut in two by
// these keys, so a namespaced LIST or WATCH touches exactly one range.
func DefaultSplits() Config {
	keys := []string{"g", "n", "t"}
	return Config{Splits: map[string][]string{
		"pods":           keys,
		"events":         keys,
		"leases":         keys,
		"endpointslices": keys,
	}}
}

// WithSplits returns the Default table of reg with the ranges named in
// cfg.Splits cut at their split keys. A split range's pieces are named
// <id>-0, <id>-1, ... in key order and keep its Resource.
func WithSplits(reg *registry.Registry, cfg Config) (*Table, error) {
	base, err := Default(reg)
	if err != nil {
		return nil, err
	}
	return base.Split(cfg)
}

// Split returns a new table with the ranges named in cfg.Splits cut at
// their split keys (see WithSplits), which are relative to each range's
// Start; t is unchanged.
func (t *Table) Split(cfg Config) (*Table, error) {
	for id := range cfg.Splits {
		if _, ok := t.byID[id]; !ok {
			return nil, fmt.Errorf("%w: no range %q to split", ErrBadSplits, id)
		}
	}
	return t.split(cfg)
}

// split is Split ignoring the ids of cfg.Splits t does not have: a
// Follower's splits may name resources not registered yet.
func (t *Table) split(cfg Config) (*Table, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	var out []*Range
	for _, r := range t.ranges {
		keys, ok := cfg.Splits[r.ID]
		if !ok || len(keys) == 0 {
			out = append(out, r)
			continue
		}
		// Keys are relative to the range's start: prefix + "/" for the
		// ranges of Default.
		start := r.Start
		for i := 0; i <= len(keys); i++ {
			end := r.End
			if i < len(keys) {
				end = r.Start + keys[i]
				if end >= r.End {
					return nil, fmt.Errorf("%w: %s: split key %q falls outside [%q, %q)", ErrBadSplits, r.ID, keys[i], r.Start, r.End)
				}
			}
			out = append(out, &Range{ID: r.ID + "-" + strconv.Itoa(i), Start: start, End: end, Resource: r.Resource})
			start = end
		}
	}
	return New(out)
}

// check validates the split keys of every range.
func (c Config) check() error {
	for id, keys := range c.Splits {
		if err := checkKeys(id, keys); err != nil {
			return err
		}
	}
	return nil
}

// checkKeys validates the split keys of one range.
func checkKeys(id string, keys []string) error {
	for i, k := range keys {
		if k == "" {
			return fmt.Errorf("%w: %s: empty split key", ErrBadSplits, id)
		}
		for _, c := range k {
			if c < 0x20 || c == 0x7f || c == ',' || c == ';' || c == '=' {
				return fmt.Errorf("%w: %s: split key %q has %q", ErrBadSplits, id, k, c)
			}
		}
		if i > 0 && keys[i-1] >= k {
			return fmt.Errorf("%w: %s: split keys not increasing: %q then %q", ErrBadSplits, id, keys[i-1], k)
		}
	}
	return nil
}

// ParseSplits parses a flag value such as "pods=g,n,t;events=h,p": ranges
// separated by ';', each an id, '=' and increasing split keys separated by
// ','. Spaces around ids and keys are ignored; an empty value is no
// splits.
func ParseSplits(s string) (Config, error) {
	cfg := Config{Splits: map[string][]string{}}
	if strings.TrimSpace(s) == "" {
		return cfg, nil
	}
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue // tolerate "a=b;" and ";;"
		}
		id, list, ok := strings.Cut(part, "=")
		id = strings.TrimSpace(id)
		if !ok || id == "" {
			return Config{}, fmt.Errorf("%w: %q: want id=key,key,...", ErrBadSplits, part)
		}
		if _, dup := cfg.Splits[id]; dup {
			return Config{}, fmt.Errorf("%w: %q split twice", ErrBadSplits, id)
		}
		var keys []string
		for k := range strings.SplitSeq(list, ",") {
			keys = append(keys, strings.TrimSpace(k))
		}
		if err := checkKeys(id, keys); err != nil {
			return Config{}, err
		}
		cfg.Splits[id] = keys
	}
	return cfg, nil
}

// String formats cfg as ParseSplits reads it, ids sorted.
func (c Config) String() string {
	ids := make([]string, 0, len(c.Splits))
	for id := range c.Splits {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(id)
		b.WriteByte('=')
		b.WriteString(strings.Join(c.Splits[id], ","))
	}
	return b.String()
}
