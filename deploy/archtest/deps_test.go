package archtest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// A depRule forbids the module's packages under from (relative to the
// module root, "storage/..." for a folder and everything below it, "..."
// for every package) to depend, directly or transitively, on a package
// matched by to. A package outside the module listed in allowedImporters
// may import to (the dependency then reaches kgate through that upstream
// package, which kgate is allowed to use); kgate's own packages never may.
// A chain that passes through a package under one of allowedVia (import
// path prefixes of upstream packages kgate is mandated to use) is not
// followed further: what that package needs is upstream's business, as
// long as no kgate package and no other path leads to to.
type depRule struct {
	from             string
	to               string // an import path, or a module-relative "dir/..." for kgate's own
	allowedImporters []string
	allowedVia       []string
	why              string
}

var depRules = []depRule{
	{from: "storage/...", to: "cachenode/...",
		why: "storage is the bottom layer: cache nodes read it, it knows nothing of them"},
	{from: "storage/...", to: "gateway/...",
		why: "storage is the bottom layer: gateways write through it, it knows nothing of them"},
	{from: "cachenode/...", to: "gateway/...",
		why: "gateways consume what cache nodes own (cachenode/event, cachenode/client), never the other way round"},
	{from: "...", to: "k8s.io/apiserver/pkg/server", allowedVia: []string{sampleAPIServer},
		why: "kgate is not a GenericAPIServer: its request path is its own (fasthttp, gateway/)"},
	{from: "...", to: "github.com/emicklei/go-restful/v3",
		// client-go's discovery client imports k8s.io/client-go/openapi,
		// which imports k8s.io/kube-openapi/pkg/handler3 for its types,
		// which imports k8s.io/kube-openapi/pkg/common, whose OpenAPI
		// builder interfaces mention go-restful. Nothing in kgate calls it:
		// the dependency is linked, not used, and goes when client-go drops it.
		// gateway/internal/openapi/defs builds its definitions as
		// kube-apiserver does, with kube-openapi's builders and
		// apiserver's DefinitionNamer; their route-building entry
		// points take go-restful types, which defs never calls.
		allowedImporters: []string{"k8s.io/kube-openapi/pkg/common", "k8s.io/kube-openapi/pkg/builder",
			"k8s.io/kube-openapi/pkg/builder3", "k8s.io/kube-openapi/pkg/common/restfuladapter", "k8s.io/apiserver/pkg/endpoints/openapi"},
		// Issue 11 mandates k8s.io/kubernetes's strategies and
		// validation (gateway/internal/builtin). Through them go-restful
		// is linked, never served: pkg/apis/admissionregistration/validation
		// → apiserver's admission/plugin/policy/validating → admission/
		// initializer → cel/openapi/resolver → endpoints/openapi (OpenAPI
		// type names), and pkg/registry/<group>/<resource> →
		// apiserver's registry/generic → storage/storagebackend →
		// storage/etcd3 → util/flowcontrol → server/httplog →
		// endpoints/metrics (metric labels). gateway/internal/rest uses
		// apiserver's endpoints/handlers/fieldmanager for upstream's
		// IgnoreManagedFieldsTimestampsTransformer; that package imports
		// endpoints/metrics (metric labels) too, and serves nothing.
		// apiextensions-apiserver's CRD strategy and status strategy
		// (and its custom resource strategy, gateway/internal/customresource)
		// (gateway/internal/builtin) live in the package of its CRD REST,
		// which builds on the generic registry Store: linked, never run.
		// storage/encryption loads --encryption-provider-config with
		// upstream's encryptionconfig, whose KMS health checks are
		// server/healthz checkers; healthz imports endpoints/metrics
		// (metric labels). kgate never serves those checkers.
		// gateway/internal/apf runs upstream's API Priority and Fairness
		// (util/flowcontrol); its metrics package takes request labels
		// from endpoints/metrics: linked, never served.
		allowedVia: []string{"k8s.io/kubernetes/pkg/", "k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager", "k8s.io/apiserver/pkg/server/options/encryptionconfig", "k8s.io/apiserver/pkg/util/flowcontrol", crdRegistry, crRegistry, crdOpenAPI, openAPIHandler, apiServiceRegistry, sampleAPIServer},
		why:        "kgate serves its routes with fasthttp and its OpenAPI from pre-rendered documents, not go-restful"},
	{from: "...", to: "k8s.io/apiserver/pkg/storage/cacher", allowedVia: []string{crdRegistry, crRegistry, sampleAPIServer},
		why: "the watch cache is kgate's cache nodes, not kube-apiserver's cacher"},
	{from: "...", to: "k8s.io/apiserver/pkg/registry/generic/registry", allowedVia: []string{crdRegistry, crRegistry, sampleAPIServer},
		why: "writes go through storage.Store, not the generic registry Store"},
	// The sample extension server is a GenericAPIServer of the tests,
	// never part of kgate.
	{from: "gateway/...", to: "deploy/sampleext/...", why: sampleWhy},
	{from: "cachenode/...", to: "deploy/sampleext/...", why: sampleWhy},
	{from: "storage/...", to: "deploy/sampleext/...", why: sampleWhy},
	{from: "cmd/kgate", to: "deploy/sampleext/...", why: sampleWhy},
}

