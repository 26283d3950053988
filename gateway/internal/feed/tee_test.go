package feed

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestTeeFeedsEverySink(t *testing.T) {
	a, b := NewStore(), NewStore()
	tee := Tee{a, b}
	ns := func(name string) runtime.Object { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	tee.Replace([]runtime.Object{ns("x"), ns("y")})
	if err := tee.Upsert(ns("z")); err != nil {
		t.Fatal(err)
	}
	if err := tee.Delete(ns("x")); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*Store{a, b} {
		_, x := s.Get("", "x")
		_, y := s.Get("", "y")
		_, z := s.Get("", "z")
		if x || !y || !z || len(s.List("")) != 2 {
			t.Errorf("sink %d holds x=%v y=%v z=%v (%d objects), want y and z", i, x, y, z, len(s.List("")))
		}
	}
	if err := tee.Upsert(&runtime.Unknown{}); err == nil {
		t.Error("an object without metadata was taken")
	}
}
