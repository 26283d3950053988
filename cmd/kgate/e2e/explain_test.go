package e2e

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generated "k8s.io/kubernetes/pkg/generated/openapi"
)

// upstreamDefs are kube-apiserver's generated OpenAPI definitions, by
// name: what kubectl explain must print from.
func upstreamDefs() map[string]common.OpenAPIDefinition {
	return generated.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef("#/components/schemas/" + name)
	})
}

// words normalizes text for comparison: kubectl explain wraps
// descriptions at its terminal width.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// fieldLines returns the "name\t<type>[ -required-]" lines of an explain
// output at the indentation indent, by field name.
func fieldLines(out string, indent int) map[string]string {
	re := regexp.MustCompile(`^ {` + strconv.Itoa(indent) + `}([A-Za-z0-9$]+)\t(<[^>]*>)(.*)$`)
	got := map[string]string{}
	for l := range strings.SplitSeq(out, "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			got[m[1]] = m[2] + m[3]
		}
	}
	return got
}

// testExplain: kubectl explain prints, from the served OpenAPI v3, the
// descriptions, fields and required markers of kube-apiserver's
// definitions.
func testExplain(t *testing.T, e *env) {
	defs := upstreamDefs()
	t.Run("pod.spec.containers.resources", func(t *testing.T) {
		out := e.k.ok(t, "explain", "pod.spec.containers.resources")
		container := defs["io.k8s.api.core.v1.Container"].Schema
		res := defs["io.k8s.api.core.v1.ResourceRequirements"].Schema
		for _, want := range []string{"KIND:       Pod\n", "VERSION:    v1\n", "FIELD: resources <ResourceRequirements>\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("lacks %q:\n%s", want, out)
			}
		}
		if desc := words(container.Properties["resources"].Description); desc == "" || !strings.Contains(words(out), desc) {
			t.Errorf("lacks upstream's description of Container.resources %q:\n%s", desc, out)
		}
		got := fieldLines(out, 2)
		for name, p := range res.Properties {
			if _, ok := got[name]; !ok {
				t.Errorf("lacks field %s of ResourceRequirements:\n%s", name, out)
			}
			if d := words(p.Description); !strings.Contains(words(out), d) {
				t.Errorf("lacks the description of %s: %q", name, d)
			}
		}
		if len(got) != len(res.Properties) {
			t.Errorf("fields %v, upstream has %d", got, len(res.Properties))
		}
	})
	t.Run("pod.spec.containers required", func(t *testing.T) {
		out := e.k.ok(t, "explain", "pod.spec.containers")
		container := defs["io.k8s.api.core.v1.Container"].Schema
		got := fieldLines(out, 2)
		if len(got) != len(container.Properties) {
			t.Errorf("%d fields, upstream's Container has %d:\n%s", len(got), len(container.Properties), out)
		}
		for name := range container.Properties {
			line, ok := got[name]
			if !ok {
				t.Errorf("lacks field %s", name)
				continue
			}
			if req := slices.Contains(container.Required, name); req != strings.HasSuffix(line, "-required-") {
				t.Errorf("field %s: %q, upstream required: %v", name, line, req)
			}
		}
		if !strings.HasSuffix(got["name"], "-required-") {
			t.Errorf("containers.name not marked required: %q", got["name"])
		}
	})
	t.Run("pod.spec.restartPolicy enum", func(t *testing.T) {
		out := e.k.ok(t, "explain", "pod.spec.restartPolicy")
		enum := defs["io.k8s.api.core.v1.PodSpec"].Schema.Properties["restartPolicy"].Enum
		if len(enum) == 0 {
			t.Fatal("upstream PodSpec.restartPolicy has no enum")
		}
		if !strings.Contains(out, "ENUM:") {
			t.Errorf("no ENUM section:\n%s", out)
		}
		for _, v := range enum {
			if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(v.(string)) + `\s*$`).MatchString(out) {
				t.Errorf("enum value %v not listed:\n%s", v, out)
			}
		}
	})
	t.Run("deployment.spec --recursive", func(t *testing.T) {
		out := e.k.ok(t, "explain", "deployment.spec", "--recursive")
		ds := defs["io.k8s.api.apps.v1.DeploymentSpec"].Schema
		if d := words(defs["io.k8s.api.apps.v1.Deployment"].Schema.Properties["spec"].Description); !strings.Contains(words(out), d) {
			t.Errorf("lacks upstream's description of Deployment.spec %q", d)
		}
		top := fieldLines(out, 2)
		var want, have []string
		for name := range ds.Properties {
			want = append(want, name)
		}
		for name := range top {
			have = append(have, name)
		}
		sort.Strings(want)
		sort.Strings(have)
		if !slices.Equal(have, want) {
			t.Errorf("top-level fields %v, upstream's DeploymentSpec has %v", have, want)
		}
		for _, name := range ds.Required {
			if !strings.HasSuffix(top[name], "-required-") {
				t.Errorf("required field %s not marked: %q", name, top[name])
			}
		}
		// One level down: the strategy's fields.
		strategy := defs["io.k8s.api.apps.v1.DeploymentStrategy"].Schema
		nested := fieldLines(out, 4)
		for name := range strategy.Properties {
			if _, ok := nested[name]; !ok {
				t.Errorf("lacks strategy.%s", name)
			}
		}
	})
	t.Run("openapi v3 caching", func(t *testing.T) { testOpenAPICaching(t, e) })
}

// testOpenAPICaching fetches a group/version document the way client-go
// does: from the index's hashed URL, then again with If-None-Match.
func testOpenAPICaching(t *testing.T, e *env) {
	cfg, err := clientcmd.BuildConfigFromFlags("", e.srv.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// See the redirects themselves.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(path string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, cfg.Host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	resp, body := get("/openapi/v3")
	if resp.StatusCode != 200 || resp.Header.Get("Etag") == "" {
		t.Fatalf("GET /openapi/v3: %d, Etag %q", resp.StatusCode, resp.Header.Get("Etag"))
	}
	m := regexp.MustCompile(`"(/openapi/v3/apis/apps/v1\?hash=([0-9A-F]+))"`).FindStringSubmatch(string(body))
	if m == nil {
		t.Fatalf("index lacks apps/v1 with a hash: %.300s", body)
	}
	url, hash := m[1], m[2]
	resp, _ = get(url, "Accept", "application/json")
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	etag := resp.Header.Get("Etag")
	for k, want := range map[string]string{"Etag": `"` + hash + `"`, "Cache-Control": "public, immutable", "Vary": "Accept"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("GET %s: %s %q, want %q", url, k, got, want)
		}
	}
	if _, err := http.ParseTime(resp.Header.Get("Expires")); err != nil {
		t.Errorf("GET %s: Expires %q: %v", url, resp.Header.Get("Expires"), err)
	}
	if resp, body := get(url, "Accept", "application/json", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("GET %s with If-None-Match: %d, %d bytes; want 304, none", url, resp.StatusCode, len(body))
	}
	if resp, _ := get("/openapi/v3/apis/apps/v1?hash=STALE"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != url {
		t.Errorf("stale hash: %d to %q, want 301 to %q", resp.StatusCode, resp.Header.Get("Location"), url)
	}
	// Without a hash: an ETag, not immutable.
	if resp, _ := get("/openapi/v3/apis/apps/v1"); resp.Header.Get("Etag") != etag || resp.Header.Get("Cache-Control") == "public, immutable" {
		t.Errorf("GET without hash: Etag %q, Cache-Control %q", resp.Header.Get("Etag"), resp.Header.Get("Cache-Control"))
	}
}
