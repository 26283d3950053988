package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var ageRE = regexp.MustCompile(`^[0-9]+s$`)

func testGet(t *testing.T, e *env) {
	t.Run("yaml", func(t *testing.T) { testGetYAML(t, e) })
	t.Run("json", func(t *testing.T) { testGetJSON(t, e) })
	t.Run("server defaults", func(t *testing.T) { testServerDefaults(t, e) })
	t.Run("service cluster IP", func(t *testing.T) {
		var svc corev1.Service
		e.k.json(t, &svc, "get", "service", svcName, "-n", ns)
		// Allocated from the default service range, 10.96.0.0/12.
		_, serviceRange, _ := net.ParseCIDR("10.96.0.0/12")
		if ip := net.ParseIP(svc.Spec.ClusterIP); ip == nil || !serviceRange.Contains(ip) {
			t.Errorf("clusterIP %q is not an address of 10.96.0.0/12", svc.Spec.ClusterIP)
		}
		if net.ParseIP(svc.Spec.ClusterIP) == nil || len(svc.Spec.ClusterIPs) != 1 || svc.Spec.ClusterIPs[0] != svc.Spec.ClusterIP {
			t.Errorf("clusterIP %q, clusterIPs %q", svc.Spec.ClusterIP, svc.Spec.ClusterIPs)
		}
	})
	t.Run("all namespaces", func(t *testing.T) {
		tb := parseTable(t, e.k.ok(t, "get", "configmaps", "-A"))
		tb.checkHeader(t, "NAMESPACE", "NAME", "DATA", "AGE")
		checkRow(t, tb.row(t, "NAME", cmName), map[string]string{"NAMESPACE": ns, "DATA": "2"})
		tb = parseTable(t, e.k.ok(t, "get", "deployments", "--all-namespaces"))
		tb.checkHeader(t, "NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
		checkRow(t, tb.row(t, "NAME", deployName), map[string]string{"NAMESPACE": ns, "READY": "0/2", "UP-TO-DATE": "0", "AVAILABLE": "0"})
	})
	t.Run("selectors", func(t *testing.T) {
		const all = "deployment.apps/web\nservice/web\nconfigmap/web-config\nsecret/web-secret\n"
		for _, sel := range []string{"app=web", "app in (web,api)", "app"} {
			if out := e.k.ok(t, "get", "deployment,service,configmap,secret", "-n", ns, "-l", sel, "-o", "name"); out != all {
				t.Errorf("get -l %q printed %q, want %q", sel, out, all)
			}
		}
		if out := e.k.ok(t, "get", "configmaps", "-A", "-l", "app=web", "-o", "name"); out != "configmap/web-config\n" {
			t.Errorf("get configmaps -A -l app=web printed %q", out)
		}
		if out := e.k.ok(t, "get", "configmaps", "-n", ns, "--field-selector", "metadata.name="+cmName, "-o", "name"); out != "configmap/web-config\n" {
			t.Errorf("get configmaps --field-selector metadata.name=%s printed %q", cmName, out)
		}
		for _, sel := range []string{"app!=web", "app=nope"} {
			r := e.k.run("get", "configmaps", "-n", ns, "-l", sel)
			if r.err != nil || r.stdout != "" || r.stderr != "No resources found in e2e namespace.\n" {
				t.Errorf("get configmaps -l %q: %s", sel, r)
			}
		}
	})
	t.Run("table", func(t *testing.T) { testGetTable(t, e) })
	t.Run("several kinds", func(t *testing.T) {
		out := e.k.ok(t, "get", "deploy,svc,cm", "-n", ns)
		sections := strings.Split(out, "\n\n")
		if len(sections) != 3 {
			t.Fatalf("get deploy,svc,cm printed %d sections, want 3:\n%s", len(sections), out)
		}
		tb := parseTable(t, sections[0])
		tb.checkHeader(t, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
		checkRow(t, tb.row(t, "NAME", "deployment.apps/web"), map[string]string{"READY": "0/2"})
		tb = parseTable(t, sections[1])
		tb.checkHeader(t, "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE")
		checkRow(t, tb.row(t, "NAME", "service/web"), map[string]string{"PORT(S)": "80/TCP"})
		tb = parseTable(t, sections[2])
		tb.checkHeader(t, "NAME", "DATA", "AGE")
		checkRow(t, tb.row(t, "NAME", "configmap/web-config"), map[string]string{"DATA": "2"})
	})
}

func testGetYAML(t *testing.T, e *env) {
	out := e.k.ok(t, "get", "deployment", deployName, "-n", ns, "-o", "yaml")
	if !strings.HasPrefix(out, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n") {
		t.Errorf("-o yaml does not start with apiVersion, kind, metadata:\n%s", out)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("cannot decode -o yaml: %v\n%s", err, out)
	}
	if d.APIVersion != "apps/v1" || d.Kind != "Deployment" || d.Name != deployName || d.Namespace != ns {
		t.Errorf("got %s %s %s/%s", d.APIVersion, d.Kind, d.Namespace, d.Name)
	}
	checkServerMeta(t, "deployment", d.ObjectMeta)
	if d.Generation != 1 {
		t.Errorf("generation %d, want 1", d.Generation)
	}
	if !maps.Equal(d.Labels, map[string]string{"app": "web"}) {
		t.Errorf("labels %v", d.Labels)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("spec.replicas %v, want 2", d.Spec.Replicas)
	}
	if d.Spec.Selector == nil || !maps.Equal(d.Spec.Selector.MatchLabels, map[string]string{"app": "web"}) {
		t.Errorf("spec.selector %v", d.Spec.Selector)
	}
	if !maps.Equal(d.Spec.Template.Labels, map[string]string{"app": "web"}) {
		t.Errorf("spec.template labels %v", d.Spec.Template.Labels)
	}
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "web" || cs[0].Image != "nginx:1.25" || len(cs[0].Ports) != 1 || cs[0].Ports[0].ContainerPort != 80 {
		t.Errorf("containers %+v", cs)
	}
	// kubectl apply keeps what it applied in an annotation.
	var applied appsv1.Deployment
	if err := json.Unmarshal([]byte(d.Annotations["kubectl.kubernetes.io/last-applied-configuration"]), &applied); err != nil {
		t.Errorf("last-applied-configuration: %v (annotations %v)", err, d.Annotations)
	} else if c := applied.Spec.Template.Spec.Containers; applied.Name != deployName || len(c) != 1 || c[0].Image != "nginx:1.25" {
		t.Errorf("last-applied-configuration %+v", applied)
	}
	// -o yaml and -o json show the same object.
	var dj appsv1.Deployment
	e.k.json(t, &dj, "get", "deployment", deployName, "-n", ns)
	if dj.ResourceVersion != d.ResourceVersion || dj.UID != d.UID {
		t.Errorf("-o json: uid/resourceVersion %s/%s, -o yaml: %s/%s", dj.UID, dj.ResourceVersion, d.UID, d.ResourceVersion)
	}
}

// checkServerMeta checks the metadata the server sets on create.
func checkServerMeta(t *testing.T, what string, m metav1.ObjectMeta) {
	t.Helper()
	if m.UID == "" || m.CreationTimestamp.IsZero() {
		t.Errorf("%s: uid %q, creationTimestamp %v", what, m.UID, m.CreationTimestamp)
	}
	if rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64); err != nil || rv == 0 {
		t.Errorf("%s: resourceVersion %q, want a positive integer", what, m.ResourceVersion)
	}
}

func testGetJSON(t *testing.T, e *env) {
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	e.k.json(t, &list, "get", "-n", ns, "deployment/"+deployName, "service/"+svcName, "configmap/"+cmName, "secret/"+secretName)
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 4 {
		t.Fatalf("got %s %s with %d items, want a v1 List of 4", list.APIVersion, list.Kind, len(list.Items))
	}
	var (
		d   appsv1.Deployment
		svc corev1.Service
		cm  corev1.ConfigMap
		sec corev1.Secret
	)
	for i, v := range []any{&d, &svc, &cm, &sec} {
		if err := json.Unmarshal(list.Items[i], v); err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	uids, rvs := map[string]bool{}, map[string]bool{}
	for _, o := range []struct {
		apiVersion, kind, name string
		tm                     metav1.TypeMeta
		m                      metav1.ObjectMeta
	}{
		{"apps/v1", "Deployment", deployName, d.TypeMeta, d.ObjectMeta},
		{"v1", "Service", svcName, svc.TypeMeta, svc.ObjectMeta},
		{"v1", "ConfigMap", cmName, cm.TypeMeta, cm.ObjectMeta},
		{"v1", "Secret", secretName, sec.TypeMeta, sec.ObjectMeta},
	} {
		if o.tm.APIVersion != o.apiVersion || o.tm.Kind != o.kind || o.m.Name != o.name || o.m.Namespace != ns {
			t.Errorf("got %s %s %s/%s, want %s %s %s/%s", o.tm.APIVersion, o.tm.Kind, o.m.Namespace, o.m.Name, o.apiVersion, o.kind, ns, o.name)
		}
		checkServerMeta(t, o.kind, o.m)
		if uids[string(o.m.UID)] || rvs[o.m.ResourceVersion] {
			t.Errorf("%s: uid %s or resourceVersion %s is another object's", o.kind, o.m.UID, o.m.ResourceVersion)
		}
		uids[string(o.m.UID)], rvs[o.m.ResourceVersion] = true, true
		if !maps.Equal(o.m.Labels, map[string]string{"app": "web"}) {
			t.Errorf("%s: labels %v", o.kind, o.m.Labels)
		}
	}
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 80 || p[0].TargetPort.IntValue() != 80 || !maps.Equal(svc.Spec.Selector, map[string]string{"app": "web"}) {
		t.Errorf("service spec %+v", svc.Spec)
	}
	if !maps.Equal(cm.Data, map[string]string{"color": "blue", "size": "large"}) {
		t.Errorf("configmap data %v", cm.Data)
	}
	// stringData is write-only: the server stores it in data.
	if len(sec.Data) != 1 || string(sec.Data["password"]) != "s3cret" || sec.StringData != nil {
		t.Errorf("secret data %q, stringData %q; want data password=s3cret and no stringData", sec.Data, sec.StringData)
	}
}

// testServerDefaults compares fields the user left out with what
// kube-apiserver stores: its defaulting (SetObjectDefaults_*) and strategies.
func testServerDefaults(t *testing.T, e *env) {
	var (
		d   appsv1.Deployment
		svc corev1.Service
		sec corev1.Secret
	)
	e.k.json(t, &d, "get", "deployment", deployName, "-n", ns)
	e.k.json(t, &svc, "get", "service", svcName, "-n", ns)
	e.k.json(t, &sec, "get", "secret", secretName, "-n", ns)
	ds, ps := d.Spec, d.Spec.Template.Spec
	var c corev1.Container
	if len(ps.Containers) == 1 {
		c = ps.Containers[0]
	}
	var cport, sport string
	if len(c.Ports) == 1 {
		cport = string(c.Ports[0].Protocol)
	}
	if len(svc.Spec.Ports) == 1 {
		sport = string(svc.Spec.Ports[0].Protocol)
	}
	var ru string
	if r := ds.Strategy.RollingUpdate; r != nil {
		ru = fmt.Sprintf("maxSurge=%v maxUnavailable=%v", r.MaxSurge, r.MaxUnavailable)
	}
	for _, f := range []struct {
		field string
		got   any
		want  any
	}{
		// kube-apiserver's Service strategy leaves generation unset.
		{"service metadata.generation", svc.Generation, int64(0)},
		{"deployment spec.strategy.type", ds.Strategy.Type, appsv1.RollingUpdateDeploymentStrategyType},
		{"deployment spec.strategy.rollingUpdate", ru, "maxSurge=25% maxUnavailable=25%"},
		{"deployment spec.revisionHistoryLimit", deref(ds.RevisionHistoryLimit), int32(10)},
		{"deployment spec.progressDeadlineSeconds", deref(ds.ProgressDeadlineSeconds), int32(600)},
		{"pod template restartPolicy", ps.RestartPolicy, corev1.RestartPolicyAlways},
		{"pod template dnsPolicy", ps.DNSPolicy, corev1.DNSClusterFirst},
		{"pod template schedulerName", ps.SchedulerName, "default-scheduler"},
		{"pod template terminationGracePeriodSeconds", deref(ps.TerminationGracePeriodSeconds), int64(30)},
		{"pod template securityContext set", ps.SecurityContext != nil, true},
		{"container imagePullPolicy", c.ImagePullPolicy, corev1.PullIfNotPresent},
		{"container terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"container terminationMessagePolicy", c.TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"container ports[0].protocol", cport, "TCP"},
		{"service spec.type", svc.Spec.Type, corev1.ServiceTypeClusterIP},
		{"service spec.sessionAffinity", svc.Spec.SessionAffinity, corev1.ServiceAffinityNone},
		{"service spec.ports[0].protocol", sport, "TCP"},
		{"service spec.internalTrafficPolicy", deref(svc.Spec.InternalTrafficPolicy), corev1.ServiceInternalTrafficPolicyCluster},
		{"secret type", sec.Type, corev1.SecretTypeOpaque},
	} {
		if fmt.Sprint(f.got) != fmt.Sprint(f.want) {
			t.Errorf("%s = %q, want %q as kube-apiserver stores it", f.field, fmt.Sprint(f.got), fmt.Sprint(f.want))
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return "<unset>"
	}
	return *p
}

func testGetTable(t *testing.T, e *env) {
	tb := parseTable(t, e.k.ok(t, "get", "deployments", "-n", ns))
	tb.checkHeader(t, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
	row := tb.row(t, "NAME", deployName)
	checkRow(t, row, map[string]string{"READY": "0/2", "UP-TO-DATE": "0", "AVAILABLE": "0"})
	if !ageRE.MatchString(row["AGE"]) {
		t.Errorf("deployment AGE %q, want seconds", row["AGE"])
	}
	tb = parseTable(t, e.k.ok(t, "get", "deployments", "-n", ns, "-o", "wide"))
	tb.checkHeader(t, "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
	checkRow(t, tb.row(t, "NAME", deployName), map[string]string{"CONTAINERS": "web", "IMAGES": "nginx:1.25", "SELECTOR": "app=web"})

	var svc corev1.Service
	e.k.json(t, &svc, "get", "service", svcName, "-n", ns)
	clusterIP := svc.Spec.ClusterIP
	tb = parseTable(t, e.k.ok(t, "get", "services", "-n", ns))
	tb.checkHeader(t, "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE")
	checkRow(t, tb.row(t, "NAME", svcName), map[string]string{"TYPE": "ClusterIP", "CLUSTER-IP": clusterIP, "EXTERNAL-IP": "<none>", "PORT(S)": "80/TCP"})

	tb = parseTable(t, e.k.ok(t, "get", "configmaps", "-n", ns))
	tb.checkHeader(t, "NAME", "DATA", "AGE")
	checkRow(t, tb.row(t, "NAME", cmName), map[string]string{"DATA": "2"})

	tb = parseTable(t, e.k.ok(t, "get", "secrets", "-n", ns))
	tb.checkHeader(t, "NAME", "TYPE", "DATA", "AGE")
	checkRow(t, tb.row(t, "NAME", secretName), map[string]string{"TYPE": "Opaque", "DATA": "1"})

	tb = parseTable(t, e.k.ok(t, "get", "configmaps", "-n", ns, "--show-labels"))
	tb.checkHeader(t, "NAME", "DATA", "AGE", "LABELS")
	checkRow(t, tb.row(t, "NAME", cmName), map[string]string{"LABELS": "app=web"})
}