// sampleAPIServer is Kubernetes' sample extension API server, which
// deploy/sampleext runs as the extension server of the aggregation
// end-to-end test: a GenericAPIServer of its own, beside kgate.
const sampleAPIServer = "k8s.io/sample-apiserver/"

const sampleWhy = "deploy/sampleext runs a GenericAPIServer for the end-to-end tests; kgate's binary and packages never link it"

// crdRegistry is the package of apiextensions-apiserver's CRD strategies
// (issue 12 mandates them) and of its CRD REST over the generic registry
// Store, which kgate links through it and never calls.
const crdRegistry = "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"

// apiServiceRegistry is the package of kube-aggregator's APIService
// strategies (issue 16 mandates them); its SelectionPredicate helpers
// link k8s.io/apiserver's generic registry package, which reaches the
// endpoint metrics and go-restful: linked, never run.
const apiServiceRegistry = "k8s.io/kube-aggregator/pkg/registry/apiservice"

// crdOpenAPI is apiextensions-apiserver's OpenAPI builder (issue 12 asks
// for it; gateway/internal/openapi describes custom resources with it),
// which lays out a CRD's routes as go-restful WebServices to document
// them: described, never served.
const crdOpenAPI = "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"

// openAPIHandler is kube-openapi's handler package, whose PruneDefaults
// (a pure function over definitions) gateway/internal/openapi applies to
// custom resources' v2 definitions as kube-apiserver does; its go-restful
// serving code is linked, never run.
const openAPIHandler = "k8s.io/kube-openapi/pkg/handler"

// crRegistry is the package of apiextensions-apiserver's custom resource
// strategy (NewStrategy, NewStatusStrategy; gateway/internal/customresource
// calls it, as issue 12 asks), which also holds the custom resources'
// generic-registry storage: linked, never constructed.
const crRegistry = "k8s.io/apiextensions-apiserver/pkg/registry/customresource"

// TestDependencies checks depRules on the packages of the module and
// their tests (`go list -deps -test`), as tailscale's tstest/deptest does,
// and prints the import chain of each violation.
func TestDependencies(t *testing.T) {
	m, pkgs := load(t)
	imports := make(map[string][]string) // import path (variant suffix dropped) → its imports
	inModule := make(map[string]bool)
	for _, p := range pkgs {
		ip := plain(p.ImportPath)
		if strings.HasSuffix(ip, ".test") {
			continue // the generated test main imports only the package and its tests
		}
		for _, imp := range p.Imports {
			imports[ip] = append(imports[ip], plain(imp))
		}
		if p.ours(m) {
			inModule[ip] = true
		}
	}
	var roots []string
	for ip := range inModule {
		roots = append(roots, ip)
	}
	sort.Strings(roots)
	for _, r := range depRules {
		allowed := make(map[string]bool)
		for _, a := range r.allowedImporters {
			allowed[a] = true
		}
		matches := func(ip string) bool { return matchPattern(m.Path, r.to, ip) }
		// One report per culprit: the last package of the module on the
		// chain, where the import has to go; the roots that reach the
		// forbidden package through it are listed with it.
		chains := make(map[string][]string)
		dependents := make(map[string][]string)
		for _, root := range roots {
			if !matchPattern(m.Path, r.from, root) {
				continue
			}
			chain := forbiddenChain(root, imports, matches, func(importer string) bool {
				return allowed[importer] && !inModule[importer]
			}, func(ip string) bool {
				return !inModule[ip] && underAny(ip, r.allowedVia)
			})
			if chain == nil {
				continue
			}
			at := 0
			for i, ip := range chain[:len(chain)-1] {
				if inModule[ip] {
					at = i
				}
			}
			culprit := chain[at]
			if c, ok := chains[culprit]; !ok || len(chain)-at < len(c) {
				chains[culprit] = chain[at:]
			}
			if root != culprit {
				dependents[culprit] = append(dependents[culprit], rel(m.Path, root))
			}
		}
		var culprits []string
		for c := range chains {
			culprits = append(culprits, c)
		}
		sort.Strings(culprits)
		for _, c := range culprits {
			msg := fmt.Sprintf("%s must not depend on %s (%s); import chain:\n\t%s",
				rel(m.Path, c), r.to, r.why, strings.Join(chains[c], "\n\t→ "))
			if d := dependents[c]; len(d) > 0 {
				msg += fmt.Sprintf("\n\t(also reached through it by %s)", strings.Join(d, ", "))
			}
			t.Error(msg)
		}
	}
}

