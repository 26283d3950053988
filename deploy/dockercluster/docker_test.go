package dockercluster_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/deploy/dockercluster"
	"github.com/kgate/kgate/deploy/dockercluster/dockerclustertest"
)

// cluster starts the deployment for t: 3 etcd, 3 NATS, 3 cache nodes
// (two replicas per range) and 2 gateways, every internal TLS and
// credential on. It is removed at the end of t; when t failed, every
// container's log is kept and its tail printed first.
func cluster(t *testing.T, ctx context.Context) *dockercluster.Cluster {
	t.Helper()
	return dockerclustertest.Start(t, ctx, "KGATE_DOCKER_TEST", dockercluster.Config{})
}

// kubectl runs kubectl against the gateway at addr and returns its output.
func kubectl(t *testing.T, ctx context.Context, c *dockercluster.Cluster, addr, stdin string, args ...string) string {
	t.Helper()
	bin := os.Getenv("KUBECTL_BIN")
	if bin == "" {
		t.Fatal("KUBECTL_BIN is not set: make test-docker sets it")
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", c.Kubeconfig(), "--server", "https://" + addr}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

const flowManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: flow
data:
  mode: blue
---
apiVersion: v1
kind: Secret
metadata:
  name: token
  namespace: flow
stringData:
  token: s3cret
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: robot
  namespace: flow
`

// TestDockerDeployment runs kgate as it is deployed — every component in
// its own container from the FROM scratch images, on a private network,
// with mutual TLS, NATS credentials and an encrypted gossip — and drives
// it with kubectl through one gateway while reading back through the
// other, then restarts the gateways one at a time under watch and
// request load: no request may fail and no watch may lose an event.
func TestDockerDeployment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	c := cluster(t, ctx)
	gws := c.GatewayAddrs()

	t.Run("kubectl", func(t *testing.T) {
		a, b := gws[0], gws[1]
		kubectl(t, ctx, c, a, "", "create", "namespace", "flow")
		kubectl(t, ctx, c, a, flowManifest, "apply", "-f", "-")
		// Read back through the other gateway: its cache nodes learnt the
		// writes over NATS.
		if got := kubectl(t, ctx, c, b, "", "get", "configmap", "settings", "-n", "flow", "-o", "jsonpath={.data.mode}"); got != "blue" {
			t.Errorf("settings.mode through the other gateway = %q, want blue", got)
		}
		if got := kubectl(t, ctx, c, b, "", "get", "secret/token", "serviceaccount/robot", "-n", "flow", "-o", "name"); got != "secret/token\nserviceaccount/robot" {
			t.Errorf("objects through the other gateway:\n%s", got)
		}
		kubectl(t, ctx, c, b, "", "label", "configmap", "settings", "-n", "flow", "tier=web")
		kubectl(t, ctx, c, b, "", "patch", "configmap", "settings", "-n", "flow", "-p", `{"data":{"mode":"green"}}`)
		if got := kubectl(t, ctx, c, a, "", "get", "configmap", "-n", "flow", "-l", "tier=web", "-o", "jsonpath={.items[*].data.mode}"); got != "green" {
			t.Errorf("labelled and patched settings through the first gateway = %q, want green", got)
		}
		if got := kubectl(t, ctx, c, a, "", "auth", "can-i", "delete", "secrets", "-n", "flow"); got != "yes" {
			t.Errorf("kubectl auth can-i as the admin = %q", got)
		}
		kubectl(t, ctx, c, a, "", "delete", "configmap", "settings", "-n", "flow")
		if got := kubectl(t, ctx, c, b, "", "get", "configmaps", "-n", "flow", "-o", "name"); got != "" {
			t.Errorf("configmaps left after the delete, through the other gateway: %q", got)
		}
		if got := kubectl(t, ctx, c, b, "", "api-resources", "--api-group=", "-o", "name"); !strings.Contains(got, "configmaps") {
			t.Errorf("kubectl api-resources: %s", got)
		}
	})
	if t.Failed() {
		return
	}
	t.Run("rolling restart", func(t *testing.T) { rollingRestart(t, ctx, c) })
}

// balanced is a clientset whose requests go to the gateways in turn
// (dockercluster.RoundRobin), with rr to read its counters.
func balanced(t *testing.T, c *dockercluster.Cluster, agent string) (kubernetes.Interface, *dockercluster.RoundRobin) {
	t.Helper()
	gws := c.GatewayAddrs()
	base, err := c.RESTConfig(gws[0])
	if err != nil {
		t.Fatal(err)
	}
	rr, err := dockercluster.NewRoundRobin(gws)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rr.Config(base)
	if err != nil {
		t.Fatal(err)
	}
	cfg.UserAgent = agent
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, rr
}
