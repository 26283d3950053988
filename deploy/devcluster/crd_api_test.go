package devcluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1ac "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/storage/storagetest"
)

func testCRD(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	const group = "crdapi.example.com"
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: plural, Singular: strings.TrimSuffix(plural, "s"), Kind: kind, ListKind: kind + "List",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: ptrTrue()}},
				}},
			}},
		},
	}
}

func ptrTrue() *bool { t := true; return &t }

// TestCRDAPI serves CustomResourceDefinitions through two gateways, of
// which exactly one runs the CRD controller: a CRD created with client-go's
// apiextensions clientset gets its names and is established, a second one
// asking for a kind the first has is refused, an invalid one is 422 with
// upstream's causes, and deleting the first removes its objects (seeded in
// etcd) and then it.
func TestCRDAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := startDev(ctx, devcluster.Config{
		DataDir: t.TempDir(), UnsafeNoFsync: true, Build: "test", Logger: testLogger(), Gateways: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	var clients []apiextensionsclient.Interface
	for _, gw := range c.Gateways {
		cfg := restConfig(t, c, false, nil)
		cfg.Host = "https://" + gw.Gateway.Addr()
		cs, err := apiextensionsclient.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cs)
	}
	crds := clients[0].ApiextensionsV1().CustomResourceDefinitions()

	// Exactly one gateway runs the cluster-wide controllers.
	storagetest.Eventually(t, 30*time.Second, "one gateway leads", func() error {
		leading, err := leadingGateways(c)
		if err != nil {
			return err
		}
		if len(leading) != 1 {
			return fmt.Errorf("gateways leading: %v, want exactly one", leading)
		}
		return nil
	})

	// Discovery lists the CRD resource as upstream does.
	list, err := clients[1].Discovery().ServerResourcesForGroupVersion("apiextensions.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
		if r.Name == "customresourcedefinitions" && (!slices.Equal(r.ShortNames, []string{"crd", "crds"}) || r.Namespaced || !slices.Equal(r.Categories, []string{"api-extensions"})) {
			t.Errorf("discovery: %+v", r)
		}
	}
	if !slices.Equal(names, []string{"customresourcedefinitions", "customresourcedefinitions/status"}) {
		t.Errorf("apiextensions.k8s.io/v1 resources %v", names)
	}

	// OpenAPI v3 describes the group with apiextensions-apiserver's schemas.
	paths, err := clients[1].Discovery().OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	gv, ok := paths["apis/apiextensions.k8s.io/v1"]
	if !ok {
		t.Fatal("OpenAPI v3 has no apis/apiextensions.k8s.io/v1")
	}
	doc, err := gv.Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}/status`, `io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec`} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("OpenAPI v3 of apiextensions.k8s.io/v1 lacks %s", want)
		}
	}

	condition := func(cs apiextensionsclient.Interface, name string, typ apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus, reason string) func() error {
		return func() error {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got := apiextensionshelpers.FindCRDCondition(crd, typ)
			if got == nil || got.Status != status || got.Reason != reason {
				return fmt.Errorf("%s %s is %+v, want %s %s", name, typ, got, status, reason)
			}
			return nil
		}
	}

	// A CRD: names accepted, then established, seen through both gateways.
	created, err := crds.Create(ctx, testCRD("widgets", "Widget"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Generation != 1 || len(created.Status.Conditions) != 0 || !slices.Equal(created.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("created: generation %d, status %+v", created.Generation, created.Status)
	}
	const widgets = "widgets.crdapi.example.com"
	for i, cs := range clients {
		storagetest.Eventually(t, 30*time.Second, fmt.Sprintf("gateway %d: widgets established", i), condition(cs, widgets, apiextensionsv1.Established, "True", "InitialNamesAccepted"))
		if err := condition(cs, widgets, apiextensionsv1.NamesAccepted, "True", "NoConflicts")(); err != nil {
			t.Error(err)
		}
	}
	got, err := crds.Get(ctx, widgets, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.AcceptedNames.Plural != "widgets" || got.Status.AcceptedNames.Kind != "Widget" {
		t.Errorf("acceptedNames %+v", got.Status.AcceptedNames)
	}

	// A second CRD of the group asking for the kind Widget.
	if _, err := crds.Create(ctx, testCRD("gadgets", "Widget"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 30*time.Second, "gadgets refused", condition(clients[1], "gadgets.crdapi.example.com", apiextensionsv1.NamesAccepted, "False", "ListKindConflict"))
	if err := condition(clients[1], "gadgets.crdapi.example.com", apiextensionsv1.Established, "False", "NotAccepted")(); err != nil {
		t.Error(err)
	}

	// Server-side apply: the field manager knows the kind.
	applied, err := crds.Apply(ctx, apiextensionsv1ac.CustomResourceDefinition("appliedthings.crdapi.example.com").
		WithSpec(apiextensionsv1ac.CustomResourceDefinitionSpec().
			WithGroup("crdapi.example.com").WithScope(apiextensionsv1.ClusterScoped).
			WithNames(apiextensionsv1ac.CustomResourceDefinitionNames().WithPlural("appliedthings").WithKind("AppliedThing")).
			WithVersions(apiextensionsv1ac.CustomResourceDefinitionVersion().WithName("v1").WithServed(true).WithStorage(true).
				WithSchema(apiextensionsv1ac.CustomResourceValidation().WithOpenAPIV3Schema(apiextensionsv1ac.JSONSchemaProps().WithType("object"))))),
		metav1.ApplyOptions{FieldManager: "crdapi-test", Force: true})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if len(applied.ManagedFields) != 1 || applied.ManagedFields[0].Manager != "crdapi-test" || applied.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("applied CRD managedFields %+v", applied.ManagedFields)
	}
	storagetest.Eventually(t, 30*time.Second, "appliedthings established", condition(clients[1], "appliedthings.crdapi.example.com", apiextensionsv1.Established, "True", "InitialNamesAccepted"))

	// An invalid CRD: upstream's 422 with causes.
	bad := testCRD("things", "Thing")
	bad.Spec.Versions[0].Storage = false
	_, err = crds.Create(ctx, bad, metav1.CreateOptions{})
	var se *apierrors.StatusError
	if !apierrors.IsInvalid(err) || !errors.As(err, &se) || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) == 0 {
		t.Errorf("invalid CRD: %v, want 422 with causes", err)
	} else if !strings.Contains(err.Error(), "must have exactly one version marked as storage version") {
		t.Errorf("invalid CRD: %v, want upstream's message", err)
	}

	// Objects of widgets seeded in etcd go with their CRD.
	etcd := c.EtcdClient()
	for _, k := range []string{"/registry/crdapi.example.com/widgets/default/w1", "/registry/crdapi.example.com/widgets/other/w2"} {
		if _, err := etcd.Put(ctx, k, `{"apiVersion":"crdapi.example.com/v1","kind":"Widget","metadata":{"name":"w"}}`); err != nil {
			t.Fatal(err)
		}
	}
	if err := crds.Delete(ctx, widgets, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 30*time.Second, "widgets removed", func() error {
		_, err := crds.Get(ctx, widgets, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %v, want 404", err)
		}
		return nil
	})
	resp, err := etcd.Get(ctx, "/registry/crdapi.example.com/widgets/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d objects of widgets left after its CRD went", resp.Count)
	}
	// The kind widgets had is free: gadgets gets it.
	storagetest.Eventually(t, 30*time.Second, "gadgets established", condition(clients[0], "gadgets.crdapi.example.com", apiextensionsv1.Established, "True", "InitialNamesAccepted"))

	if leading, err := leadingGateways(c); err != nil || len(leading) != 1 {
		t.Errorf("gateways leading at the end: %v (%v), want exactly one", leading, err)
	}
}

// leadingGateways returns the gateways whose kgate_controllers_leading is 1.
func leadingGateways(c *devcluster.Cluster) ([]string, error) {
	mfs, err := c.Registry.Gather()
	if err != nil {
		return nil, err
	}
	var out []string
	seen := 0
	for _, mf := range mfs {
		if mf.GetName() != "kgate_controllers_leading" {
			continue
		}
		for _, m := range mf.GetMetric() {
			seen++
			if m.GetGauge().GetValue() == 1 {
				out = append(out, metricLabel(m, "gateway"))
			}
		}
	}
	if seen != len(c.Gateways) {
		return nil, fmt.Errorf("kgate_controllers_leading of %d gateways, want %d", seen, len(c.Gateways))
	}
	return out, nil
}

func metricLabel(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
