package helm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kgate/kgate/gateway"
)

// valueSets are the values the chart is linted and rendered with: the
// defaults (what the base is), every option on, and kgate alone against
// an external etcd and NATS.
var valueSets = map[string][]string{
	"defaults": nil,
	"all-on":   {"testdata/all-on.yaml"},
	"external": {"testdata/external.yaml"},
}

func TestLint(t *testing.T) {
	helm := tool(t, "HELM_BIN", "helm")
	for name, files := range valueSets {
		args := []string{"lint", "--strict", chartDir}
		for _, f := range files {
			args = append(args, "--values", f)
		}
		t.Run(name, func(t *testing.T) { run(t, helm, args...) })
	}
}

// TestRender renders each value set and checks what every pod of the
// chart must have: the security context, resources with GOMEMLIMIT from
// the memory limit, probes whose timeouts are sane, flags kgate takes;
// and what the release must have: spread, PDBs, an HPA that scales down
// gently, default-deny network policies with each pod allowed its
// traffic, a gateway that stops gracefully.
func TestRender(t *testing.T) {
	tool(t, "HELM_BIN", "helm")
	flags := kgateFlags(t)
	for name, files := range valueSets {
		t.Run(name, func(t *testing.T) {
			objs := decode(t, render(t, files...))
			var pods []podOf
			for _, o := range objs {
				switch w := o.typed.(type) {
				case *appsv1.Deployment:
					pods = append(pods, podOf{o.String(), &w.Spec.Template})
				case *appsv1.StatefulSet:
					pods = append(pods, podOf{o.String(), &w.Spec.Template})
				case *appsv1.DaemonSet, *corev1.Pod:
					t.Errorf("%s: the chart runs no %T", o, w)
				}
			}
			if len(pods) == 0 {
				t.Fatalf("no workloads rendered: %s", kinds(objs))
			}
			for _, p := range pods {
				checkPod(t, p)
				checkFlags(t, p, flags)
			}
			checkGateway(t, objs)
			checkCacheNodes(t, objs, name)
			checkNetworkPolicies(t, objs, pods)
		})
	}
}

type podOf struct {
	name string
	tmpl *corev1.PodTemplateSpec
}

func checkPod(t *testing.T, p podOf) {
	t.Helper()
	spec := p.tmpl.Spec
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v: want runAsNonRoot, a non-root runAsUser, seccomp RuntimeDefault", p.name, psc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a service-account token it does not use", p.name)
	}
	for _, c := range spec.Containers {
		name := p.name + "/" + c.Name
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: securityContext %+v: want a read-only root filesystem, no privilege escalation, every capability dropped", name, sc)
		}
		req, lim := c.Resources.Requests, c.Resources.Limits
		if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
			t.Errorf("%s: resources %v: want cpu and memory requests and a memory limit", name, c.Resources)
		}
		if m := lim.Memory(); !m.IsZero() {
			want := fmt.Sprintf("%dMiB", m.Value()*90/100/(1<<20))
			if got := env(c, "GOMEMLIMIT"); got != want {
				t.Errorf("%s: GOMEMLIMIT %q, want %q (90%% of the memory limit %s)", name, got, want, m)
			}
		}
		for kind, pr := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if pr == nil {
				t.Errorf("%s: no %s probe", name, kind)
				continue
			}
			if pr.HTTPGet == nil {
				t.Errorf("%s: %s probe is not an HTTP GET of a health endpoint", name, kind)
				continue
			}
			if pr.TimeoutSeconds <= 0 || pr.PeriodSeconds <= 0 || pr.TimeoutSeconds > pr.PeriodSeconds {
				t.Errorf("%s: %s probe times out after %ds every %ds: want a timeout within the period", name, kind, pr.TimeoutSeconds, pr.PeriodSeconds)
			}
			if !portNamed(c, pr.HTTPGet.Port.String()) {
				t.Errorf("%s: %s probe on port %s, which the container does not declare", name, kind, pr.HTTPGet.Port.String())
			}
		}
		if pr := c.LivenessProbe; pr != nil && pr.PeriodSeconds*pr.FailureThreshold < 30 {
			t.Errorf("%s: liveness kills after %ds of failures: want at least 30 s", name, pr.PeriodSeconds*pr.FailureThreshold)
		}
		if pr := c.StartupProbe; pr != nil && pr.PeriodSeconds*pr.FailureThreshold < 120 {
			t.Errorf("%s: startup allows %ds: want at least two minutes", name, pr.PeriodSeconds*pr.FailureThreshold)
		}
		if isKgate(c) {
			for kind, pr := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				if pr == nil || pr.HTTPGet == nil {
					continue
				}
				want := map[string]string{"liveness": "/livez", "readiness": "/readyz"}[kind]
				if pr.HTTPGet.Path != want {
					t.Errorf("%s: %s probe on %s, want %s", name, kind, pr.HTTPGet.Path, want)
				}
				// The gateway's checks take up to HealthCheckTimeout: a
				// probe giving up first would fail a slow check as a
				// timeout, with nothing in the logs to say which.
				if roleOf(c) == "gateway" && time.Duration(pr.TimeoutSeconds)*time.Second <= gateway.HealthCheckTimeout && kind == "readiness" {
					t.Errorf("%s: readiness probe timeout %ds is not longer than the gateway's checks (%s)", name, pr.TimeoutSeconds, gateway.HealthCheckTimeout)
				}
			}
		}
	}
	if !hasVolume(spec, "tmp") && anyKgate(spec) {
		t.Errorf("%s: no writable /tmp beside the read-only root filesystem", p.name)
	}
}

