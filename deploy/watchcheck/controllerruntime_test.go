package watchcheck

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kgate/kgate/storage/storagetest"
)

// gizmoGVK is the custom resource the controller-runtime test reconciles.
var gizmoGVK = schema.GroupVersionKind{Group: "crtest.example.com", Version: "v1", Kind: "Gizmo"}

// gizmoCRD: namespaced Gizmos, spec.size an integer, status.observedSize
// through the status subresource.
func gizmoCRD() *apiextensionsv1.CustomResourceDefinition {
	integer := apiextensionsv1.JSONSchemaProps{Type: "integer"}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos." + gizmoGVK.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gizmoGVK.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": integer}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"observedSize": integer}},
					},
				}},
			}},
		},
	}
}

// TestControllerRuntime runs a controller-runtime manager against kgate
// (one cache node, one gateway), reconciling a custom resource created
// through the API: its cache syncs, it sees creates and spec updates and
// writes status.observedSize through the status subresource. The gateway
// is then stopped and started again on its address: the manager goes on
// (new objects and updates reconciled) and its informer resumes its
// watch from the cache node's window instead of listing again: at most
// one LIST of gizmos reaches the new gateway (a relist storm would be
// many), counted by the gateway's apiserver_request_total.
func TestControllerRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m, err := StartMulti(ctx, MultiConfig{Dir: t.TempDir(), Logger: testLogger(), CacheNodes: 1, Gateways: 1, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	cfg, err := m.RESTConfig(m.GatewayAddr(0), "watchcheck-controller-runtime", false)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gizmoCRD())
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: crd}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the CRD: %v", err)
	}
	gizmos := dyn.Resource(gizmoGVK.GroupVersion().WithResource("gizmos")).Namespace("default")
	storagetest.Eventually(t, 30*time.Second, "gizmos served", func() error {
		_, err := gizmos.List(ctx, metav1.ListOptions{})
		return err
	})

	// controller-runtime's packages log through its process-wide logger.
	ctrllog.SetLogger(logr.FromSlogHandler(testLogger().Handler()))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.FromSlogHandler(testLogger().Handler()),
	})
	if err != nil {
		t.Fatal(err)
	}
	reconciles := make(chan string, 100)
	c := mgr.GetClient()
	newGizmo := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gizmoGVK)
		return u
	}
	err = ctrl.NewControllerManagedBy(mgr).For(newGizmo()).Named("gizmo").Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		g := newGizmo()
		if err := c.Get(ctx, req.NamespacedName, g); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		size, _, _ := unstructured.NestedInt64(g.Object, "spec", "size")
		observed, found, _ := unstructured.NestedInt64(g.Object, "status", "observedSize")
		if found && observed == size {
			return reconcile.Result{}, nil
		}
		if err := unstructured.SetNestedField(g.Object, size, "status", "observedSize"); err != nil {
			return reconcile.Result{}, err
		}
		if err := c.Status().Update(ctx, g); err != nil {
			return reconcile.Result{}, err
		}
		select {
		case reconciles <- fmt.Sprintf("%s=%d", req.Name, size):
		default:
		}
		return reconcile.Result{}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(ctx)
	mdone := make(chan error, 1)
	go func() { mdone <- mgr.Start(mctx) }()
	defer func() {
		mcancel()
		if err := <-mdone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager: %v", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the manager's cache did not sync")
	}

	// reconciled waits until the manager has written the status of name
	// for size, and checks it through the API.
	reconciled := func(name string, size int64) {
		t.Helper()
		want := fmt.Sprintf("%s=%d", name, size)
		for {
			select {
			case got := <-reconciles:
				if got != want {
					continue // an earlier state of another gizmo
				}
				g, err := gizmos.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if observed, _, _ := unstructured.NestedInt64(g.Object, "status", "observedSize"); observed != size || g.GetGeneration() < 1 {
					t.Fatalf("%s: status.observedSize %d, want %d", name, observed, size)
				}
				return
			case <-ctx.Done():
				t.Fatalf("%s not reconciled", want)
			}
		}
	}
	gizmo := func(name string, size int64) *unstructured.Unstructured {
		g := newGizmo()
		g.SetName(name)
		g.Object["spec"] = map[string]any{"size": size}
		return g
	}
	setSize := func(name string, size int64) {
		t.Helper()
		patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)
		if _, err := gizmos.Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gizmos.Create(ctx, gizmo("g1", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reconciled("g1", 1)
	setSize("g1", 2)
	reconciled("g1", 2)

	lists := func() float64 {
		return m.Counter(0, "apiserver_request_total", map[string]string{"verb": "LIST", "resource": "gizmos"})
	}
	before := lists()
	if before < 1 {
		t.Fatalf("%v LISTs of gizmos counted; the test's own list is one: the count does not work", before)
	}
	if err := m.StopGateway(0); err != nil {
		t.Fatal(err)
	}
	if err := m.StartGateway(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := gizmos.Create(ctx, gizmo("g2", 5), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reconciled("g2", 5)
	setSize("g1", 3)
	reconciled("g1", 3)
	if n := lists() - before; n > 1 {
		t.Errorf("%v LISTs of gizmos after the gateway restart, want at most 1 (the informer resumes its watch)", n)
	}
}
