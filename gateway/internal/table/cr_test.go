package table

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage/registry"
)

func TestCustomResourceColumns(t *testing.T) {
	c := converter(t)
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1", AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Size", Type: "integer", JSONPath: ".spec.size"}}},
			{Name: "v2"},
		},
	}}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "creationTimestamp": "2020-01-01T00:00:00Z"},
		"spec":     map[string]any{"size": int64(3)},
	}}
	names := func(t *metav1.Table) []string {
		var out []string
		for _, c := range t.ColumnDefinitions {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tc := range []struct {
		version string
		want    []string
		cells   int
	}{
		{"v1", []string{"Name", "Size"}, 2},
		{"v2", []string{"Name", "Age"}, 2},
	} {
		res := &registry.Resource{Group: "example.com", Version: tc.version, Resource: "widgets", Kind: "Widget", CRD: crd}
		tbl, err := c.ConvertObject(w, res, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := names(tbl); len(got) != len(tc.want) || got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Errorf("%s: columns %v, want %v", tc.version, got, tc.want)
		}
		if len(tbl.Rows) != 1 || len(tbl.Rows[0].Cells) != tc.cells || tbl.Rows[0].Cells[0] != "w" {
			t.Errorf("%s: rows %+v", tc.version, tbl.Rows)
		}
		if tc.version == "v1" && tbl.Rows[0].Cells[1] != int64(3) {
			t.Errorf("size cell %#v, want 3", tbl.Rows[0].Cells[1])
		}
		list, err := c.Convert([]runtime.Object{w, w}, res, "")
		if err != nil || len(list.Rows) != 2 {
			t.Errorf("%s: list of 2: %v, %v", tc.version, list, err)
		}
	}
}
