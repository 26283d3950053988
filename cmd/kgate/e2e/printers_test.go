package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	cliprinters "k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
)

// printersManifest is a few objects of the kinds kubectl users list most;
// their status is set afterwards through the status subresource.
const printersManifest = `
apiVersion: v1
kind: Namespace
metadata: {name: printers}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: printers, labels: {app: web}}
spec:
  nodeName: node-a
  readinessGates: [{conditionType: example.com/warm}]
  containers:
  - {name: app, image: nginx:1.25}
  - {name: log, image: fluentd:1}
---
apiVersion: v1
kind: Pod
metadata: {name: pending-0, namespace: printers}
spec:
  containers: [{name: app, image: busybox:1}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: printers}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: nginx:1.25}, {name: log, image: fluentd:1}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: printers}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}, {name: dns, port: 53, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: ext, namespace: printers}
spec: {type: ExternalName, externalName: db.example.com}
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {node-role.kubernetes.io/control-plane: "", kubernetes.io/os: linux}
spec: {unschedulable: true}
---
apiVersion: v1
kind: Event
metadata: {name: web-0.pulled, namespace: printers}
involvedObject: {kind: Pod, namespace: printers, name: web-0, fieldPath: "spec.containers{app}"}
reason: Pulled
message: Successfully pulled image "nginx:1.25"
type: Normal
count: 3
source: {component: kubelet, host: node-a}
firstTimestamp: "2026-01-01T00:00:00Z"
lastTimestamp: "2026-01-01T00:05:00Z"
`

// TestPrinters: kubectl get (-o wide) through kgate prints what
// kube-apiserver prints, the columns and cells of k8s.io/kubernetes's own
// printers called directly on the same objects.
func TestPrinters(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary and drives it with kubectl; skipped under -short")
	}
	s := startServer(t, t.TempDir())
	k := &kubectl{kubeconfig: s.kubeconfig, cacheDir: filepath.Join(t.TempDir(), "cache")}
	manifest := filepath.Join(t.TempDir(), "printers.yaml")
	if err := os.WriteFile(manifest, []byte(printersManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	k.ok(t, "apply", "-f", manifest)
	k.ok(t, "patch", "pod", "web-0", "-n", "printers", "--subresource=status", "--type=merge", "-p", `{"status":{
		"phase":"Running","podIP":"10.1.2.3","podIPs":[{"ip":"10.1.2.3"}],
		"conditions":[{"type":"Ready","status":"True"},{"type":"example.com/warm","status":"False"}],
		"containerStatuses":[
			{"name":"app","image":"nginx:1.25","imageID":"","ready":true,"restartCount":2,"state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}},
			 "lastState":{"terminated":{"exitCode":1,"finishedAt":"2026-01-01T00:00:00Z"}}},
			{"name":"log","image":"fluentd:1","imageID":"","ready":false,"restartCount":0,"state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}`)
	k.ok(t, "patch", "node", "node-a", "--subresource=status", "--type=merge", "-p", `{"status":{
		"conditions":[{"type":"Ready","status":"True","lastHeartbeatTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z"}],
		"addresses":[{"type":"InternalIP","address":"192.168.1.10"},{"type":"Hostname","address":"node-a"}],
		"nodeInfo":{"kubeletVersion":"v1.37.2","osImage":"Debian GNU/Linux 13","kernelVersion":"6.12.0","containerRuntimeVersion":"containerd://2.1.0",
			"machineID":"","systemUUID":"","bootID":"","kubeProxyVersion":"","operatingSystem":"linux","architecture":"amd64"}}}`)

	gen := printers.NewTableGenerator().With(printersinternal.AddHandlers)
	f := func(wantHeader []string, args ...string) {
		t.Helper()
		got := parseTable(t, k.ok(t, args...))
		want := parseTable(t, upstreamPrint(t, k, gen, args))
		got.checkHeader(t, want.header...)
		if wantHeader != nil {
			got.checkHeader(t, wantHeader...)
		}
		if len(got.rows) != len(want.rows) || len(got.rows) == 0 {
			t.Fatalf("kubectl %s: %d rows, the imported printer %d:\n%q\n%q", strings.Join(args, " "), len(got.rows), len(want.rows), got.rows, want.rows)
		}
		for i, w := range want.rows {
			for col, v := range w {
				switch col {
				case "AGE", "LAST SEEN", "FIRST SEEN":
					continue // relative to the moment each was printed
				}
				if got.rows[i][col] != v {
					t.Errorf("kubectl %s: row %d %s = %q, the imported printer prints %q", strings.Join(args, " "), i, col, got.rows[i][col], v)
				}
			}
		}
	}
	f([]string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"},
		"get", "pods", "-n", "printers", "-o", "wide")
	f(nil, "get", "pods", "-n", "printers")
	f([]string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"},
		"get", "deployments", "-n", "printers", "-o", "wide")
	f(nil, "get", "services", "-n", "printers")
	f(nil, "get", "services", "-n", "printers", "-o", "wide")
	f(nil, "get", "nodes", "-o", "wide")
	f(nil, "get", "events", "-n", "printers", "-o", "wide")
	f(nil, "get", "clusterroles") // no printer upstream: the default table
	f(nil, "get", "pod", "web-0", "-n", "printers", "-o", "wide")
}

// upstreamPrint prints what kube-apiserver would for kubectl args: the
// same objects, read with -o json, converted to the internal version with
// k8s.io/kubernetes's scheme and given to its printers, rendered with
// kubectl's table printer.
func upstreamPrint(t *testing.T, k *kubectl, gen *printers.HumanReadableGenerator, args []string) string {
	t.Helper()
	wide := false
	var jsonArgs []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-o" {
			wide = args[i+1] == "wide"
			i++
			continue
		}
		jsonArgs = append(jsonArgs, args[i])
	}
	out := k.ok(t, append(jsonArgs, "-o", "json")...)
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	raws := list.Items
	if list.Kind != "List" {
		raws = []json.RawMessage{json.RawMessage(out)}
	}
	decode := legacyscheme.Codecs.UniversalDeserializer()
	var items []runtime.Object
	var gvk schema.GroupVersionKind
	for _, raw := range raws {
		obj, kind, err := decode.Decode(raw, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		gvk = *kind
		internal, err := legacyscheme.Scheme.ConvertToVersion(obj, schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, internal)
	}
	var printed runtime.Object
	if list.Kind == "List" {
		l, err := legacyscheme.Scheme.New(schema.GroupVersionKind{Group: gvk.Group, Version: runtime.APIVersionInternal, Kind: gvk.Kind + "List"})
		if err != nil {
			t.Fatal(err)
		}
		if err := meta.SetList(l, items); err != nil {
			t.Fatal(err)
		}
		printed = l
	} else {
		printed = items[0]
	}
	tbl, err := gen.GenerateTable(printed, printers.GenerateOptions{Wide: true})
	if err != nil {
		// No printer upstream: kube-apiserver's default table.
		tbl, err = genericrest.NewDefaultTableConvertor(schema.GroupResource{}).ConvertToTable(context.Background(), printed, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := cliprinters.NewTablePrinter(cliprinters.PrintOptions{Wide: wide}).PrintObj(tbl, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}
