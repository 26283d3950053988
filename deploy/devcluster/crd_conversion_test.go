package devcluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway/crconverttest"
	"github.com/kgate/kgate/storage/storagetest"
)

// gadgetCRD is an established CRD of group's gadgets in two versions
// converted by a webhook: v1 with spec.size, v2 with spec.replicas;
// storage is the version stored.
func gadgetCRD(group, storage string, conv *apiextensionsv1.CustomResourceConversion) *apiextensionsv1.CustomResourceDefinition {
	schemaWith := func(field string) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "integer"}}},
			},
		}}
	}
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"}
	stored := []string{"v1"}
	if storage != "v1" {
		stored = append(stored, storage)
	}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + group, UID: "gadgets-uid"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Names: names, Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: storage == "v1", Schema: schemaWith("size")},
				{Name: "v2", Served: true, Storage: storage == "v2", Schema: schemaWith("replicas")},
			},
			Conversion: conv,
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			AcceptedNames:  names,
			StoredVersions: stored,
			Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
				{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
			},
		},
	}
}

// TestCRDConversionWebhook serves a custom resource in two versions
// converted by a real HTTPS conversion webhook on loopback (its
// certificate the CRD's caBundle): created in either version, read,
// listed and watched in the other, stored in the storage version; after
// the storage version changes, objects stored in the old one are read
// through the new one; with the webhook down, reads in the other version
// are upstream's 500 and a watch ends with an ERROR event.
func TestCRDConversionWebhook(t *testing.T) {
	for _, rv := range []string{"v1", "v1beta1"} {
		t.Run("ConversionReview "+rv, func(t *testing.T) { testCRDConversionWebhook(t, cluster(t), rv) })
	}
}

