package devcluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/deploy/devcluster"

	"github.com/kgate/kgate/storage/storagetest"
)

// crdPrefix is where kube-apiserver keeps CRDs.
const crdPrefix = "/registry/apiextensions.k8s.io/customresourcedefinitions/"

// widgetCRD is an established CRD of group's widgets: v1 (storage, status
// subresource, spec.color a selectable field) and v1beta1, spec.size an integer ≥ 1 that a CEL rule caps
// at 10, spec.color defaulting to blue, status.ready a boolean.
func widgetCRD(group string) *apiextensionsv1.CustomResourceDefinition {
	one := 1.0
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"size":  {Type: "integer", Minimum: &one},
					"color": {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"blue"`)}},
				},
				XValidations: apiextensionsv1.ValidationRules{{Rule: "self.size <= 10", Message: "size must be at most 10"}},
			},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"ready": {Type: "boolean"}}},
		},
	}}
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList", ShortNames: []string{"wdg"}}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group, UID: "widgets-" + "uid"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Names: names, Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schema,
					Subresources:     &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
					SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".spec.color"}}},
				{Name: "v1beta1", Served: true, Schema: schema},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			AcceptedNames:  names,
			StoredVersions: []string{"v1"},
			Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
				{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
			},
		},
	}
}

// TestCRDServe seeds a CRD into etcd and serves its custom resources
// through client-go's dynamic client: create (pruned, defaulted, status
// dropped), get in both versions, list, watch, the status subresource
// (generation bumped only by spec changes), 422 with upstream's messages
// for a schema and a CEL violation, field selectors, patches and
// server-side apply; removing the CRD removes the
// endpoints.
func TestCRDServe(t *testing.T) {
	c := cluster(t)
	testCRDServe(t, c, restConfig(t, c, true, nil))
}

// TestCRDServeSharded serves a custom resource with 3 cache nodes and 2
// gateways, all of it through the second gateway: every gateway and
// cache node follows the CRDs in etcd.
func TestCRDServeSharded(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := startDev(ctx, devcluster.Config{
		DataDir: t.TempDir(), UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
		CacheNodes: 3, Gateways: 2, Replicas: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	cfg := restConfig(t, c, true, nil)
	cfg.Host = "https://" + c.Gateways[1].Gateway.Addr()
	testCRDServe(t, c, cfg)
}

func testCRDServe(t *testing.T, c *devcluster.Cluster, cfg *rest.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := uniqueNS("crdserve") + ".example.com"
	crd := widgetCRD(group)
	raw, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	key := crdPrefix + crd.Name
	if _, err := c.EtcdClient().Put(ctx, key, string(raw)); err != nil {
		t.Fatal(err)
	}
	defer c.EtcdClient().Delete(context.Background(), key)

	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := func(version string) error {
		list, err := disco.ServerResourcesForGroupVersion(group + "/" + version)
		if err != nil {
			return err
		}
		for _, r := range list.APIResources {
			if r.Name == "widgets" {
				return nil
			}
		}
		return errors.New("widgets not in discovery")
	}
	storagetest.Eventually(t, 30*time.Second, "the gateway serves widgets", func() error { return served("v1") })
	if list, err := disco.ServerResourcesForGroupVersion(group + "/v1"); err == nil {
		for _, r := range list.APIResources {
			if r.Name == "widgets" && (r.Kind != "Widget" || !r.Namespaced || len(r.ShortNames) != 1 || r.ShortNames[0] != "wdg") {
				t.Errorf("discovery of widgets: %+v", r)
			}
		}
	}

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := uniqueNS("crdserve")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, cs, ns)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	widgets := dyn.Resource(gvr).Namespace(ns)
	widget := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name},
			"spec":     spec,
			"status":   map[string]any{"ready": true},
			"unknown":  "pruned",
		}}
	}

	// Create: unknown fields pruned, defaults applied, status dropped.
	created, err := widgets.Create(ctx, widget("w1", map[string]any{"size": int64(3), "extra": "pruned"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if color, _, _ := unstructured.NestedString(created.Object, "spec", "color"); color != "blue" {
		t.Errorf("spec.color = %q, want the default blue", color)
	}
	for _, path := range [][]string{{"spec", "extra"}, {"unknown"}, {"status"}} {
		if _, found, _ := unstructured.NestedFieldNoCopy(created.Object, path...); found {
			t.Errorf("%s kept on create: %v", strings.Join(path, "."), created.Object)
		}
	}
	if created.GetGeneration() != 1 || created.GetUID() == "" || created.GetResourceVersion() == "" {
		t.Errorf("created metadata: generation %d, uid %q, resourceVersion %q", created.GetGeneration(), created.GetUID(), created.GetResourceVersion())
	}

	// fieldValidation Strict (kubectl's default) refuses unknown fields
	// as upstream's decoder does.
	_, err = widgets.Create(ctx, widget("strict", map[string]any{"size": int64(3), "extra": "x"}), metav1.CreateOptions{FieldValidation: "Strict"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `strict decoding error: unknown field "spec.extra"`) {
		t.Errorf("strict create with unknown fields: %v, want upstream's 400", err)
	}

	// Get, in both versions; list.
	got, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil || got.GetResourceVersion() != created.GetResourceVersion() {
		t.Fatalf("get: %v, %v", got, err)
	}
	beta := gvr
	beta.Version = "v1beta1"
	storagetest.Eventually(t, 30*time.Second, "v1beta1 served", func() error { return served("v1beta1") })
	gotBeta, err := dyn.Resource(beta).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get v1beta1: %v", err)
	}
	if gotBeta.GetAPIVersion() != group+"/v1beta1" || gotBeta.GetUID() != created.GetUID() {
		t.Errorf("v1beta1 object: apiVersion %s, uid %s", gotBeta.GetAPIVersion(), gotBeta.GetUID())
	}
	list, err := widgets.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "w1" {
		t.Fatalf("list: %v, %v", list, err)
	}

	// Field selectors on the selectable field.
	for sel, want := range map[string]int{"spec.color=blue": 1, "spec.color=red": 0, "metadata.name=w1": 1} {
		l, err := widgets.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil || len(l.Items) != want {
			t.Errorf("list %s: %v items, %v; want %d", sel, l, err, want)
		}
	}
	if _, err := widgets.List(ctx, metav1.ListOptions{FieldSelector: "spec.size=3"}); !apierrors.IsBadRequest(err) {
		t.Errorf("a field that is not selectable: %v, want 400", err)
	}

	// Patches: merge and JSON patch work, strategic merge is a 415.
	if p, err := widgets.Patch(ctx, "w1", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{}); err != nil || p.GetLabels()["a"] != "b" || p.GetGeneration() != 1 {
		t.Errorf("merge patch: %v, %v", p, err)
	}
	if _, err := widgets.Patch(ctx, "w1", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}); !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch: %v, want 415", err)
	}
	// Server-side apply types the patch with the CRD's schema, as
	// upstream: a field it does not declare fails the apply, whatever
	// fieldValidation says.
	if _, err := widgets.Apply(ctx, "w2", widget("w2", map[string]any{"size": int64(2)}), metav1.ApplyOptions{FieldManager: "crd-test"}); err == nil || !strings.Contains(err.Error(), ".unknown: field not declared in schema") {
		t.Errorf("apply with a field the schema does not declare: %v, want upstream's error", err)
	}
	// Server-side apply creates and records its manager; managedFields
	// record the other writes too.
	w2 := widget("w2", map[string]any{"size": int64(2)})
	delete(w2.Object, "unknown")
	applied, err := widgets.Apply(ctx, "w2", w2, metav1.ApplyOptions{FieldManager: "crd-test"})
	if err != nil {
		t.Fatalf("server-side apply: %v", err)
	}
	if mf := applied.GetManagedFields(); len(mf) != 1 || mf[0].Manager != "crd-test" || mf[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("managedFields after apply: %+v", mf)
	}
	if color, _, _ := unstructured.NestedString(applied.Object, "spec", "color"); color != "blue" {
		t.Errorf("applied spec.color %q, want the default", color)
	}
	if err := widgets.Delete(ctx, "w2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = widgets.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetManagedFields()) == 0 {
		t.Error("no managedFields on a created widget")
	}
	list, err = widgets.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Watch from the list; the status subresource sets status without a
	// new generation, a spec change bumps it.
	w, err := widgets.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	withStatus := got.DeepCopy()
	if err := unstructured.SetNestedField(withStatus.Object, true, "status", "ready"); err != nil {
		t.Fatal(err)
	}
	updated, err := widgets.UpdateStatus(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if ready, _, _ := unstructured.NestedBool(updated.Object, "status", "ready"); !ready || updated.GetGeneration() != 1 {
		t.Errorf("after the status update: ready %v, generation %d (want true, 1)", ready, updated.GetGeneration())
	}
	// The main resource may not change status.
	spec := updated.DeepCopy()
	if err := unstructured.SetNestedField(spec.Object, int64(4), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(spec.Object, false, "status", "ready"); err != nil {
		t.Fatal(err)
	}
	updated, err = widgets.Update(ctx, spec, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if ready, _, _ := unstructured.NestedBool(updated.Object, "status", "ready"); !ready || updated.GetGeneration() != 2 {
		t.Errorf("after the spec update: ready %v, generation %d (want status kept, generation 2)", ready, updated.GetGeneration())
	}
	var events []string
	for len(events) < 2 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended after %v", events)
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type != watch.Modified {
				t.Fatalf("watch event %s %T, want MODIFIED widgets", ev.Type, ev.Object)
			}
			events = append(events, fmt.Sprintf("%s gen=%d", ev.Type, u.GetGeneration()))
		case <-ctx.Done():
			t.Fatalf("watch saw %v, want 2 events", events)
		}
	}
	if want := "[MODIFIED gen=1 MODIFIED gen=2]"; fmt.Sprint(events) != want {
		t.Errorf("watch events %v, want %s", events, want)
	}

	// A schema violation and a CEL rule violation: 422 with upstream's
	// messages.
	for _, tc := range []struct {
		size        int64
		field, text string
	}{
		{0, "spec.size", "spec.size in body should be greater than or equal to 1"},
		{11, "spec", "size must be at most 10"},
	} {
		_, err := widgets.Create(ctx, widget(fmt.Sprintf("bad-%d", tc.size), map[string]any{"size": tc.size}), metav1.CreateOptions{})
		var se *apierrors.StatusError
		if !errors.As(err, &se) || se.Status().Code != 422 || se.Status().Reason != metav1.StatusReasonInvalid {
			t.Errorf("size %d: %v, want 422 Invalid", tc.size, err)
			continue
		}
		found := false
		for _, cause := range se.Status().Details.Causes {
			if cause.Field == tc.field && strings.Contains(cause.Message, tc.text) {
				found = true
			}
		}
		if !found {
			t.Errorf("size %d: causes %+v, want %s: %s", tc.size, se.Status().Details.Causes, tc.field, tc.text)
		}
	}

	// Delete; then the CRD goes and so do its endpoints.
	if err := widgets.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.EtcdClient().Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 30*time.Second, "widgets no longer served", func() error {
		_, err := widgets.List(ctx, metav1.ListOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("list: %v, want 404", err)
		}
		return nil
	})
}
