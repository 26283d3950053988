package discovery

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/storage/registry"
)

// subresourceInfo is what discovery says about one kind of subresource.
type subresourceInfo struct {
	group, version string // empty: the parent's group/version
	kind           string // empty: the parent's kind
	verbs          []string
}

// subresource returns the discovery entry kube-apiserver publishes for the
// subresource sub of a resource of kind parentKind. ok is false for a
// subresource discovery does not know, so that a registry entry discovery
// cannot describe fails construction instead of being served wrong.
func subresource(sub, parentKind string) (subresourceInfo, bool) {
	getPatchUpdate := []string{"get", "patch", "update"}
	switch sub {
	case "status", "ephemeralcontainers", "resize", "approval":
		return subresourceInfo{verbs: getPatchUpdate}, true
	case "scale":
		return subresourceInfo{group: "autoscaling", version: "v1", kind: "Scale", verbs: getPatchUpdate}, true
	case "binding":
		return subresourceInfo{kind: "Binding", verbs: []string{"create"}}, true
	case "finalize":
		return subresourceInfo{verbs: []string{"update"}}, true
	case "eviction":
		return subresourceInfo{group: "policy", version: "v1", kind: "Eviction", verbs: []string{"create"}}, true
	case "token":
		return subresourceInfo{group: "authentication.k8s.io", version: "v1", kind: "TokenRequest", verbs: []string{"create"}}, true
	case "log":
		return subresourceInfo{kind: "Pod", verbs: []string{"get"}}, true
	case "exec":
		return subresourceInfo{kind: "PodExecOptions", verbs: []string{"create", "get"}}, true
	case "attach":
		return subresourceInfo{kind: "PodAttachOptions", verbs: []string{"create", "get"}}, true
	case "portforward":
		return subresourceInfo{kind: "PodPortForwardOptions", verbs: []string{"create", "get"}}, true
	case "proxy":
		return subresourceInfo{kind: parentKind + "ProxyOptions", verbs: []string{"create", "delete", "get", "patch", "update"}}, true
	}
	return subresourceInfo{}, false
}

// apiResources returns the APIResourceList entries of one group/version,
// sorted by name as kube-apiserver's installer does ("pods" before
// "pods/binding" before "pods/status").
func apiResources(reg *registry.Snapshot, group, version string) ([]metav1.APIResource, error) {
	var out []metav1.APIResource
	for _, res := range reg.GroupVersionResources(group, version) {
		verbs := slices.Clone(res.SupportedVerbs())
		sort.Strings(verbs)
		storage := res.StorageGVK()
		hash := storageVersionHash(storage.Group, storage.Version, storage.Kind)
		if res.CreateOnly() {
			hash = "" // nothing stored (bindings, the review APIs), as upstream
		}
		out = append(out, metav1.APIResource{
			Name:               res.Resource,
			SingularName:       res.Singular,
			Namespaced:         res.Namespaced,
			Kind:               res.Kind,
			Verbs:              verbs,
			ShortNames:         slices.Clone(res.ShortNames),
			Categories:         slices.Clone(res.Categories),
			StorageVersionHash: hash,
		})
		for _, sub := range res.Subresources {
			info, ok := subresource(sub, res.Kind)
			if !ok {
				return nil, fmt.Errorf("cannot describe %s/%s of %v: unknown subresource", res.Resource, sub, res.GVR().GroupVersion())
			}
			kind := info.kind
			if kind == "" {
				kind = res.Kind
			}
			out = append(out, metav1.APIResource{
				Name:       res.Resource + "/" + sub,
				Namespaced: res.Namespaced,
				Group:      info.group,
				Version:    info.version,
				Kind:       kind,
				Verbs:      slices.Clone(info.verbs),
			})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// aggregatedResources folds an APIResourceList into the aggregated form,
// subresources nested under their parent, the way kube-apiserver's
// ConvertGroupVersionIntoToDiscovery does: responseKind carries the
// APIResource's own group and version, empty for a resource of the
// group/version being described.
func aggregatedResources(list []metav1.APIResource) []apidiscoveryv2.APIResourceDiscovery {
	var out []apidiscoveryv2.APIResourceDiscovery
	parent := map[string]int{}
	scope := func(r metav1.APIResource) apidiscoveryv2.ResourceScope {
		if r.Namespaced {
			return apidiscoveryv2.ScopeNamespace
		}
		return apidiscoveryv2.ScopeCluster
	}
	for _, r := range list {
		if _, _, isSub := cut(r.Name); isSub {
			continue
		}
		parent[r.Name] = len(out)
		out = append(out, apidiscoveryv2.APIResourceDiscovery{
			Resource:         r.Name,
			ResponseKind:     &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
			Scope:            scope(r),
			SingularResource: r.SingularName,
			Verbs:            r.Verbs,
			ShortNames:       r.ShortNames,
			Categories:       r.Categories,
		})
	}
	for _, r := range list {
		name, sub, isSub := cut(r.Name)
		if !isSub {
			continue
		}
		i, ok := parent[name]
		if !ok {
			// A list without the parent (an extension server's may be
			// so): a stub parent, as upstream's conversion adds.
			i = len(out)
			parent[name] = i
			out = append(out, apidiscoveryv2.APIResourceDiscovery{Resource: name, Scope: scope(r), ResponseKind: &metav1.GroupVersionKind{}})
		}
		out[i].Subresources = append(out[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  sub,
			ResponseKind: &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
			Verbs:        r.Verbs,
		})
	}
	return out
}

func cut(name string) (resource, sub string, isSub bool) {
	return strings.Cut(name, "/")
}

// storageVersionHash is kube-apiserver's hash of the kind a resource is
// stored as: the first 8 bytes of SHA-256("group/version/kind"), base64.
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}
