package scenario

import (
	"strings"
	"testing"
	"time"
)

var defaults = Defaults{
	Common:   Common{Concurrency: 8, Duration: 5 * time.Second},
	Watchers: 10, WatchEvents: 50, Informers: 2, MemoryPods: 1000, ConfigMapBytes: 1024,
}

func TestParse(t *testing.T) {
	f := func(spec string, names ...string) []Scenario {
		t.Helper()
		got, err := Parse(spec, defaults)
		if err != nil {
			t.Fatalf("Parse(%q): %v", spec, err)
		}
		var gotNames []string
		for _, s := range got {
			gotNames = append(gotNames, s.Name())
		}
		if strings.Join(gotNames, " ") != strings.Join(names, " ") {
			t.Fatalf("Parse(%q) = %v, want %v", spec, gotNames, names)
		}
		return got
	}
	f("get", "get/rv0", "get/consistent")
	g := f("get,rv=rv0,c=16,rate=500/s,d=2s,format=json", "get/rv0/json")
	p := g[0].Params()
	if p["concurrency"] != "16" || p["rate"] != "500/s" || p["duration"] != "2s" || p["format"] != "json" {
		t.Fatalf("params %v", p)
	}
	if len(ListVariants) != 16 {
		t.Fatalf("%d list variants, want 16", len(ListVariants))
	}
	f("list", ListVariantNames()...)
	f("list,variants=ns/rv0/all/json+cluster/consistent/paged/proto", "list/ns/rv0/all/json", "list/cluster/consistent/paged/proto")
	f("list,variants=cluster/rv0/all/json,decode=false", "list/cluster/rv0/all/json/raw")
	f("write", "write/create", "write/update", "write/patch")
	f("write,ops=patch", "write/patch")
	w := f("watch,watchers=3,events=20", "watch-fanout/3w/1c")
	if w[0].Params()["watchers"] != "3" || w[0].Params()["events"] != "20/s" {
		t.Fatalf("watch params %v", w[0].Params())
	}
	for spec, clients := range map[string]string{
		"watch,watchers=3":           "1",
		"watch,watchers=3,clients=2": "2",
		"watch,watchers=3,clients=0": "3",
		"watch,watchers=3,clients=9": "3",
	} {
		if got := f(spec, "watch-fanout/3w/"+clients+"c")[0].Params()["clients"]; got != clients {
			t.Errorf("%s: clients=%s, want %s", spec, got, clients)
		}
	}
	f("mixed,informers=4", "mixed")
	f("etcd", "etcd/txn-create", "etcd/txn-update", "etcd/get", "etcd/range-ns")
	f("etcd,ops=all", "etcd/txn-create", "etcd/txn-update", "etcd/get", "etcd/range-ns", "etcd/range-all")
	m := f("memory,pods=300", "memory")
	if m[0].Params()["pods"] != "300" {
		t.Fatalf("memory params %v", m[0].Params())
	}
}

// ListVariantNames are the names of every list variant.
func ListVariantNames() []string {
	var out []string
	for _, v := range ListVariants {
		out = append(out, "list/"+v)
	}
	return out
}

func TestParseErrors(t *testing.T) {
	for _, spec := range []string{
		"nope",
		"get,c=x",
		"get,rate=fast",
		"get,d=forever",
		"get,bogus=1",
		"get,c",
		"get,c=0",
		"list,variants=ns/rv1/all/json",
		"write,ops=delete",
	} {
		if _, err := Parse(spec, defaults); err == nil {
			t.Errorf("Parse(%q) succeeded", spec)
		}
	}
}

func TestDNSLabel(t *testing.T) {
	for in, want := range map[string]string{"kgate": "kgate", "Kube API-server #2": "kube-api-server--2", "": "t", "a-very-long-name-for-a-target": "a-very-long-name-for"} {
		if got := dnsLabel(in); got != want {
			t.Errorf("dnsLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
