package chaos

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kgate/kgate/deploy/watchcheck"
)

// TestInformerRelists: the first sync is not a relist, every later one is.
func TestInformerRelists(t *testing.T) {
	list := func(context.Context, metav1.ListOptions) (*corev1.ConfigMapList, error) {
		return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}, nil
	}
	noWatch := func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewEmptyWatch(), nil }
	in := &informer{id: 3, lw: watchcheck.NewCountingLWFuncs(list, noWatch, fake.NewClientset())}
	lw := in.lw.ListerWatcher()
	for k := range 3 {
		if _, err := lw.List(metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := len(in.relists()); got != k {
			t.Fatalf("after %d lists: %d relists, want %d", k+1, got, k)
		}
	}
	if r := in.relists()[1]; !strings.Contains(r.What, "informer 3 listed again (sync #3") {
		t.Errorf("relist finding %q", r.What)
	}
}