// plain drops the test-variant suffix of an import path: "a [a.test]" → "a".
func plain(ip string) string {
	ip, _, _ = strings.Cut(ip, " ")
	return ip
}

func rel(modPath, ip string) string {
	if ip == modPath {
		return "."
	}
	return strings.TrimPrefix(ip, modPath+"/")
}

// matchPattern reports whether the import path ip matches pattern: "..."
// (every package of the module), "dir/..." (dir of the module and below
// it), a module-relative path, or a full import path.
func matchPattern(modPath, pattern, ip string) bool {
	if pattern == "..." {
		return ip == modPath || strings.HasPrefix(ip, modPath+"/")
	}
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		full := modPath + "/" + dir
		return ip == full || strings.HasPrefix(ip, full+"/")
	}
	return ip == pattern || ip == modPath+"/"+pattern
}

// underAny reports whether ip is under one of the import path prefixes.
func underAny(ip string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(ip, p) {
			return true
		}
	}
	return false
}

// forbiddenChain returns the shortest import chain from root to a package
// that imports a forbidden one, unless that importer is allowed to (and
// then the search goes on through others); nil if there is none. The
// imports of a package for which via is true are not followed: the
// dependency may reach kgate through it.
func forbiddenChain(root string, imports map[string][]string, forbidden, allowedImporter, via func(string) bool) []string {
	parent := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		ip := queue[0]
		queue = queue[1:]
		for _, imp := range imports[ip] {
			if forbidden(imp) && !allowedImporter(ip) {
				chain := []string{imp}
				for at := ip; at != ""; at = parent[at] {
					chain = append([]string{at}, chain...)
				}
				return chain
			}
			if _, seen := parent[imp]; !seen && !forbidden(imp) && !via(imp) {
				parent[imp] = ip
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

func TestForbiddenChain(t *testing.T) {
	imports := map[string][]string{
		"k/gateway":    {"k/storage", "up/client"},
		"up/client":    {"up/openapi"},
		"up/openapi":   {"restful"},
		"k/cachenode":  {"up/client", "k/helper"},
		"k/helper":     {"restful"},
		"k/storage":    {"up/etcd"},
		"restful":      {"restful/log"},
		"k/standalone": {},
		// k/builtin uses the mandated upstream packages (kube/...), which
		// reach restful on their own; k/mixed also reaches it past them.
		"k/builtin":       {"kube/strategy"},
		"kube/strategy":   {"kube/validation", "up/generic"},
		"kube/validation": {"up/endpoints"},
		"up/endpoints":    {"restful"},
		"up/generic":      {"up/endpoints"},
		"k/mixed":         {"kube/strategy", "up/generic"},
	}
	isRestful := func(ip string) bool { return ip == "restful" }
	viaOpenAPI := func(ip string) bool { return ip == "up/openapi" }
	viaKube := func(ip string) bool { return strings.HasPrefix(ip, "kube/") }
	tests := []struct {
		root string
		want []string
	}{
		{"k/gateway", nil}, // only through the allowed upstream importer
		{"k/cachenode", []string{"k/cachenode", "k/helper", "restful"}},
		{"k/standalone", nil},
		{"k/helper", []string{"k/helper", "restful"}},
		{"k/builtin", nil}, // only through the mandated upstream packages
		{"k/mixed", []string{"k/mixed", "up/generic", "up/endpoints", "restful"}},
	}
	for _, tt := range tests {
		got := forbiddenChain(tt.root, imports, isRestful, viaOpenAPI, viaKube)
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("forbiddenChain(%s) = %q, want %q", tt.root, got, tt.want)
		}
	}
}