func testCRDConversionWebhook(t *testing.T, c *devcluster.Cluster, reviewVersion string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := crconverttest.New(crconverttest.RenameField("v1", "size", "replicas"))
	defer srv.Close()

	group := uniqueNS("conv") + ".example.com"
	key := crdPrefix + "gadgets." + group
	putCRD := func(storage string) {
		t.Helper()
		raw, err := json.Marshal(gadgetCRD(group, storage, srv.Conversion(reviewVersion)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.EtcdClient().Put(ctx, key, string(raw)); err != nil {
			t.Fatal(err)
		}
	}
	putCRD("v1")
	defer c.EtcdClient().Delete(context.Background(), key)

	cfg := restConfig(t, c, true, nil)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := uniqueNS("conv")
	ensureNamespace(t, cs, ns)
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: group, Version: v, Resource: "gadgets"}
	}
	v1, v2 := dyn.Resource(gvr("v1")).Namespace(ns), dyn.Resource(gvr("v2")).Namespace(ns)
	gadget := func(version, name, field string, n int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/" + version, "kind": "Gadget",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{field: n},
		}}
	}
	field := func(u *unstructured.Unstructured, name string) int64 {
		n, _, _ := unstructured.NestedInt64(u.Object, "spec", name)
		return n
	}
	// stored returns the apiVersion and spec of an object in etcd.
	stored := func(name string) (string, map[string]any) {
		t.Helper()
		resp, err := c.EtcdClient().Get(ctx, "/registry/"+group+"/gadgets/"+ns+"/"+name)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("etcd get %s: %v", name, err)
		}
		var obj map[string]any
		if err := json.Unmarshal(resp.Kvs[0].Value, &obj); err != nil {
			t.Fatal(err)
		}
		spec, _ := obj["spec"].(map[string]any)
		return fmt.Sprint(obj["apiVersion"]), spec
	}

	storagetest.Eventually(t, 30*time.Second, "gadgets served in v2", func() error {
		_, err := v2.List(ctx, metav1.ListOptions{})
		return err
	})

	// Created in v1 (storage), read in v2.
	if _, err := v1.Create(ctx, gadget("v1", "g1", "size", 3), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create in v1: %v", err)
	}
	got, err := v2.Get(ctx, "g1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get in v2: %v", err)
	}
	if got.GetAPIVersion() != group+"/v2" || field(got, "replicas") != 3 || field(got, "size") != 0 {
		t.Errorf("g1 in v2: %v, want spec.replicas 3", got.Object)
	}
	// Created in v2, stored in v1, read in v1.
	created, err := v2.Create(ctx, gadget("v2", "g2", "replicas", 5), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create in v2: %v", err)
	}
	if created.GetAPIVersion() != group+"/v2" || field(created, "replicas") != 5 {
		t.Errorf("created in v2: %v", created.Object)
	}
	if apiVersion, spec := stored("g2"); apiVersion != group+"/v1" || fmt.Sprint(spec) != "map[size:5]" {
		t.Errorf("g2 stored as %s %v, want v1 with spec.size 5", apiVersion, spec)
	}
	got, err = v1.Get(ctx, "g2", metav1.GetOptions{})
	if err != nil || field(got, "size") != 5 {
		t.Errorf("g2 in v1: %v, %v", got, err)
	}

	// List and watch in v2.
	list, err := v2.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list in v2: %v", err)
	}
	var items []string
	for _, it := range list.Items {
		items = append(items, fmt.Sprintf("%s %s replicas=%d", it.GetAPIVersion(), it.GetName(), field(&it, "replicas")))
	}
	if want := fmt.Sprintf("[%[1]s/v2 g1 replicas=3 %[1]s/v2 g2 replicas=5]", group); fmt.Sprint(items) != want {
		t.Errorf("list in v2: %v, want %s", items, want)
	}
	w, err := v2.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch in v2: %v", err)
	}
	defer w.Stop()
	if _, err := v1.Patch(ctx, "g1", "application/merge-patch+json", []byte(`{"spec":{"size":4}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch in v1: %v", err)
	}
	ev := nextEventOrError(ctx, t, w)
	if u, ok := ev.Object.(*unstructured.Unstructured); !ok || ev.Type != watch.Modified || u.GetAPIVersion() != group+"/v2" || field(u, "replicas") != 4 {
		t.Errorf("watch in v2: %s %v, want MODIFIED g1 with spec.replicas 4", ev.Type, ev.Object)
	}
	w.Stop()

	// The storage version becomes v2: new objects are stored in v2, the
	// ones stored in v1 are read converted through v2.
	putCRD("v2")
	n := 0
	storagetest.Eventually(t, 30*time.Second, "objects stored in v2", func() error {
		n++
		name := fmt.Sprintf("probe-%d", n)
		if _, err := v1.Create(ctx, gadget("v1", name, "size", 1), metav1.CreateOptions{}); err != nil {
			return err
		}
		if apiVersion, spec := stored(name); apiVersion != group+"/v2" || fmt.Sprint(spec) != "map[replicas:1]" {
			return fmt.Errorf("%s stored as %s %v", name, apiVersion, spec)
		}
		return nil
	})
	if apiVersion, _ := stored("g1"); apiVersion != group+"/v1" {
		t.Fatalf("g1 stored as %s, want still v1", apiVersion)
	}
	got, err = v2.Get(ctx, "g1", metav1.GetOptions{})
	if err != nil || got.GetAPIVersion() != group+"/v2" || field(got, "replicas") != 4 {
		t.Errorf("g1 (stored in v1) read through v2, the storage version: %v, %v", got, err)
	}
	list, err = v2.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		if it.GetAPIVersion() != group+"/v2" || field(&it, "replicas") == 0 {
			t.Errorf("listed through v2: %v", it.Object)
		}
	}

	// The webhook down: a read needing conversion is upstream's 500; a
	// watch needing it ends with an ERROR event carrying that Status.
	w, err = v1.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch in v1: %v", err)
	}
	defer w.Stop()
	srv.Close()
	_, err = v1.Get(ctx, "g1", metav1.GetOptions{})
	wantMsg := fmt.Sprintf("conversion webhook for %s/v2, Kind=Gadget failed", group)
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.Status().Code != http.StatusInternalServerError || se.Status().Reason != metav1.StatusReasonUnknown ||
		!strings.Contains(se.Status().Message, wantMsg) {
		t.Errorf("get in v1 with the webhook down: %v, want a 500 saying %q", err, wantMsg)
	}
	// Reads and writes in the storage version need no webhook.
	if _, err := v2.Patch(ctx, "probe-1", "application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch in v2 with the webhook down: %v", err)
	}
	ev = nextEventOrError(ctx, t, w)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok || st.Code != http.StatusInternalServerError || !strings.Contains(st.Message, wantMsg) {
		t.Errorf("watch in v1 with the webhook down: %s %v, want an ERROR with a 500 saying %q", ev.Type, ev.Object, wantMsg)
	}
}

// nextEventOrError returns w's next event that is not a bookmark, an
// ERROR too (nextEvent fails on those).
func nextEventOrError(ctx context.Context, t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			if ev.Type != watch.Bookmark {
				return ev
			}
		case <-ctx.Done():
			t.Fatal("no watch event")
		}
	}
}
