package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/deploy/pki"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// benchClient serves 10k pods of ~4.7 KB in 10 namespaces, one in ten
// with app=db.
func benchClient(b *testing.B) *client.Client { return benchClientTLS(b, false) }

// benchClientTLS is benchClient, over the internal plane's mutual TLS
// when secure.
func benchClientTLS(b *testing.B, secure bool) *client.Client {
	rng, _ := podsRange(b)
	f := newFakeRange(b, rng, 1)
	json := make([]byte, 4700)
	var es []*store.Entry
	for i := range 10000 {
		ns := fmt.Sprintf("ns-%d", i%10)
		name := fmt.Sprintf("pod-%05d", i)
		app := "web"
		if i%10 == 3 {
			app = "db"
		}
		es = append(es, store.NewEntry("/registry/pods/"+ns+"/"+name, ns, name, int64(i+2),
			labels.Set{"app": app}, fields.Set{"metadata.name": name, "metadata.namespace": ns}, json, json[:3000], nil))
	}
	f.st = store.Load(es, 10001)
	if !secure {
		return serve(b, 3*time.Second, f)
	}
	in, err := pki.EnsureInternal(pki.InternalConfig{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	node, err := in.LoadRoleTLS(pki.RoleCacheNode)
	if err != nil {
		b.Fatal(err)
	}
	gw, err := in.LoadRoleTLS(pki.RoleGateway)
	if err != nil {
		b.Fatal(err)
	}
	return serveTLS(b, 3*time.Second, node.Server(pki.RoleGateway), gw.Client(pki.RoleCacheNode), f)
}

func BenchmarkClientGet(b *testing.B) { benchGet(b, false) }

// BenchmarkClientGetTLS is BenchmarkClientGet over mutual TLS.
func BenchmarkClientGetTLS(b *testing.B) { benchGet(b, true) }

func benchGet(b *testing.B, secure bool) {
	c := benchClientTLS(b, secure)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(ctx, "pods", "/registry/pods/ns-7/pod-04567", client.Read{}, client.JSON); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClientGetProtobufNotOlderThan(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(ctx, "pods", "/registry/pods/ns-7/pod-04567", client.Read{ResourceVersion: 10001, Match: "NotOlderThan"}, client.Protobuf); err != nil {
			b.Fatal(err)
		}
	}
}

func benchList(b *testing.B, label string) { benchListTLS(b, label, false) }

func benchListTLS(b *testing.B, label string, secure bool) {
	c := benchClientTLS(b, secure)
	ctx := context.Background()
	b.ReportAllocs()
	var bytes int64
	for b.Loop() {
		o := client.ListOptions{Limit: 500, Label: label}
		for {
			l, err := c.List(ctx, "pods", o)
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range l.Items {
				bytes += int64(len(it))
			}
			if l.Continue == "" {
				break
			}
			o.Continue = l.Continue
			o.Read = client.Read{ResourceVersion: l.Revision, Match: "Exact"}
		}
	}
	b.ReportMetric(float64(bytes)/float64(b.N)/(1<<20), "MiB/op")
}

// BenchmarkClientList lists 10k pods in pages of 500 (20 requests per op).
func BenchmarkClientList(b *testing.B) { benchList(b, "") }

// BenchmarkClientListTLS is BenchmarkClientList over mutual TLS.
func BenchmarkClientListTLS(b *testing.B) { benchListTLS(b, "", true) }

// BenchmarkClientListLabel lists the 1k pods with app=db in pages of 500.
func BenchmarkClientListLabel(b *testing.B) { benchList(b, "app=db") }

func BenchmarkClientListPage(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.List(ctx, "pods", client.ListOptions{Limit: 500, Continue: "/registry/pods/ns-5/pod-00005"}); err != nil {
			b.Fatal(err)
		}
	}
}
