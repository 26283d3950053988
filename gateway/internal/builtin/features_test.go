package builtin

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/version"
	"k8s.io/kubernetes/pkg/features"
)

// TestFeatureGatesAtUpstreamDefaults: the strategies read the process-wide
// utilfeature.DefaultFeatureGate. Linking k8s.io/kubernetes/pkg/features
// (the strategies import it) registers every Kubernetes feature in it at
// the default of the version kgate is built with, and nothing here or in
// the gateway sets one: every gate must be at its default, the emulated
// version the binary's own (1.37 with k8s.io/kubernetes v1.37.x).
func TestFeatureGatesAtUpstreamDefaults(t *testing.T) {
	if _, err := New(nil); err != nil {
		t.Fatal(err)
	}
	gate := utilfeature.DefaultMutableFeatureGate
	if got, want := gate.EmulationVersion().String(), version.DefaultKubeBinaryVersion; got != want+".0" && got != want {
		t.Errorf("emulated version %s, want %s", got, want)
	}
	all := gate.GetAll()
	for _, f := range []featuregate.Feature{features.JobManagedBy, features.PodObservedGenerationTracking, features.InPlacePodVerticalScaling} {
		if _, ok := all[f]; !ok {
			t.Errorf("feature %s is not registered: k8s.io/kubernetes/pkg/features is not linked", f)
		}
	}
	for f, spec := range all {
		if got := gate.Enabled(f); got != spec.Default {
			t.Errorf("feature %s enabled = %v, want its default %v", f, got, spec.Default)
		}
	}
	t.Logf("%d feature gates at the defaults of Kubernetes %s", len(all), gate.EmulationVersion())
}
