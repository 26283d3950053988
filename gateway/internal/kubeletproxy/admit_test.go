package kubeletproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	adm "github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
)

// connectChain is an admission chain of the test: it records what it
// saw, refuses exec of "forbidden" and rewrites exec of "rewrite" into
// "echo rewritten" in its mutating phase.
type connectChain struct {
	mu   sync.Mutex
	seen []string
}

func (c *connectChain) Admit(_ context.Context, at *adm.Attributes) error {
	if o, ok := at.Object.(*corev1.PodExecOptions); ok && slices.Equal(o.Command, []string{"rewrite"}) {
		next := o.DeepCopy()
		next.Command = []string{"echo", "rewritten"}
		at.Object = next
	}
	return nil
}

func (c *connectChain) Validate(_ context.Context, at *adm.Attributes) error {
	var what string
	switch o := at.Object.(type) {
	case *corev1.PodExecOptions:
		what = strings.Join(o.Command, " ")
		if what == "forbidden" {
			return apierror.Forbidden(corev1.Resource("pods"), at.Name, errors.New("denied by the test's policy"))
		}
	case *corev1.NodeProxyOptions:
		what = o.Path
	case *corev1.PodPortForwardOptions:
		what = fmt.Sprint(o.Ports)
	default:
		what = fmt.Sprintf("%T", o)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, fmt.Sprintf("%s %s %s/%s %s %s/%s by %s: %s", at.Operation, at.GVK().Kind, at.GVR().Resource, at.Subresource,
		at.GVK().Version, at.Namespace, at.Name, at.User.GetName(), what))
	return nil
}

func (c *connectChain) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.seen
	c.seen = nil
	return out
}

// TestConnectAdmission: exec and the proxies pass the admission chain as
// CONNECT with their v1 options as the object; a refusal is the chain's
// Status and never reaches the kubelet; options a mutating plugin
// changed are the ones used; logs are not admitted (a get upstream).
func TestConnectAdmission(t *testing.T) {
	chain := &connectChain{}
	e := newEnv(t, envConfig{allowLoopback: true, admission: chain})
	cfg := &restclient.Config{Host: e.url}
	exec := func(command string) (string, error) {
		u, _ := url.Parse(e.url + "/api/v1/namespaces/default/pods/p/exec?command=" + command + "&stdout=true")
		ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out})
		return out.String(), err
	}

	if out, err := exec("echo"); err != nil || out != "\n" {
		t.Fatalf("exec echo: %q, %v", out, err)
	}
	if got, want := chain.take(), []string{"CONNECT PodExecOptions pods/exec v1 default/p by alice: echo"}; !slices.Equal(got, want) {
		t.Errorf("the chain saw %q, want %q", got, want)
	}

	before := len(e.kubelet.Requests())
	_, err := exec("forbidden")
	if err == nil || !strings.Contains(err.Error(), "denied by the test's policy") {
		t.Errorf("exec refused by the chain: %v, want its message", err)
	}
	if len(e.kubelet.Requests()) != before {
		t.Error("a refused exec reached the kubelet")
	}

	if out, err := exec("rewrite"); err != nil || out != "rewritten\n" {
		t.Errorf("exec rewritten by the chain: %q, %v; want the rewritten command's output", out, err)
	}
	chain.take()

	if resp, body := e.get("/api/v1/nodes/n1/proxy/healthz", nil); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("node proxy: %d %q", resp.StatusCode, body)
	}
	if resp, _ := e.get("/api/v1/namespaces/default/pods/p/log", nil); resp.StatusCode != 200 {
		t.Fatalf("log: %d", resp.StatusCode)
	}
	if got, want := chain.take(), []string{"CONNECT NodeProxyOptions nodes/proxy v1 /n1 by alice: /healthz"}; !slices.Equal(got, want) {
		t.Errorf("the chain saw %q, want %q (logs are not admitted)", got, want)
	}
}
