package customresource

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kgate/kgate/gateway/internal/crconvert"
	"github.com/kgate/kgate/storage/registry"
)

func converter(t *testing.T) Converter {
	t.Helper()
	c, err := crconvert.New(crconvert.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type failingConverter struct{}

func (failingConverter) Convert(*apiextensionsv1.CustomResourceDefinition, *unstructured.Unstructured, string) (*unstructured.Unstructured, error) {
	return nil, errors.New(`conversion webhook for example.com/v1, Kind=Widget failed: Post "https://127.0.0.1:1/convert": connection refused`)
}

func (failingConverter) ConvertList(*apiextensionsv1.CustomResourceDefinition, []*unstructured.Unstructured, string) ([]*unstructured.Unstructured, error) {
	return nil, errors.New(`conversion webhook for example.com/v1, Kind=Widget failed: Post "https://127.0.0.1:1/convert": connection refused`)
}

func TestConvertCustomResource(t *testing.T) {
	crd := widgetCRD()
	res := &registry.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget", CRD: crd}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}}

	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(reg, noBuiltin{}, converter(t))
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.ConvertCustomResource(res, obj, "v1")
	if err != nil || out != obj {
		t.Errorf("conversion to the object's own version: %v, %v; want the object itself", out, err)
	}

	s, err = New(reg, noBuiltin{}, failingConverter{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ConvertCustomResource(res, obj, "v2")
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("a failed conversion: %v, want a Status", err)
	}
	want := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonUnknown,
		Message: `conversion webhook for example.com/v1, Kind=Widget failed: Post "https://127.0.0.1:1/convert": connection refused`,
	}
	if se.ErrStatus != want {
		t.Errorf("a failed conversion: %+v, want upstream's %+v", se.ErrStatus, want)
	}
	_, err = s.ConvertCustomResources(res, []*unstructured.Unstructured{obj}, "v2")
	if !errors.As(err, &se) || se.ErrStatus != want {
		t.Errorf("a failed list conversion: %v, want upstream's %+v", err, want)
	}

	if _, err := New(reg, noBuiltin{}, nil); err == nil {
		t.Error("New without a converter: no error")
	}
}

func TestConvertsReads(t *testing.T) {
	one := widgetCRD()
	one.Spec.Versions = one.Spec.Versions[:1]
	two := widgetCRD()
	two.Spec.Versions = append(two.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v2", Served: true})
	s := &Semantics{}
	for _, tt := range []struct {
		res  *registry.Resource
		want bool
	}{
		{&registry.Resource{Resource: "pods"}, false},
		{&registry.Resource{Resource: "widgets", CRD: one}, false},
		{&registry.Resource{Resource: "widgets", CRD: two}, true},
	} {
		if got := s.ConvertsReads(tt.res); got != tt.want {
			t.Errorf("ConvertsReads(%+v) = %v, want %v", tt.res, got, tt.want)
		}
	}
}
