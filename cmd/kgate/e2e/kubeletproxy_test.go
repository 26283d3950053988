package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/deploy/fakekubelet"
)

// TestKubeletProxy runs kgate dev with the --kubelet-* flags and a fake
// kubelet of the test (HTTPS on loopback, requiring kgate's kubelet
// client certificate), and the real kubectl: logs (and logs -f, line by
// line as the kubelet writes), exec over WebSocket and SPDY (and its
// admission as CONNECT by a ValidatingAdmissionPolicy), port-forward
// over WebSocket and SPDY moving bytes both ways, and nodes/proxy.
func TestKubeletProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary; skipped under -short")
	}
	dir := t.TempDir()
	pki, err := fakekubelet.NewPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := fakekubelet.Start(pki, "hello from the kubelet")
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	s := startServer(t, filepath.Join(dir, "data"),
		"--kubelet-client-certificate", pki.ClientCertFile, "--kubelet-client-key", pki.ClientKeyFile,
		"--kubelet-certificate-authority", pki.CAFile, "--kubelet-preferred-address-types", "InternalIP",
		"--kubelet-allow-loopback-targets")
	k := &kubectl{kubeconfig: s.kubeconfig, cacheDir: filepath.Join(dir, "cache")}

	manifest := filepath.Join(dir, "objects.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
kind: Node
metadata:
  name: kubelet-node
---
apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: default
spec:
  nodeName: kubelet-node
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
`), 0o600); err != nil {
		t.Fatal(err)
	}
	k.ok(t, "apply", "-f", manifest)
	k.ok(t, "patch", "node", "kubelet-node", "--subresource=status", "--type=merge", "-p",
		fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}],"daemonEndpoints":{"kubeletEndpoint":{"Port":%d}}}}`, kubelet.Port()))

	// kubectl port-forward asks for a running pod.
	k.ok(t, "patch", "pod", "app", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Running"}}`)

	t.Run("nodes/proxy", func(t *testing.T) {
		if out := k.ok(t, "get", "--raw", "/api/v1/nodes/kubelet-node/proxy/healthz"); out != "ok" {
			t.Fatalf("healthz through the node proxy: %q", out)
		}
		last := lastRequest(t, kubelet, "/healthz")
		if last.ClientCN != "kube-apiserver-kubelet-client" {
			t.Errorf("the kubelet saw client %q", last.ClientCN)
		}
		if last.Header.Get("Authorization") != "" {
			t.Error("kubectl's credentials reached the kubelet")
		}
	})

	t.Run("logs", func(t *testing.T) {
		if out := k.ok(t, "logs", "app", "--tail=5", "--timestamps"); out != "hello from the kubelet\n" {
			t.Fatalf("kubectl logs: %q", out)
		}
		if q := lastRequest(t, kubelet, "/containerLogs/default/app/main").RawQuery; !strings.Contains(q, "tailLines=5") || !strings.Contains(q, "timestamps=true") {
			t.Errorf("the kubelet was asked %q", q)
		}
		f := k.start(t, false, "logs", "-f", "app")
		if l := f.next(t, 20*time.Second, "the first log line"); l != "hello from the kubelet" {
			t.Fatalf("first line %q", l)
		}
		// The kubelet writes the next line only now: it reaches kubectl
		// as it is written, not when the stream ends.
		kubelet.Follow <- "a later line"
		if l := f.next(t, 20*time.Second, "the followed line"); l != "a later line" {
			t.Fatalf("followed line %q", l)
		}
		f.stop()
	})

	t.Run("exec", func(t *testing.T) {
		if out := k.ok(t, "exec", "app", "--", "echo", "hi"); out != "hi\n" {
			t.Fatalf("kubectl exec over WebSocket: %q", out)
		}
		t.Setenv("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")
		if out := k.ok(t, "exec", "app", "--", "echo", "hi", "over", "spdy"); out != "hi over spdy\n" {
			t.Fatalf("kubectl exec over SPDY: %q", out)
		}
		r := k.fails(t, "exec", "app", "-c", "nope", "--", "echo")
		if !strings.Contains(r.stderr, "container nope is not valid for pod app") {
			t.Errorf("exec in a missing container: %s", r)
		}
	})

	// exec passes admission as CONNECT with its PodExecOptions, as
	// upstream's: a ValidatingAdmissionPolicy on pods/exec refuses one
	// command and lets the others through.
	t.Run("exec admission", func(t *testing.T) {
		policy := filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(policy, []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: no-rm-exec
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CONNECT"]
      resources: ["pods/exec"]
  validations:
  - expression: "!('rm' in object.command) && object.kind == 'PodExecOptions'"
    message: "no rm in exec"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: no-rm-exec
spec:
  policyName: no-rm-exec
  validationActions: [Deny]
`), 0o600); err != nil {
			t.Fatal(err)
		}
		k.ok(t, "apply", "-f", policy)
		// The gateway's admission feed learns the policy a moment later.
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := k.run("exec", "app", "--", "rm", "-rf", "/")
			if r.err != nil && strings.Contains(r.stderr, "denied request: no rm in exec") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("exec of rm was not refused by the policy: %s", r)
			}
			time.Sleep(200 * time.Millisecond) // kubectl is a process: nothing to wait on but another run
		}
		if out := k.ok(t, "exec", "app", "--", "echo", "still", "allowed"); out != "still allowed\n" {
			t.Fatalf("an allowed exec under the policy: %q", out)
		}
		k.ok(t, "delete", "-f", policy)
	})

	for _, websockets := range []string{"true", "false"} {
		t.Run("port-forward websockets="+websockets, func(t *testing.T) {
			t.Setenv("KUBECTL_PORT_FORWARD_WEBSOCKETS", websockets)
			pf := k.start(t, false, "port-forward", "pod/app", ":8080")
			line := pf.next(t, 20*time.Second, "the forwarding line")
			m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`).FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("port-forward printed %q", line)
			}
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+m[1], 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			// The pod's port echoes: what is sent comes back.
			msg := "bytes both ways " + websockets + "\n"
			if _, err := io.WriteString(c, msg); err != nil {
				t.Fatal(err)
			}
			got, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || got != msg {
				t.Fatalf("echo through port-forward: %q, %v", got, err)
			}
			pf.stop()
		})
	}
}

func lastRequest(t *testing.T, k *fakekubelet.Kubelet, path string) fakekubelet.Request {
	t.Helper()
	reqs := k.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path == path {
			return reqs[i]
		}
	}
	t.Fatalf("the kubelet saw no request for %s", path)
	return fakekubelet.Request{}
}
