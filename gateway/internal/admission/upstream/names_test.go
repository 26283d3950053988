package upstream

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

func TestResolve(t *testing.T) {
	defaults := []string{
		"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition", "PodSecurity", "Priority",
		"DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection", "PodGroupProtection",
		"PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning",
		"ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass", "PodTopologyLabels",
		"NodeDeclaredFeatureValidator", "PodResizeValidator", "MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
		"ValidatingAdmissionWebhook", "ResourceQuota",
	}
	with := func(after, name string) []string {
		i := slices.Index(defaults, after)
		return slices.Insert(slices.Clone(defaults), i+1, name)
	}
	without := func(name string) []string {
		return slices.DeleteFunc(slices.Clone(defaults), func(n string) bool { return n == name })
	}
	cases := []struct {
		name            string
		enable, disable []string
		want            []string
		wantErr         string
	}{
		{name: "defaults", want: defaults},
		{name: "enable NodeRestriction: in upstream's place", enable: []string{"NodeRestriction"}, want: with("ServiceAccount", "NodeRestriction")},
		{name: "enable a default one", enable: []string{"Priority"}, want: defaults},
		{name: "disable", disable: []string{"PodSecurity"}, want: without("PodSecurity")},
		{name: "disable an off one", disable: []string{"AlwaysPullImages"}, want: defaults},
		{name: "unknown", enable: []string{"Bogus"}, wantErr: `"Bogus" is not a known admission plugin`},
		{name: "unknown disabled", disable: []string{"Bogus"}, wantErr: `"Bogus" is not a known admission plugin`},
		{name: "overlap", enable: []string{"NodeRestriction"}, disable: []string{"NodeRestriction"},
			wantErr: "NodeRestriction in enable-admission-plugins and disable-admission-plugins overlapped"},
		{name: "not run by kgate", enable: []string{"AlwaysPullImages"}, wantErr: `kgate does not run admission plugin "AlwaysPullImages"`},
		{name: "disable MutatingAdmissionPolicy", disable: []string{"MutatingAdmissionPolicy"}, want: without("MutatingAdmissionPolicy")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Resolve(c.enable, c.disable)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("plugins\n%v\nwant\n%v", got, c.want)
			}
		})
	}
	if !slices.Equal(Defaults(), defaults) {
		t.Fatalf("Defaults %v", Defaults())
	}
}

// TestEverySupportedPluginInitializes builds every upstream plugin kgate
// runs at once, as `--enable-admission-plugins=NodeRestriction` does:
// each is registered under the name of the table, passes its
// ValidateInitialization, and asks only for informers of served
// resources.
func TestEverySupportedPluginInitializes(t *testing.T) {
	var names []string
	for _, p := range ordered() {
		if p.supported && !p.own {
			names = append(names, p.name)
		}
	}
	e := newEnv(t)
	p := e.plugins(names...)
	var got []schema.GroupVersionResource
	for gvr := range p.Sinks() {
		got = append(got, gvr)
	}
	if len(got) == 0 {
		t.Fatal("no plugin asked for an informer")
	}
	for _, gvr := range got {
		if _, ok := e.byGVR[gvr]; !ok {
			t.Errorf("informer of %s, not a served resource", gvr)
		}
	}
	if _, err := New(Config{Names: []string{"NamespaceLifecycle"}, Scheme: e.scheme, Kinds: e.kinds, Objects: e, Authorizer: e,
		Features: nil, Version: "1.37"}); err == nil {
		t.Error("New without feature gates succeeded")
	}
	if _, err := New(Config{Names: []string{"NamespaceLifecycle"}, Scheme: e.scheme, Kinds: e.kinds, Objects: e, Authorizer: e,
		Features: utilfeature.DefaultFeatureGate, Version: "1.37"}); err == nil {
		t.Error("New with kgate's own plugin succeeded")
	}
}
