package e2e

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
)

func testDiscovery(t *testing.T, e *env) {
	var versions []string
	t.Run("api-versions", func(t *testing.T) {
		versions = strings.Split(strings.TrimSuffix(e.k.ok(t, "api-versions"), "\n"), "\n")
		for _, v := range []string{"v1", "apps/v1", "batch/v1", "rbac.authorization.k8s.io/v1"} {
			if !slices.Contains(versions, v) {
				t.Errorf("api-versions lacks %s: %q", v, versions)
			}
		}
		if !slices.IsSorted(versions) || len(slices.Compact(slices.Clone(versions))) != len(versions) {
			t.Errorf("api-versions not sorted or with duplicates: %q", versions)
		}
	})
	t.Run("api-resources", func(t *testing.T) {
		tb := parseTable(t, e.k.ok(t, "api-resources"))
		tb.checkHeader(t, "NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND")
		for _, want := range []map[string]string{
			{"NAME": "deployments", "SHORTNAMES": "deploy", "APIVERSION": "apps/v1", "NAMESPACED": "true", "KIND": "Deployment"},
			{"NAME": "services", "SHORTNAMES": "svc", "APIVERSION": "v1", "NAMESPACED": "true", "KIND": "Service"},
			{"NAME": "configmaps", "SHORTNAMES": "cm", "APIVERSION": "v1", "NAMESPACED": "true", "KIND": "ConfigMap"},
			{"NAME": "secrets", "SHORTNAMES": "", "APIVERSION": "v1", "NAMESPACED": "true", "KIND": "Secret"},
			{"NAME": "namespaces", "SHORTNAMES": "ns", "APIVERSION": "v1", "NAMESPACED": "false", "KIND": "Namespace"},
		} {
			checkRow(t, tb.row(t, "NAME", want["NAME"]), want)
		}
		// Every group version of a resource is one api-versions lists.
		for _, r := range tb.rows {
			if versions != nil && !slices.Contains(versions, r["APIVERSION"]) {
				t.Errorf("api-resources: %s in %s, which api-versions does not list", r["NAME"], r["APIVERSION"])
			}
		}
		names := strings.Fields(e.k.ok(t, "api-resources", "--api-group=apps", "-o", "name"))
		if !slices.Contains(names, "deployments.apps") {
			t.Errorf("api-resources --api-group=apps: %q lacks deployments.apps", names)
		}
		for _, n := range names {
			if !strings.HasSuffix(n, ".apps") {
				t.Errorf("api-resources --api-group=apps lists %s", n)
			}
		}
		names = strings.Fields(e.k.ok(t, "api-resources", "--namespaced=false", "-o", "name"))
		if !slices.Contains(names, "namespaces") || slices.Contains(names, "configmaps") {
			t.Errorf("api-resources --namespaced=false: %q", names)
		}
	})
}

func testCLI(t *testing.T, e *env) {
	t.Run("explain", func(t *testing.T) {
		out := e.k.ok(t, "explain", "deployment.spec.replicas")
		for _, want := range []string{"GROUP:      apps\n", "KIND:       Deployment\n", "VERSION:    v1\n", "FIELD: replicas <integer>\n", "Number of desired pods."} {
			if !strings.Contains(out, want) {
				t.Errorf("explain deployment.spec.replicas lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("version", func(t *testing.T) {
		var v struct {
			Client    version.Info  `json:"clientVersion"`
			Kustomize string        `json:"kustomizeVersion"`
			Server    *version.Info `json:"serverVersion"`
		}
		e.k.json(t, &v, "version")
		if v.Client.GitVersion != "v1.37.2" {
			t.Errorf("client version %q, want v1.37.2 (the kubectl under test)", v.Client.GitVersion)
		}
		if v.Server == nil {
			t.Fatal("kubectl version printed no serverVersion")
		}
		if v.Server.Major != "1" || v.Server.Minor != "37" || !strings.HasPrefix(v.Server.GitVersion, "v1.37.") || v.Server.Platform == "" {
			t.Errorf("server version %+v, want 1.37 (v1.37.x)", *v.Server)
		}
		want := "Client Version: v1.37.2\nKustomize Version: " + v.Kustomize + "\nServer Version: " + v.Server.GitVersion + "\n"
		e.expectOutput(t, want, "version")
	})
	t.Run("auth whoami", func(t *testing.T) {
		tb := parseTable(t, e.k.ok(t, "auth", "whoami"))
		tb.checkHeader(t, "ATTRIBUTE", "VALUE")
		checkRow(t, tb.row(t, "ATTRIBUTE", "Username"), map[string]string{"VALUE": "kgate-admin"})
		checkRow(t, tb.row(t, "ATTRIBUTE", "Groups"), map[string]string{"VALUE": "[system:masters system:authenticated]"})
	})
}
