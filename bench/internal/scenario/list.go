package scenario

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kgate/kgate/bench/internal/load"
)

// list lists the seeded pods of one namespace or the whole cluster.
type list struct {
	Common
	cluster bool   // cluster scope, else a random seeded namespace
	rv      string // "0" or "" (consistent)
	limit   int64  // page size; 0 lists everything in one response
	format  string // "proto" or "json"
	decode  bool   // decode into typed objects as client-go does (else count items in the raw body)
}

// ListVariants are every list variant: scope/resourceVersion/paging/format.
var ListVariants = func() []string {
	var out []string
	for _, scope := range []string{"ns", "cluster"} {
		for _, rv := range readRVs {
			for _, paging := range []string{"all", "paged"} {
				for _, f := range formats {
					out = append(out, strings.Join([]string{scope, rv, paging, f}, "/"))
				}
			}
		}
	}
	return out
}()

func newLists(c Common, a *args) []Scenario {
	limit := int64(a.int("limit", 500))
	decode := a.str("decode", "true") != "false"
	var out []Scenario
	for _, v := range a.choices("variants", ListVariants, ListVariants) {
		f := strings.Split(v, "/")
		if len(f) != 4 {
			continue // choices reported it
		}
		l := &list{Common: c, cluster: f[0] == "cluster", rv: rvParam(f[1]), format: f[3], decode: decode}
		if f[2] == "paged" {
			l.limit = limit
		}
		out = append(out, l)
	}
	return out
}

func (l *list) variant() string {
	scope, paging := "ns", "all"
	if l.cluster {
		scope = "cluster"
	}
	if l.limit > 0 {
		paging = "paged"
	}
	return strings.Join([]string{scope, rvName(l.rv), paging, l.format}, "/")
}

func (l *list) Name() string {
	if !l.decode {
		return "list/" + l.variant() + "/raw"
	}
	return "list/" + l.variant()
}
func (l *list) Kind() string { return "list" }
func (l *list) Description() string {
	scope := "a random seeded namespace's pods"
	if l.cluster {
		scope = "every pod in the cluster"
	}
	paging := "in one response"
	if l.limit > 0 {
		paging = fmt.Sprintf("in pages of %d (one op = all pages)", l.limit)
	}
	decode := "decoded into typed objects"
	if !l.decode {
		decode = "body read, not decoded"
	}
	return fmt.Sprintf("LIST %s, %s, %s, %s %s", scope, rvDescription(l.rv), paging, l.format, decode)
}
func (l *list) Params() map[string]string {
	p := l.params()
	p["variant"] = l.variant()
	p["decode"] = fmt.Sprint(l.decode)
	if l.limit > 0 {
		p["limit"] = fmt.Sprint(l.limit)
	}
	return p
}
func (l *list) Etcd() bool   { return false }
func (l *list) Seeded() bool { return true }

func (l *list) Run(ctx context.Context, env *Env) (*Outcome, error) {
	client := env.Target.Proto
	if l.format == "json" {
		client = env.Target.JSON
	}
	rngs := workerRands(l.Concurrency, env.Run)
	var items, pages atomic.Int64
	res, err := load.Run(ctx, l.options(), func(ctx context.Context, w int, _ int64) error {
		ns := ""
		if !l.cluster {
			ns = env.Seed.Namespace(rngs[w].IntN(env.Seed.Namespaces))
		}
		opts := metav1.ListOptions{ResourceVersion: l.rv, Limit: l.limit}
		var n, p int64
		for {
			var items int
			var cont string
			if l.decode {
				pl, err := client.CoreV1().Pods(ns).List(ctx, opts)
				if err != nil {
					return err
				}
				items, cont = len(pl.Items), pl.Continue
			} else {
				body, err := client.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").
					VersionedParams(&opts, scheme.ParameterCodec).DoRaw(ctx)
				if err != nil {
					return err
				}
				if items, cont, err = rawList(body, l.format); err != nil {
					return err
				}
			}
			n += int64(items)
			p++
			if cont == "" || l.limit == 0 {
				break
			}
			// A continue token carries the snapshot; a resourceVersion
			// beside it is not allowed.
			opts.Continue, opts.ResourceVersion = cont, ""
		}
		items.Add(n)
		pages.Add(p)
		return nil
	})
	out := &Outcome{Result: res, Extra: map[string]float64{}}
	if ok := res.Latency.Count(); ok > 0 {
		out.Extra["items_per_list"] = float64(items.Load()) / float64(ok)
		out.Extra["pages_per_list"] = float64(pages.Load()) / float64(ok)
		out.Extra["items_per_s"] = float64(items.Load()) / max(res.Elapsed, res.Duration).Seconds()
	}
	return out, err
}
