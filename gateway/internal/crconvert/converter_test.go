package crconvert

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kgate/kgate/gateway/crconverttest"
)

func newConverter(t *testing.T, services Services) *Converter {
	t.Helper()
	c, err := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Services: services})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// crd has v1 (spec.size) and v2 (spec.replicas), v1 stored.
func crd(conv *apiextensionsv1.CustomResourceConversion) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true}, {Name: "v2", Served: true},
			},
			Conversion: conv,
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			AcceptedNames: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Kind: "Gadget", ListKind: "GadgetList"},
		},
	}
}

func gadget(name, apiVersion, field string, v int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": "Gadget",
		"metadata": map[string]any{"name": name, "namespace": "ns", "uid": "u-" + name, "resourceVersion": "7"},
		"spec":     map[string]any{field: v},
	}}
}

func TestConvertNone(t *testing.T) {
	c := newConverter(t, nil)
	def := crd(&apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter})
	in := gadget("g", "example.com/v1", "size", 3)
	out, err := c.Convert(def, in, "v2")
	if err != nil {
		t.Fatal(err)
	}
	if out.GetAPIVersion() != "example.com/v2" || in.GetAPIVersion() != "example.com/v1" {
		t.Errorf("None: out %s, in %s; want v2 and the input untouched", out.GetAPIVersion(), in.GetAPIVersion())
	}
	if v, _, _ := unstructured.NestedInt64(out.Object, "spec", "size"); v != 3 {
		t.Errorf("None changed the spec: %v", out.Object)
	}
	// A CRD without spec.conversion (not defaulted) converts as None.
	out, err = c.Convert(crd(nil), in, "v2")
	if err != nil || out.GetAPIVersion() != "example.com/v2" {
		t.Errorf("no spec.conversion: %v, %v", out, err)
	}
	if _, err := c.Convert(def, in, "v9"); err == nil {
		t.Error("conversion to a version the CRD has not: no error")
	}
}

func TestConvertWebhook(t *testing.T) {
	for _, rv := range []string{"v1", "v1beta1"} {
		t.Run(rv, func(t *testing.T) {
			srv := crconverttest.New(crconverttest.RenameField("v1", "size", "replicas"))
			defer srv.Close()
			c := newConverter(t, nil)
			def := crd(srv.Conversion(rv))

			out, err := c.Convert(def, gadget("g", "example.com/v1", "size", 3), "v2")
			if err != nil {
				t.Fatal(err)
			}
			if v, _, _ := unstructured.NestedInt64(out.Object, "spec", "replicas"); v != 3 || out.GetAPIVersion() != "example.com/v2" {
				t.Errorf("v1 → v2: %v", out.Object)
			}
			back, err := c.Convert(def, out, "v1")
			if err != nil {
				t.Fatal(err)
			}
			if v, _, _ := unstructured.NestedInt64(back.Object, "spec", "size"); v != 3 || back.GetAPIVersion() != "example.com/v1" {
				t.Errorf("v2 → v1: %v", back.Object)
			}
			// Already in the version: the webhook is not called.
			same, err := c.Convert(def, back, "v1")
			if err != nil || same != back {
				t.Errorf("conversion to its own version: %v, %v", same, err)
			}
			if reviews, _ := srv.Counts(); reviews != 2 {
				t.Errorf("%d reviews, want 2", reviews)
			}

			// A list: one review for the items not in the version.
			items := []*unstructured.Unstructured{
				gadget("a", "example.com/v1", "size", 1), gadget("b", "example.com/v2", "replicas", 2), gadget("c", "example.com/v1", "size", 3),
			}
			conv, err := c.ConvertList(def, items, "v2")
			if err != nil {
				t.Fatal(err)
			}
			for i, it := range conv {
				if v, _, _ := unstructured.NestedInt64(it.Object, "spec", "replicas"); v != int64(i+1) || it.GetAPIVersion() != "example.com/v2" || it.GetName() != items[i].GetName() {
					t.Errorf("item %d: %v", i, it.Object)
				}
			}
			if reviews, objects := srv.Counts(); reviews != 3 || objects != 4 {
				t.Errorf("after the list: %d reviews of %d objects, want 3 of 4", reviews, objects)
			}

			// The webhook down: upstream's error.
			srv.Close()
			_, err = c.Convert(def, gadget("g", "example.com/v1", "size", 3), "v2")
			if err == nil || !strings.Contains(err.Error(), "conversion webhook for example.com/v1, Kind=Gadget failed") {
				t.Errorf("webhook down: %v, want upstream's conversion webhook error", err)
			}
		})
	}
}

func TestConvertWebhookUntrusted(t *testing.T) {
	srv := crconverttest.New(crconverttest.RenameField("v1", "size", "replicas"))
	defer srv.Close()
	c := newConverter(t, nil)
	conv := srv.Conversion("v1")
	// Without a caBundle the system roots are trusted, which do not sign
	// the test server's certificate.
	conv.Webhook.ClientConfig.CABundle = nil
	_, err := c.Convert(crd(conv), gadget("g", "example.com/v1", "size", 3), "v2")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a webhook whose certificate nothing trusted signs: %v, want a certificate error", err)
	}
	if reviews, _ := srv.Counts(); reviews != 0 {
		t.Errorf("%d reviews reached the server", reviews)
	}
}

type fakeServices map[string]*corev1.Service

func (f fakeServices) Service(_ context.Context, ns, name string) (*corev1.Service, error) {
	if s, ok := f[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, errors.New("not found")
}

// TestServiceResolver resolves service references as kube-apiserver's
// default resolver; nothing is dialled.
func TestServiceResolver(t *testing.T) {
	svc := func(typ corev1.ServiceType, ip string, ports ...int32) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, ClusterIP: ip, ExternalName: "ext.example.com"}}
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: p})
		}
		return s
	}
	r := serviceResolver{fakeServices{
		"ns/hook":     svc(corev1.ServiceTypeClusterIP, "10.0.0.7", 443, 8443),
		"ns/headless": svc(corev1.ServiceTypeClusterIP, corev1.ClusterIPNone, 443),
		"ns/ext":      svc(corev1.ServiceTypeExternalName, ""),
	}}
	tests := []struct {
		name    string
		port    int32
		want    string
		wantErr string
	}{
		{"hook", 8443, "https://10.0.0.7:8443", ""},
		{"hook", 9000, "", "no service port 9000"},
		{"headless", 443, "", `ClusterIP "None"`},
		{"ext", 443, "https://ext.example.com:443", ""},
		{"missing", 443, "", "cannot read service ns/missing"},
	}
	for _, tt := range tests {
		u, err := r.ResolveEndpoint("ns", tt.name, tt.port)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s:%d: %v, want an error with %q", tt.name, tt.port, err, tt.wantErr)
			}
		case err != nil || u.String() != tt.want:
			t.Errorf("%s:%d: %v, %v; want %s", tt.name, tt.port, u, err, tt.want)
		}
	}
	if _, err := (serviceResolver{}).ResolveEndpoint("ns", "hook", 443); !errors.Is(err, errNoServices) {
		t.Errorf("without Services: %v", err)
	}
}
