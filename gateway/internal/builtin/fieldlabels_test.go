package builtin

import (
	"slices"
	"testing"

	"github.com/kgate/kgate/storage/registry"
)

// The field selectors the registry accepts for a built-in resource are
// exactly those upstream's field label conversions (installed with the
// API groups) accept, among every label any resource takes: a label
// upstream takes that the registry lacks is a 400 for clients that
// work against kube-apiserver (kube-controller-manager's
// ClusterTrustBundle informer selects on spec.signerName).
func TestFieldSelectorsAsUpstream(t *testing.T) {
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	labels := []string{"metadata.name", "spec.podName", "spec.claimName", "spec.signerName"}
	for _, r := range registry.Builtin() {
		for _, f := range r.FieldSelectors {
			if !slices.Contains(labels, f) {
				labels = append(labels, f)
			}
		}
		for l := range r.FieldLabels {
			if !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
	}
	checked := 0
	for _, r := range registry.Builtin() {
		gvk := r.GVK()
		if !scheme.Recognizes(gvk) {
			continue
		}
		checked++
		for _, l := range labels {
			upField, _, err := scheme.ConvertFieldLabel(gvk, l, "x")
			field, ours := r.ConvertFieldLabel(l)
			if upstream := err == nil; upstream != ours {
				t.Errorf("%s field selector %q: upstream accepts it %v, kgate %v", gvk, l, upstream, ours)
			} else if ours && field != upField {
				t.Errorf("%s field selector %q selects on %q, upstream on %q", gvk, l, field, upField)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d built-in kinds are in the upstream scheme", checked)
	}
}