func checkGateway(t *testing.T, objs []object) {
	t.Helper()
	d := find[*appsv1.Deployment](t, objs, "Deployment", "kgate-gateway")
	c := d.Spec.Template.Spec.Containers[0]
	delay, err := time.ParseDuration(flagValue(c, "shutdown-delay-duration"))
	if err != nil || delay <= 0 {
		t.Errorf("gateway: --shutdown-delay-duration %q: want a positive delay (%v)", flagValue(c, "shutdown-delay-duration"), err)
	}
	var preStop time.Duration
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Error("gateway: no preStop sleep")
	} else {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	need := preStop + delay + gateway.DefaultShutdownGrace
	var grace time.Duration
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if grace <= need {
		t.Errorf("gateway: terminationGracePeriodSeconds %s: want more than preStop %s + shutdown delay %s + drain %s", grace, preStop, delay, gateway.DefaultShutdownGrace)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("gateway: rolling update %+v: want maxUnavailable 0", ru)
	}
	checkSpread(t, "gateway", d.Spec.Template.Spec, false)
	pdb := find[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "kgate-gateway")
	checkSelects(t, "gateway PDB", pdb.Spec.Selector, d.Spec.Template.Labels)
	for _, o := range objs {
		hpa, ok := o.typed.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok {
			continue
		}
		if d.Spec.Replicas != nil {
			t.Errorf("gateway: replicas set beside an HPA: every upgrade would reset the HPA's choice")
		}
		b := hpa.Spec.Behavior
		if b == nil || b.ScaleDown == nil || b.ScaleDown.StabilizationWindowSeconds == nil || *b.ScaleDown.StabilizationWindowSeconds < 60 || len(b.ScaleDown.Policies) == 0 {
			t.Errorf("gateway HPA: scale-down behavior %+v: want a stabilization window and a policy", b)
		}
		if hpa.Spec.ScaleTargetRef.Name != d.Name || hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 {
			t.Errorf("gateway HPA: %+v: want the gateway Deployment, at least 2 replicas", hpa.Spec)
		}
	}
}

func checkCacheNodes(t *testing.T, objs []object, values string) {
	t.Helper()
	s := find[*appsv1.StatefulSet](t, objs, "StatefulSet", "kgate-cachenode")
	checkSpread(t, "cache node", s.Spec.Template.Spec, values != "external")
	pdb := find[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "kgate-cachenode")
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("cache node PDB: maxUnavailable %v, want 1 (two owners per range)", pdb.Spec.MaxUnavailable)
	}
	checkSelects(t, "cache node PDB", pdb.Spec.Selector, s.Spec.Template.Labels)
}

// checkSpread: over zones and nodes; required, cache nodes never share a
// Kubernetes node (any two may own the same range).
func checkSpread(t *testing.T, what string, spec corev1.PodSpec, required bool) {
	t.Helper()
	keys := map[string]bool{}
	for _, c := range spec.TopologySpreadConstraints {
		keys[c.TopologyKey] = true
	}
	if !keys["topology.kubernetes.io/zone"] || !keys["kubernetes.io/hostname"] {
		t.Errorf("%s: topology spread over %v: want zones and nodes", what, keys)
	}
	a := spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		t.Errorf("%s: no pod anti-affinity", what)
		return
	}
	if got := len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0; got != required {
		t.Errorf("%s: required anti-affinity %v, want %v", what, got, required)
	}
}

