package table

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestCRDTable prints CRDs with apiextensions-apiserver's convertor, as
// kube-apiserver's CRD registry does: its columns, not the default table.
func TestCRDTable(t *testing.T) {
	res := lookup(t, "apiextensions.k8s.io", "v1", "customresourcedefinitions")
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", CreationTimestamp: metav1.Unix(1700000000, 0)},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget", ShortNames: []string{"wd", "wdg"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v2", Served: true}, {Name: "v1", Served: true, Storage: true}, {Name: "v0"},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
		}},
	}
	for _, list := range []bool{false, true} {
		var tbl *metav1.Table
		var err error
		if list {
			tbl, err = converter(t).Convert([]runtime.Object{crd, crd.DeepCopy()}, res, "Metadata")
		} else {
			tbl, err = converter(t).ConvertObject(crd, res, "Metadata")
		}
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, c := range tbl.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if want := []string{"Name", "Scope", "Versions", "Created At", "Group", "Kind", "ShortNames", "Established"}; !cmp.Equal(cols, want) {
			t.Errorf("list %v: columns %v, want %v", list, cols, want)
		}
		want := []any{"widgets.example.com", "Namespaced", "v1(storage),v2", "2023-11-14T22:13:20Z", "example.com", "Widget", "wd,wdg", true}
		if diff := cmp.Diff(want, tbl.Rows[0].Cells); diff != "" {
			t.Errorf("list %v: cells (-want +got):\n%s", list, diff)
		}
		if list && len(tbl.Rows) != 2 {
			t.Errorf("%d rows for 2 CRDs", len(tbl.Rows))
		}
	}
}
