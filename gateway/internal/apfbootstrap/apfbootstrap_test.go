package apfbootstrap

import (
	"context"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
}

// TestEnsure runs the ensurer on real etcd: every bootstrap object is
// created with upstream's spec and autoupdate annotation; a changed
// mandatory spec is put back, a changed suggested one with
// autoupdate-spec=false is kept, and a bootstrap-annotated object
// upstream does not define is deleted.
func TestEnsure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	cli := storagetest.StartEtcd(t)
	b, err := backend.Open(backend.Config{Etcd: cli, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	e, err := New(Config{Store: b.Store, Registry: b.Registry, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	fsRes, _ := b.Registry.Lookup(flowcontrolv1.SchemeGroupVersion.WithResource("flowschemas"))
	plcRes, _ := b.Registry.Lookup(flowcontrolv1.SchemeGroupVersion.WithResource("prioritylevelconfigurations"))
	getFS := func(name string) *flowcontrolv1.FlowSchema {
		t.Helper()
		obj, err := b.Store.Get(ctx, fsRes, "", name, 0)
		if err != nil {
			t.Fatalf("flowschema %s: %v", name, err)
		}
		return obj.(*flowcontrolv1.FlowSchema)
	}
	for _, want := range append(append([]*flowcontrolv1.FlowSchema{}, bootstrap.MandatoryFlowSchemas...), bootstrap.SuggestedFlowSchemas...) {
		got := getFS(want.Name)
		if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("flowschema %s spec %+v, want %+v", want.Name, got.Spec, want.Spec)
		}
		if got.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "true" {
			t.Errorf("flowschema %s annotations %v, want autoupdate-spec true", want.Name, got.Annotations)
		}
	}
	for _, want := range append(append([]*flowcontrolv1.PriorityLevelConfiguration{}, bootstrap.MandatoryPriorityLevelConfigurations...), bootstrap.SuggestedPriorityLevelConfigurations...) {
		if _, err := b.Store.Get(ctx, plcRes, "", want.Name, 0); err != nil {
			t.Errorf("priority level %s: %v", want.Name, err)
		}
	}

	change := func(name string, f func(*flowcontrolv1.FlowSchema)) {
		t.Helper()
		if _, err := b.Store.Update(ctx, fsRes, "", name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
			fs := cur.(*flowcontrolv1.FlowSchema).DeepCopy()
			f(fs)
			return fs, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	mandatory, suggested := bootstrap.MandatoryFlowSchemaCatchAll.Name, bootstrap.SuggestedFlowSchemaGlobalDefault.Name
	change(mandatory, func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 9000 })
	change(suggested, func(fs *flowcontrolv1.FlowSchema) {
		fs.Spec.MatchingPrecedence = 9001
		fs.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = "false"
	})
	dangling := bootstrap.SuggestedFlowSchemaProbes.DeepCopy()
	dangling.Name, dangling.ResourceVersion = "retired-by-upstream", ""
	dangling.Annotations = map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}
	if _, err := b.Store.Create(ctx, fsRes, dangling); err != nil {
		t.Fatal(err)
	}
	if err := e.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getFS(mandatory).Spec.MatchingPrecedence; got != bootstrap.MandatoryFlowSchemaCatchAll.Spec.MatchingPrecedence {
		t.Errorf("mandatory %s kept the changed precedence %d", mandatory, got)
	}
	if got := getFS(suggested).Spec.MatchingPrecedence; got != 9001 {
		t.Errorf("suggested %s with autoupdate-spec=false was reverted to precedence %d", suggested, got)
	}
	if _, err := b.Store.Get(ctx, fsRes, "", dangling.Name, 0); err == nil {
		t.Errorf("flowschema %s, annotated for auto update and not defined upstream, was not deleted", dangling.Name)
	}
}
