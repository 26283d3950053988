package devcluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kgate/kgate/deploy/devcluster"
)

const (
	benchNS   = "bench"
	benchPods = 1000
	// benchPodJSONBytes is the size of one Pod as JSON.
	benchPodJSONBytes = 4700
)

var benchSetup struct {
	once     sync.Once
	err      error
	podBytes int // JSON size of one Pod as served
}

// setupBench writes a ConfigMap and benchPods Pods (labels, two containers
// with env, resources and probes, a kubelet's status; about 4.7 KB of JSON
// each) straight into etcd, as kube-apiserver stores them.
func setupBench(b *testing.B) *devcluster.Cluster {
	b.Helper()
	c := cluster(b)
	benchSetup.once.Do(func() { benchSetup.err = writeBenchData(b, c) })
	if benchSetup.err != nil {
		b.Fatal(benchSetup.err)
	}
	return c
}

func writeBenchData(b *testing.B, c *devcluster.Cluster) error {
	ctx := context.Background()
	cs := clientset(b, c, true, nil)
	ensureNamespace(b, cs, benchNS)
	if _, err := cs.CoreV1().ConfigMaps(benchNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"config.yaml": strings.Repeat("key: value\n", 40)},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var buf bytes.Buffer
	for i := range benchPods {
		p := storedPod(benchNS, fmt.Sprintf("web-%04d", i), fmt.Sprintf("10.2.%d.%d", i/250, i%250+1))
		p.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		p.Labels["pod-template-hash"] = "5d8f7c9b6d"
		p.Labels["index"] = fmt.Sprint(i)
		delete(p.Annotations, "example.com/json")
		if j, err := json.Marshal(p); err != nil {
			return err
		} else if pad := benchPodJSONBytes - len(j) - len(`,"example.com/build":""`); pad > 0 {
			p.Annotations["example.com/build"] = strings.Repeat("b", pad)
		}
		if i == 0 {
			j, err := json.Marshal(p)
			if err != nil {
				return err
			}
			benchSetup.podBytes = len(j)
		}
		buf.Reset()
		if err := ser.Encode(p, &buf); err != nil {
			return err
		}
		if _, err := c.EtcdClient().Put(ctx, "/registry/pods/"+benchNS+"/"+p.Name, buf.String()); err != nil {
			return err
		}
	}
	// A consistent list waits for the cache to have all of it.
	l, err := cs.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(l.Items) != benchPods {
		return fmt.Errorf("listed %d pods, want %d", len(l.Items), benchPods)
	}
	return nil
}

// get reads path fully; it fails b unless the answer is 200.
func (rc *rawClient) get(b *testing.B, path, accept string) []byte {
	req, err := http.NewRequest("GET", rc.base+path, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := rc.hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d %v %.200s", path, resp.StatusCode, err, data)
	}
	return data
}

var benchFormats = []struct{ name, accept string }{
	{"json", "application/json"},
	{"protobuf", "application/vnd.kubernetes.protobuf"},
}

// BenchmarkGetConfigMap is one GET through the gateway, TLS and the cache
// node's read API included (allocations count client and server: one
// process).
func BenchmarkGetConfigMap(b *testing.B) {
	c := setupBench(b)
	rc := newRawClient(b, c)
	for _, rv := range []struct{ name, query string }{{"rv=0", "?resourceVersion=0"}, {"consistent", ""}} {
		for _, f := range benchFormats {
			b.Run(rv.name+"/"+f.name, func(b *testing.B) {
				path := "/api/v1/namespaces/" + benchNS + "/configmaps/cm" + rv.query
				b.SetBytes(int64(len(rc.get(b, path, f.accept))))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					rc.get(b, path, f.accept)
				}
			})
		}
	}
}

// BenchmarkListPods lists benchPods Pods (consistent reads), whole or in
// pages of 500 (one op = every page).
func BenchmarkListPods(b *testing.B) {
	c := setupBench(b)
	rc := newRawClient(b, c)
	b.Logf("one Pod is %d bytes of JSON (apiVersion and kind included)", benchSetup.podBytes)
	base := "/api/v1/namespaces/" + benchNS + "/pods"
	for _, f := range benchFormats {
		for _, limit := range []int{0, 500} {
			name := fmt.Sprintf("%s/all", f.name)
			if limit > 0 {
				name = fmt.Sprintf("%s/limit=%d", f.name, limit)
			}
			b.Run(name, func(b *testing.B) {
				list := func() (int, int) {
					total, pages := 0, 0
					cont := ""
					for {
						path := base
						if limit > 0 {
							path += fmt.Sprintf("?limit=%d", limit)
							if cont != "" {
								path += "&continue=" + cont
							}
						}
						data := rc.get(b, path, f.accept)
						total += len(data)
						pages++
						if limit == 0 {
							return total, pages
						}
						cont = nextContinue(b, data, f.accept)
						if cont == "" {
							return total, pages
						}
					}
				}
				n, pages := list()
				if want := max(1, (benchPods+limit-1)/max(limit, 1)); limit > 0 && pages != want || limit == 0 && pages != 1 {
					b.Fatalf("%d pages", pages)
				}
				b.SetBytes(int64(n))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					list()
				}
			})
		}
	}
}

// nextContinue is the continue token of a list page in either format;
// a protobuf page is not decoded beyond its ListMeta.
func nextContinue(b *testing.B, data []byte, accept string) string {
	if strings.Contains(accept, "json") {
		// Read only up to the list's metadata, which comes before items.
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			tok, err := dec.Token()
			if err != nil {
				b.Fatalf("no list metadata: %v", err)
			}
			if tok == "metadata" {
				var lm metav1.ListMeta
				if err := dec.Decode(&lm); err != nil {
					b.Fatal(err)
				}
				return lm.Continue
			}
		}
	}
	var u runtime.Unknown
	if err := u.Unmarshal(bytes.TrimPrefix(data, []byte("k8s\x00"))); err != nil {
		b.Fatal(err)
	}
	raw := u.Raw
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			b.Fatal("bad protobuf list")
		}
		raw = raw[n:]
		if num == 1 && typ == protowire.BytesType { // PodList.metadata
			v, n := protowire.ConsumeBytes(raw)
			if n < 0 {
				b.Fatal("bad protobuf list")
			}
			var lm metav1.ListMeta
			if err := lm.Unmarshal(v); err != nil {
				b.Fatal(err)
			}
			return lm.Continue
		}
		n = protowire.ConsumeFieldValue(num, typ, raw)
		if n < 0 {
			b.Fatal("bad protobuf list")
		}
		raw = raw[n:]
	}
	return ""
}
