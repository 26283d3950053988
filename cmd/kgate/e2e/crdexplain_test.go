package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/storage/storagetest"
)

// cronTabCRD is a user's CRD: descriptions, a required field, a default
// (kubectl explain does not print it; the server applies it),
// an enum, a status and a scale subresource, two served versions.
const cronTabCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    schema:
      openAPIV3Schema:
        type: object
        description: A CronTab runs a job on a schedule.
        properties:
          spec:
            type: object
            description: The schedule of a CronTab and what it runs.
            required: [cronSpec]
            properties:
              cronSpec:
                type: string
                description: When the job runs, in cron syntax.
              image:
                type: string
                description: The image the job runs.
              replicas:
                type: integer
                default: 1
                description: How many jobs run at once.
              policy:
                type: string
                enum: [Skip, Run]
                description: What happens to a late job.
          status:
            type: object
            properties:
              replicas:
                type: integer
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: The beta schedule.
            properties:
              schedule:
                type: string
                description: The beta cron syntax.
`

// TestCRDExplain: a user applies a CRD with kubectl; once it is
// established, kubectl explain prints the CRD's fields, descriptions,
// required markers and enums from /openapi/v3 (and, asked for, from
// /openapi/v2), and kubectl apply of custom resources passes kubectl's
// validation (server-side field validation for single objects, the
// published schema for a List).
func TestCRDExplain(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary and drives it with kubectl; skipped under -short")
	}
	root := t.TempDir()
	cache := filepath.Join(root, "kubectl-cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, filepath.Join(root, "data"))
	k := &kubectl{kubeconfig: srv.kubeconfig, cacheDir: cache}
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	k.ok(t, "apply", "-f", write("crd.yaml", cronTabCRD))
	k.ok(t, "wait", "--for=condition=Established", "crd/crontabs.stable.example.com", "--timeout=30s")

	// The documents follow the registry a moment after the CRD is
	// served.
	var out string
	storagetest.Eventually(t, 30*time.Second, "kubectl explain crontabs.spec", func() error {
		r := k.run("explain", "crontabs.spec")
		if r.err != nil {
			return fmt.Errorf("%s", r)
		}
		if !strings.Contains(r.stdout, "cronSpec") {
			return fmt.Errorf("no cronSpec yet:\n%s", r.stdout)
		}
		out = r.stdout
		return nil
	})
	for _, want := range []string{"GROUP:      stable.example.com\n", "KIND:       CronTab\n", "VERSION:    v1\n", "FIELD: spec <Object>\n",
		"The schedule of a CronTab and what it runs.", "When the job runs, in cron syntax.", "The image the job runs.", "How many jobs run at once."} {
		if !strings.Contains(out, want) {
			t.Errorf("explain crontabs.spec lacks %q:\n%s", want, out)
		}
	}
	fields := fieldLines(out, 2)
	for name, want := range map[string]string{"cronSpec": "<string> -required-", "image": "<string>", "replicas": "<integer>", "policy": "<string>"} {
		if got := fields[name]; got != want {
			t.Errorf("explain crontabs.spec: field %s %q, want %q:\n%s", name, got, want, out)
		}
	}
	if len(fields) != 4 {
		t.Errorf("explain crontabs.spec: fields %v, want the CRD's 4", fields)
	}

	t.Run("short name and enum", func(t *testing.T) {
		out := k.ok(t, "explain", "ct.spec.policy")
		for _, want := range []string{"FIELD: policy <string>", "What happens to a late job."} {
			if !strings.Contains(out, want) {
				t.Errorf("explain ct.spec.policy lacks %q:\n%s", want, out)
			}
		}
		if !regexp.MustCompile(`ENUM:\n\s+Skip\n\s+Run\n`).MatchString(out) {
			t.Errorf("explain ct.spec.policy lacks the enum Skip, Run:\n%s", out)
		}
	})
	t.Run("other version", func(t *testing.T) {
		out := k.ok(t, "explain", "crontabs.spec", "--api-version", "stable.example.com/v1beta1")
		for _, want := range []string{"VERSION:    v1beta1", "The beta schedule.", "schedule\t<string>", "The beta cron syntax."} {
			if !strings.Contains(out, want) {
				t.Errorf("explain --api-version v1beta1 lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("openapi v2", func(t *testing.T) {
		out := k.ok(t, "explain", "crontabs.spec", "--output", "plaintext-openapiv2")
		for _, want := range []string{"KIND:     CronTab", "The schedule of a CronTab and what it runs.", "cronSpec\t<string> -required-", "When the job runs, in cron syntax."} {
			if !strings.Contains(out, want) {
				t.Errorf("explain --output plaintext-openapiv2 lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("apply custom resources", func(t *testing.T) {
		k.ok(t, "create", "namespace", "crons")
		cr := "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: nightly\n  namespace: crons\nspec:\n  cronSpec: \"0 3 * * *\"\n  image: backup:1\n"
		k.ok(t, "apply", "-f", write("cr.yaml", cr))
		if got := k.ok(t, "get", "ct", "nightly", "-n", "crons", "-o", "jsonpath={.spec.replicas}"); got != "1" {
			t.Errorf("spec.replicas %q, want the default 1", got)
		}
		// A single object: kubectl leaves the unknown field to the
		// server's strict field validation.
		r := k.fails(t, "apply", "-f", write("bad.yaml", strings.Replace(cr, "image: backup:1", "image: backup:1\n  bogus: 1", 1)))
		if !strings.Contains(r.stderr, `unknown field "spec.bogus"`) {
			t.Errorf("unknown field: %s", r)
		}
		// A List: kubectl validates it itself, with the published schema.
		item := "- " + strings.ReplaceAll(strings.TrimSpace(strings.Replace(cr, "nightly", "hourly", 1)), "\n", "\n  ") + "\n"
		list := "apiVersion: v1\nkind: List\nitems:\n" + item
		k.ok(t, "apply", "-f", write("list.yaml", list))
		r = k.fails(t, "apply", "-f", write("badlist.yaml", strings.Replace(list, "image: backup:1", "image: backup:1\n    bogus: 1", 1)))
		if !strings.Contains(r.stderr, "bogus") {
			t.Errorf("unknown field in a List: %s", r)
		}
	})
}
