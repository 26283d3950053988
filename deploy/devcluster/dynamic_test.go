package devcluster_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/storage/storagetest"
)

const aggregatedDiscovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// TestDynamicResource starts without ConfigMaps, adds them at run time and
// removes them again: every gateway's discovery and OpenAPI follow, client-go
// creates, gets, lists and watches them through every gateway, the range's
// owners reflect it, and after the removal requests are 404, open watches
// end and no cache node reflects the range.
func TestDynamicResource(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	for _, tc := range []struct {
		name                         string
		nodes, gateways, replicas, r int
	}{
		{name: "one node", nodes: 1, gateways: 1, replicas: 2, r: 1},
		{name: "3 nodes R=2", nodes: 3, gateways: 2, replicas: 2, r: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testDynamicResource(t, tc.nodes, tc.gateways, tc.replicas, tc.r)
		})
	}
}

func testDynamicResource(t *testing.T, nodes, gateways, replicas, owners int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reg, cmRes := storagetest.RegistryWithout(t, "configmaps")
	dir := t.TempDir()
	c, err := startDev(ctx, devcluster.Config{
		DataDir: dir, UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
		Resources: reg, CacheNodes: nodes, Gateways: gateways, Replicas: replicas,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()

	// One clientset per gateway.
	var clients []kubernetes.Interface
	for _, gw := range c.Gateways {
		cfg := restConfig(t, c, false, nil)
		cfg.Host = "https://" + gw.Gateway.Addr()
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cs)
	}
	served := func(cs kubernetes.Interface) (legacy, aggregated bool) {
		t.Helper()
		list, err := cs.Discovery().ServerResourcesForGroupVersion("v1")
		if err != nil {
			t.Fatalf("discovery: %v", err)
		}
		legacy = slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "configmaps" })
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/api").SetHeader("Accept", aggregatedDiscovery).DoRaw(ctx)
		if err != nil {
			t.Fatalf("aggregated discovery: %v", err)
		}
		return legacy, strings.Contains(string(body), `"resource":"configmaps"`)
	}
	// OpenAPI is rendered again in the background after a change: wait
	// for it.
	openAPI := func(cs kubernetes.Interface, want bool) error {
		return poll(ctx, func() error {
			paths, err := cs.Discovery().OpenAPIV3().Paths()
			if err != nil {
				return err
			}
			doc, err := paths["api/v1"].Schema("application/json")
			if err != nil {
				return err
			}
			if got := strings.Contains(string(doc), `/api/v1/namespaces/{namespace}/configmaps`); got != want {
				return fmt.Errorf("OpenAPI describes configmaps: %v, want %v", got, want)
			}
			return nil
		})
	}
	for i, cs := range clients {
		if l, a := served(cs); l || a {
			t.Fatalf("gateway %d serves configmaps before Add: legacy %v, aggregated %v", i, l, a)
		}
		if err := openAPI(cs, false); err != nil {
			t.Fatalf("gateway %d: %v", i, err)
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("gateway %d: get before Add: %v, want 404", i, err)
		}
	}

	// Add: served everywhere once the owners announce the range ready.
	if err := reg.Add(cmRes); err != nil {
		t.Fatal(err)
	}
	for i, gw := range c.Gateways {
		if err := poll(ctx, func() error { return gw.Gateway.Serving(ctx) }); err != nil {
			t.Fatalf("gateway %d does not see the new range served: %v", i, err)
		}
	}
	if err := poll(ctx, func() error {
		if n := reflecting(c, "configmaps"); n != owners {
			return fmt.Errorf("%d cache nodes reflect configmaps, want %d", n, owners)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, cs := range clients {
		if l, a := served(cs); !l || !a {
			t.Errorf("gateway %d after Add: legacy %v, aggregated %v", i, l, a)
		}
		if err := openAPI(cs, true); err != nil {
			t.Errorf("gateway %d after Add: %v", i, err)
		}
	}
	ns := uniqueNS("dynamic")
	ensureNamespace(t, clients[0], ns)
	var watches []watch.Interface
	var lastRV string // of the last write before Remove
	for i, cs := range clients {
		cms := cs.CoreV1().ConfigMaps(ns)
		name := fmt.Sprintf("cm-%d", i)
		created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("gateway %d: create: %v", i, err)
		}
		got, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil || got.ResourceVersion != created.ResourceVersion {
			t.Fatalf("gateway %d: get: %v, %v", i, got, err)
		}
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != i+1 {
			t.Fatalf("gateway %d: list: %v items, %v", i, len(list.Items), err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatalf("gateway %d: watch: %v", i, err)
		}
		defer w.Stop()
		watches = append(watches, w)
		upd := got.DeepCopy()
		upd.Data["k"] = "w"
		updated, err := cms.Update(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("gateway %d: update: %v", i, err)
		}
		lastRV = updated.ResourceVersion
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Modified || !ok || cm.Name != name || cm.Data["k"] != "w" {
				t.Fatalf("gateway %d: watch event %v %#v", i, ev.Type, ev.Object)
			}
		case <-ctx.Done():
			t.Fatalf("gateway %d: no watch event", i)
		}
	}

	// Remove: open watches end, requests are 404, discovery forgets it,
	// no cache node reflects it.
	if err := reg.Remove(cmRes.GVR()); err != nil {
		t.Fatal(err)
	}
	for i, w := range watches {
	drain:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					break drain
				}
				// Events of writes made before the removal (through the
				// other gateways) may still come; nothing newer can.
				if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || rv(cm.ResourceVersion) > rv(lastRV) {
					t.Errorf("gateway %d: watch event after Remove: %v %#v", i, ev.Type, ev.Object)
				}
			case <-ctx.Done():
				t.Fatalf("gateway %d: watch did not end after Remove", i)
			}
		}
	}
	for i, cs := range clients {
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "cm-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("gateway %d: get after Remove: %v, want 404", i, err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("gateway %d: list after Remove: %v, want 404", i, err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("gateway %d: watch after Remove: %v, want 404", i, err)
		}
		if l, a := served(cs); l || a {
			t.Errorf("gateway %d after Remove: legacy %v, aggregated %v", i, l, a)
		}
		if err := openAPI(cs, false); err != nil {
			t.Errorf("gateway %d after Remove: %v", i, err)
		}
	}
	if err := poll(ctx, func() error {
		if n := reflecting(c, "configmaps"); n != 0 {
			return fmt.Errorf("%d cache nodes still reflect configmaps", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, gw := range c.Gateways {
		if err := gw.Gateway.Serving(ctx); err != nil {
			t.Errorf("gateway %d not serving after Remove: %v", i, err)
		}
	}
}

// rv parses a resourceVersion (-1 when it is not a number).
func rv(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// reflecting counts the cache nodes with a ready reflector of rangeID.
func reflecting(c *devcluster.Cluster, rangeID string) int {
	n := 0
	for _, node := range c.Nodes {
		for _, st := range node.Node.Status() {
			if st.ID == rangeID && st.Ready {
				n++
			}
		}
	}
	return n
}

// poll waits for cond to hold, checking as the cluster's own readiness
// waits do; it returns cond's last error when ctx ends first.
func poll(ctx context.Context, cond func() error) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-tick.C:
		}
	}
}
