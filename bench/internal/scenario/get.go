package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/bench/internal/load"
)

// get reads single seeded pods by name.
type get struct {
	Common
	rv     string // "0" or "" (consistent)
	format string // "proto" or "json"
}

var readRVs = []string{"rv0", "consistent"}

func newGets(c Common, a *args) []Scenario {
	format := a.choices("format", []string{"proto"}, formats)[0]
	var out []Scenario
	for _, rv := range a.choices("rv", readRVs, readRVs) {
		out = append(out, &get{Common: c, rv: rvParam(rv), format: format})
	}
	return out
}

func (g *get) Name() string {
	n := "get/" + rvName(g.rv)
	if g.format != "proto" {
		n += "/" + g.format
	}
	return n
}
func (g *get) Kind() string { return "get" }
func (g *get) Description() string {
	return fmt.Sprintf("GET a random seeded pod, %s, %s", rvDescription(g.rv), g.format)
}
func (g *get) Params() map[string]string {
	p := g.params()
	p["resourceVersion"] = rvName(g.rv)
	p["format"] = g.format
	return p
}
func (g *get) Etcd() bool   { return false }
func (g *get) Seeded() bool { return true }

func (g *get) Run(ctx context.Context, env *Env) (*Outcome, error) {
	client := env.Target.Proto
	if g.format == "json" {
		client = env.Target.JSON
	}
	rngs := workerRands(g.Concurrency, env.Run)
	res, err := load.Run(ctx, g.options(), func(ctx context.Context, w int, _ int64) error {
		ns, name := env.Seed.Pod(rngs[w].IntN(env.Seed.Pods))
		_, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{ResourceVersion: g.rv})
		return err
	})
	return &Outcome{Result: res}, err
}

var formats = []string{"proto", "json"}

func rvParam(name string) string {
	if name == "rv0" {
		return "0"
	}
	return ""
}

func rvName(rv string) string {
	if rv == "0" {
		return "rv0"
	}
	return "consistent"
}

func rvDescription(rv string) string {
	if rv == "0" {
		return "resourceVersion=0 (any cached state)"
	}
	return "consistent (resourceVersion unset)"
}

// workerRands gives each worker its own generator, the same for the same
// run index so that targets compared side by side read the same objects.
func workerRands(n, run int) []*rand.Rand {
	out := make([]*rand.Rand, n)
	for i := range out {
		out[i] = rand.New(rand.NewPCG(uint64(run), uint64(i)))
	}
	return out
}
