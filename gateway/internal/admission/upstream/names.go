package upstream

import (
	"fmt"
	"slices"
	"strings"
)

// The admission plugins kgate implements itself, by upstream's names.
const (
	NamespaceLifecycle         = "NamespaceLifecycle"
	LimitRanger                = "LimitRanger"
	MutatingAdmissionPolicy    = "MutatingAdmissionPolicy"
	MutatingAdmissionWebhook   = "MutatingAdmissionWebhook"
	ValidatingAdmissionPolicy  = "ValidatingAdmissionPolicy"
	ValidatingAdmissionWebhook = "ValidatingAdmissionWebhook"
	ResourceQuota              = "ResourceQuota"
)

// plugin is one name of kube-apiserver's AllOrderedPlugins: whether kgate
// runs it (own: with a plugin of its own; else upstream's package through
// Plugins) and whether kube-apiserver enables it by default.
type plugin struct {
	name      string
	own       bool
	supported bool
	defaultOn bool
}

// ordered is kube-apiserver 1.37's AllOrderedPlugins with its
// DefaultOffAdmissionPlugins (k8s.io/kubernetes/pkg/kubeapiserver/options;
// a test compares both with upstream's). A name kgate does not run is
// refused by Resolve.
func ordered() []plugin {
	return []plugin{
		{name: "AlwaysAdmit"},
		{name: "NamespaceAutoProvision"},
		{name: NamespaceLifecycle, own: true, supported: true, defaultOn: true},
		{name: "NamespaceExists"},
		{name: "LimitPodHardAntiAffinityTopology"},
		{name: LimitRanger, own: true, supported: true, defaultOn: true},
		{name: "ServiceAccount", supported: true, defaultOn: true},
		{name: "NodeRestriction", supported: true},
		{name: "TaintNodesByCondition", supported: true, defaultOn: true},
		{name: "AlwaysPullImages"},
		{name: "ImagePolicyWebhook"},
		{name: "PodSecurity", supported: true, defaultOn: true},
		{name: "PodNodeSelector"},
		{name: "Priority", supported: true, defaultOn: true},
		{name: "DefaultTolerationSeconds", supported: true, defaultOn: true},
		{name: "PodTolerationRestriction"},
		{name: "EventRateLimit"},
		{name: "ExtendedResourceToleration"},
		{name: "DefaultStorageClass", supported: true, defaultOn: true},
		{name: "StorageObjectInUseProtection", supported: true, defaultOn: true},
		{name: "PodGroupProtection", supported: true, defaultOn: true},
		{name: "OwnerReferencesPermissionEnforcement"},
		{name: "PersistentVolumeClaimResize", supported: true, defaultOn: true},
		{name: "RuntimeClass", supported: true, defaultOn: true},
		{name: "CertificateApproval", supported: true, defaultOn: true},
		{name: "CertificateSigning", supported: true, defaultOn: true},
		{name: "ClusterTrustBundleAttest", supported: true, defaultOn: true},
		{name: "CertificateSubjectRestriction", supported: true, defaultOn: true},
		{name: "DefaultIngressClass", supported: true, defaultOn: true},
		{name: "DenyServiceExternalIPs"},
		{name: "PodTopologyLabels", supported: true, defaultOn: true},
		{name: "NodeDeclaredFeatureValidator", supported: true, defaultOn: true},
		{name: "PodResizeValidator", supported: true, defaultOn: true},
		{name: MutatingAdmissionPolicy, own: true, supported: true, defaultOn: true},
		{name: MutatingAdmissionWebhook, own: true, supported: true, defaultOn: true},
		{name: ValidatingAdmissionPolicy, own: true, supported: true, defaultOn: true},
		{name: ValidatingAdmissionWebhook, own: true, supported: true, defaultOn: true},
		{name: ResourceQuota, own: true, supported: true, defaultOn: true},
		{name: "AlwaysDeny"},
	}
}

// IsOwn reports whether kgate runs the plugin name with its own code
// rather than upstream's package.
func IsOwn(name string) bool {
	for _, p := range ordered() {
		if p.name == name {
			return p.own
		}
	}
	return false
}

// Resolve returns the plugins to run, in kube-apiserver's order: its
// default set (less what kgate does not run) plus enable, less disable,
// as --enable-admission-plugins and --disable-admission-plugins do. A
// name that kube-apiserver does not know, a name in both lists, or a
// name kgate does not run in enable is an error.
func Resolve(enable, disable []string) ([]string, error) {
	all := ordered()
	known := func(name string) (plugin, bool) {
		i := slices.IndexFunc(all, func(p plugin) bool { return p.name == name })
		if i < 0 {
			return plugin{}, false
		}
		return all[i], true
	}
	for _, list := range [][]string{enable, disable} {
		for _, name := range list {
			if _, ok := known(name); !ok {
				return nil, fmt.Errorf("cannot resolve admission plugins: %q is not a known admission plugin", name)
			}
		}
	}
	var both []string
	for _, name := range enable {
		if slices.Contains(disable, name) {
			both = append(both, name)
		}
		if p, _ := known(name); !p.supported {
			return nil, fmt.Errorf("cannot resolve admission plugins: kgate does not run admission plugin %q", name)
		}
	}
	if len(both) > 0 {
		return nil, fmt.Errorf("cannot resolve admission plugins: %s in enable-admission-plugins and disable-admission-plugins overlapped", strings.Join(both, ","))
	}
	var out []string
	for _, p := range all {
		on := (p.defaultOn && p.supported) || slices.Contains(enable, p.name)
		if on && !slices.Contains(disable, p.name) {
			out = append(out, p.name)
		}
	}
	return out, nil
}

// Defaults returns the plugins kgate runs by default, in order.
func Defaults() []string {
	out, _ := Resolve(nil, nil) // nothing to refuse in no lists
	return out
}