// checkNetworkPolicies: a default deny of everything in the namespace,
// and each workload selected by a policy allowing it traffic.
func checkNetworkPolicies(t *testing.T, objs []object, pods []podOf) {
	t.Helper()
	var deny bool
	var allows []*networkingv1.NetworkPolicy
	for _, o := range objs {
		np, ok := o.typed.(*networkingv1.NetworkPolicy)
		if !ok {
			continue
		}
		if len(np.Spec.PodSelector.MatchLabels) == 0 && len(np.Spec.PodSelector.MatchExpressions) == 0 &&
			len(np.Spec.Ingress) == 0 && len(np.Spec.Egress) == 0 && len(np.Spec.PolicyTypes) == 2 {
			deny = true
			continue
		}
		allows = append(allows, np)
	}
	if !deny {
		t.Error("no default-deny NetworkPolicy")
	}
	for _, p := range pods {
		var in, out bool
		for _, np := range allows {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil {
				t.Fatalf("NetworkPolicy %s: %v", np.Name, err)
			}
			if !sel.Matches(labelsOf(p.tmpl.Labels)) {
				continue
			}
			in = in || len(np.Spec.Ingress) > 0
			out = out || len(np.Spec.Egress) > 0
		}
		if !in || !out {
			t.Errorf("%s: allowed ingress %v, egress %v by the network policies: want both", p.name, in, out)
		}
	}
}

// checkFlags: every flag a kgate container is given is one `kgate <role>
// -h` lists.
func checkFlags(t *testing.T, p podOf, known map[string]map[string]bool) {
	t.Helper()
	for _, c := range p.tmpl.Spec.Containers {
		if !isKgate(c) || known == nil {
			continue
		}
		r := roleOf(c)
		for _, a := range c.Args[1:] {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") {
				t.Errorf("%s: argument %q is not a --flag=value", p.name, a)
				continue
			}
			if !known[r][name] {
				t.Errorf("%s: kgate %s has no flag --%s", p.name, r, name)
			}
		}
	}
}

// kgateFlags are the flags of `kgate gateway` and `kgate cachenode`, from
// their -h, or nil without KGATE_BIN.
func kgateFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	bin := os.Getenv("KGATE_BIN")
	if bin == "" {
		t.Log("KGATE_BIN not set: the rendered flags are not checked against kgate's (make test sets it)")
		return nil
	}
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)`)
	out := map[string]map[string]bool{}
	for _, r := range []string{"gateway", "cachenode"} {
		// -h exits non-zero: only the output matters.
		b, _ := exec.Command(bin, r, "-h").CombinedOutput()
		out[r] = map[string]bool{}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if m := flagLine.FindStringSubmatch(sc.Text()); m != nil {
				out[r][m[1]] = true
			}
		}
		if len(out[r]) < 5 {
			t.Fatalf("kgate %s -h lists %d flags:\n%s", r, len(out[r]), b)
		}
	}
	return out
}

// TestImagesRunAsNonRoot: each image's Dockerfile sets the numeric USER
// the chart's securityContext runs as.
func TestImagesRunAsNonRoot(t *testing.T) {
	files, err := filepath.Glob("../images/*.Dockerfile")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Dockerfiles in ../images (%v)", err)
	}
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+runAsUser: (\d+)$`).FindSubmatch(values)
	if m == nil {
		t.Fatal("values.yaml sets no runAsUser")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := regexp.MustCompile(`(?m)^USER (\d+)(:\d+)?$`).FindSubmatch(b)
		if u == nil || string(u[1]) != string(m[1]) || string(u[1]) == "0" {
			t.Errorf("%s: USER %q, want the chart's runAsUser %s", f, u, m[1])
		}
	}
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func portNamed(c corev1.Container, port string) bool {
	for _, p := range c.Ports {
		if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
			return true
		}
	}
	return false
}

func hasVolume(spec corev1.PodSpec, name string) bool {
	return slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
}

func isKgate(c corev1.Container) bool { return c.Name == "gateway" || c.Name == "cachenode" }

func anyKgate(spec corev1.PodSpec) bool { return slices.ContainsFunc(spec.Containers, isKgate) }

// roleOf is the kgate subcommand a container runs.
func roleOf(c corev1.Container) string {
	if len(c.Args) == 0 {
		return ""
	}
	return c.Args[0]
}

func flagValue(c corev1.Container, name string) string {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func checkSelects(t *testing.T, what string, sel *metav1.LabelSelector, podLabels map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() || !s.Matches(labelsOf(podLabels)) {
		t.Errorf("%s: selector %v does not select the pods (%v)", what, sel, err)
	}
}

func labelsOf(m map[string]string) labels.Set { return labels.Set(m) }
