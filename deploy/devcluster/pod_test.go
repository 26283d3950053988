package devcluster_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/deploy/devcluster"
)

// fullPod is a Pod using much of the schema, with every default
// kube-apiserver's defaulting and default admission (ServiceAccount,
// DefaultTolerationSeconds, Priority) would add already set, so that a
// faithful server returns it unchanged apart from what it sets itself.
func fullPod(ns, name string) *corev1.Pod {
	probe := func(h corev1.ProbeHandler, delay int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: h, InitialDelaySeconds: delay, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	}
	resizeDefaults := []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      map[string]string{"app": "web", "tier": "frontend", "example.com/team": "kgate"},
			Annotations: map[string]string{"example.com/note": "round trip", "example.com/json": `{"a":[1,2,3],"b":"ü"}`},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"},
					Items:                []corev1.KeyToPath{{Key: "a", Path: "a.conf"}},
					DefaultMode:          ptr.To[int32](0o644),
				}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-tls", DefaultMode: ptr.To[int32](0o400), Optional: ptr.To(true)}}},
			},
			Containers: []corev1.Container{
				{
					Name: "web", Image: "nginx:1.27.3",
					Args:  []string{"-g", "daemon off;"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
					Env: []corev1.EnvVar{
						{Name: "MODE", Value: "production"},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
						{Name: "MEM_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "web", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
					},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					},
					ResizePolicy: resizeDefaults,
					VolumeMounts: []corev1.VolumeMount{
						{Name: "scratch", MountPath: "/tmp"},
						{Name: "config", MountPath: "/etc/web", ReadOnly: true},
					},
					LivenessProbe:            probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}}, 5),
					ReadinessProbe:           probe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, 0),
					TerminationMessagePath:   corev1.TerminationMessagePathDefault,
					TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy:          corev1.PullIfNotPresent,
				},
				{
					Name: "sidecar", Image: "busybox:1.36",
					Command: []string{"sh", "-c", "touch /tmp/ready; sleep 3600"},
					Env: []corev1.EnvVar{
						{Name: "A", Value: "1"},
						{Name: "FROM_CONFIG", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}, Key: "a", Optional: ptr.To(true)}}},
					},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					},
					ResizePolicy:             resizeDefaults,
					VolumeMounts:             []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}},
					StartupProbe:             probe(corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}}, 1),
					TerminationMessagePath:   corev1.TerminationMessagePathDefault,
					TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					ImagePullPolicy:          corev1.PullIfNotPresent,
					SecurityContext: &corev1.SecurityContext{
						Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						ReadOnlyRootFilesystem:   ptr.To(true),
						AllowPrivilegeEscalation: ptr.To(false),
					},
				},
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
			ServiceAccountName:            "default",
			DeprecatedServiceAccount:      "default",
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000)},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Priority:           ptr.To[int32](0),
			EnableServiceLinks: ptr.To(true),
			PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
		},
	}
}

// podStatus is a status as a kubelet writes it.
func podStatus(ip string, start time.Time) corev1.PodStatus {
	t := metav1.NewTime(start.UTC().Truncate(time.Second))
	running := func(name, image, id string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: name, Ready: true, RestartCount: 0, Image: image, ImageID: "docker.io/library/" + image + "@sha256:" + id,
			ContainerID: "containerd://" + id, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
		}
	}
	return corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t},
		},
		HostIP: "10.0.0.7", HostIPs: []corev1.HostIP{{IP: "10.0.0.7"}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &t,
		ContainerStatuses: []corev1.ContainerStatus{
			running("sidecar", "busybox:1.36", "4f1c6e7f0b2d8c4a5e9d0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e"),
			running("web", "nginx:1.27.3", "9a8b7c6d5e4f30211f2e3d4c5b6a79880a1b2c3d4e5f60718293a4b5c6d7e8f9"),
		},
		QOSClass: corev1.PodQOSBurstable,
	}
}

// podCmp compares API objects: quantities by value and form, times by
// instant.
var podCmp = []cmp.Option{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 && a.String() == b.String() }),
	cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) }),
}

// serverSet ignores what kube-apiserver sets on create.
var serverSet = []cmp.Option{
	cmpopts.IgnoreFields(metav1.ObjectMeta{}, "UID", "ResourceVersion", "CreationTimestamp", "Generation", "ManagedFields"),
	cmpopts.IgnoreFields(corev1.Pod{}, "Status"),
}

func diffPods(want, got *corev1.Pod, opts ...cmp.Option) string {
	return cmp.Diff(want, got, append(append([]cmp.Option(nil), podCmp...), opts...)...)
}

// TestPodRoundTrip creates a full Pod with a typed client and reads it
// back in protobuf and JSON (get, list, watch).
func TestPodRoundTrip(t *testing.T) {
	c := cluster(t)
	for _, format := range []string{"protobuf", "json"} {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			ns := uniqueNS("roundtrip-" + format)
			var w wire
			writer := clientset(t, c, format == "json", &w)
			readers := map[string]kubernetes.Interface{"protobuf": clientset(t, c, false, &w), "json": clientset(t, c, true, &w)}
			ensureNamespace(t, writer, ns)
			sent := fullPod(ns, "web-0")
			created, err := writer.CoreV1().Pods(ns).Create(ctx, sent.DeepCopy(), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if d := diffPods(sent, created, serverSet...); d != "" {
				t.Errorf("created Pod differs from the one sent beyond server-set fields (-sent +created):\n%s", d)
			}
			if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
				t.Errorf("create did not set uid/resourceVersion/creationTimestamp: %q %q %v", created.UID, created.ResourceVersion, created.CreationTimestamp)
			}
			if created.Status.Phase != corev1.PodPending || created.Status.QOSClass != corev1.PodQOSBurstable {
				t.Errorf("created status = phase %q qos %q, want Pending Burstable", created.Status.Phase, created.Status.QOSClass)
			}
			key := "/registry/pods/" + ns + "/web-0"
			kv, err := c.EtcdClient().Get(ctx, key)
			if err != nil || len(kv.Kvs) != 1 {
				t.Fatalf("etcd %s: %v %v", key, kv, err)
			}
			if rv := strconv.FormatInt(kv.Kvs[0].ModRevision, 10); rv != created.ResourceVersion {
				t.Errorf("created resourceVersion %s, etcd mod revision %s", created.ResourceVersion, rv)
			}

			for rf, rc := range readers {
				pods := rc.CoreV1().Pods(ns)
				for _, rv := range []string{"", "0"} {
					got, err := pods.Get(ctx, "web-0", metav1.GetOptions{ResourceVersion: rv})
					if err != nil {
						t.Fatalf("get (%s, rv=%q): %v", rf, rv, err)
					}
					if d := diffPods(created, got); d != "" {
						t.Errorf("get (%s, rv=%q) differs from create's answer (-created +got):\n%s", rf, rv, d)
					}
				}
				list, err := pods.List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatalf("list (%s): %v", rf, err)
				}
				if len(list.Items) != 1 {
					t.Fatalf("list (%s): %d items, want 1", rf, len(list.Items))
				}
				if d := diffPods(created, &list.Items[0]); d != "" {
					t.Errorf("list (%s) item differs (-created +got):\n%s", rf, d)
				}
				if lrv, _ := strconv.ParseInt(list.ResourceVersion, 10, 64); lrv < kv.Kvs[0].ModRevision {
					t.Errorf("list (%s) resourceVersion %s older than the pod's %d", rf, list.ResourceVersion, kv.Kvs[0].ModRevision)
				}
				// A watch from rv "0" starts with the state.
				wi, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
				if err != nil {
					t.Fatalf("watch (%s): %v", rf, err)
				}
				ev := nextEvent(t, wi)
				wi.Stop()
				if ev.Type != watch.Added {
					t.Errorf("watch (%s) from 0: first event %s, want ADDED", rf, ev.Type)
				} else if d := diffPods(created, ev.Object.(*corev1.Pod)); d != "" {
					t.Errorf("watch (%s) ADDED differs (-created +got):\n%s", rf, d)
				}
			}

			// Watch changes from create's revision in both formats.
			watchers := map[string]watch.Interface{}
			for rf, rc := range readers {
				wi, err := rc.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion, FieldSelector: fields.OneTermEqualSelector("metadata.name", "web-0").String()})
				if err != nil {
					t.Fatalf("watch (%s): %v", rf, err)
				}
				defer wi.Stop()
				watchers[rf] = wi
			}
			upd := created.DeepCopy()
			upd.Labels["version"] = "2"
			upd.Annotations["example.com/note"] = "updated"
			updated, err := writer.CoreV1().Pods(ns).Update(ctx, upd, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if d := diffPods(upd, updated, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion", "ManagedFields")); d != "" {
				t.Errorf("updated Pod differs from the one sent (-sent +updated):\n%s", d)
			}
			if err := writer.CoreV1().Pods(ns).Delete(ctx, "web-0", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			urv, _ := strconv.ParseInt(updated.ResourceVersion, 10, 64)
			drv := deleteRevision(t, c, key, urv)
			deleted := updated.DeepCopy()
			deleted.ResourceVersion = strconv.FormatInt(drv, 10)
			for rf, wi := range watchers {
				ev := nextEvent(t, wi)
				if ev.Type != watch.Modified {
					t.Errorf("watch (%s): event %s, want MODIFIED", rf, ev.Type)
				} else if d := diffPods(updated, ev.Object.(*corev1.Pod)); d != "" {
					t.Errorf("watch (%s) MODIFIED differs (-updated +got):\n%s", rf, d)
				}
				ev = nextEvent(t, wi)
				if ev.Type != watch.Deleted {
					t.Errorf("watch (%s): event %s, want DELETED", rf, ev.Type)
				} else if d := diffPods(deleted, ev.Object.(*corev1.Pod)); d != "" {
					t.Errorf("watch (%s) DELETED differs (-want +got):\n%s", rf, d)
				}
			}
			checkWireFormat(t, w.all())
		})
	}
}

func nextEvent(t *testing.T, wi watch.Interface) watch.Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-wi.ResultChan():
			if !ok {
				t.Fatalf("watch ended")
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", ev.Object)
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("no watch event in 10s")
		}
	}
}

// storedPod is a Pod as kube-apiserver stores it: defaulted, uid and
// creationTimestamp set, no resourceVersion, a kubelet's status.
func storedPod(ns, name, ip string) *corev1.Pod {
	p := fullPod(ns, name)
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.UID = "6c9b1f0e-1d2a-4b3c-8d4e-5f60718293a4"
	p.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	p.Generation = 1
	p.Spec.NodeName = "node-1"
	p.Status = podStatus(ip, p.CreationTimestamp.Time)
	return p
}

// putProtobuf writes obj to key as kube-apiserver does ("k8s\x00" and a
// runtime.Unknown envelope, apimachinery's protobuf serializer) and
// returns the mod revision.
func putProtobuf(t *testing.T, c *devcluster.Cluster, key string, p *corev1.Pod) int64 {
	t.Helper()
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(p, &buf); err != nil {
		t.Fatalf("cannot encode pod: %v", err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("k8s\x00")) {
		t.Fatalf("encoded pod lacks the k8s magic")
	}
	resp, err := c.EtcdClient().Put(context.Background(), key, buf.String())
	if err != nil {
		t.Fatalf("cannot put %s: %v", key, err)
	}
	return resp.Header.Revision
}

// served is p as the API must serve it: typed clients drop the TypeMeta.
func served(p *corev1.Pod, rev int64) *corev1.Pod {
	p = p.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{}
	p.ResourceVersion = strconv.FormatInt(rev, 10)
	return p
}

// TestPodStoredAsProtobuf serves Pods that kube-apiserver wrote to etcd:
// one written before the cluster (re)starts, one while it runs.
func TestPodStoredAsProtobuf(t *testing.T) {
	cluster(t) // skips under -short
	dir := t.TempDir()
	c, err := startCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "stored"
	before := storedPod(ns, "before", "10.1.0.1")
	revBefore := putProtobuf(t, c, "/registry/pods/"+ns+"/before", before)
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Restart on the same data: the cache node lists the stored Pod.
	if c, err = startCluster(dir); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		os.RemoveAll(dir)
	}()
	ctx := context.Background()
	var w wire
	clients := map[string]kubernetes.Interface{"protobuf": clientset(t, c, false, &w), "json": clientset(t, c, true, &w)}
	check := func(step string, want map[string]*corev1.Pod) {
		t.Helper()
		for rf, cs := range clients {
			pods := cs.CoreV1().Pods(ns)
			for name, p := range want {
				// Consistent reads need no retry: the gateway waits for
				// the cache to reach etcd's revision.
				for _, rv := range []string{"", "0"} {
					if rv == "0" && step != "before" {
						continue // rv=0 may lag by design
					}
					got, err := pods.Get(ctx, name, metav1.GetOptions{ResourceVersion: rv})
					if err != nil {
						t.Errorf("%s: get %s (%s, rv=%q): %v", step, name, rf, rv, err)
						continue
					}
					if d := diffPods(p, got); d != "" {
						t.Errorf("%s: get %s (%s, rv=%q) (-want +got):\n%s", step, name, rf, rv, d)
					}
				}
			}
			list, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("%s: list (%s): %v", step, rf, err)
			}
			got := map[string]*corev1.Pod{}
			for i := range list.Items {
				got[list.Items[i].Name] = &list.Items[i]
			}
			if d := cmp.Diff(want, got, podCmp...); d != "" {
				t.Errorf("%s: list (%s) (-want +got):\n%s", step, rf, d)
			}
		}
	}
	check("before", map[string]*corev1.Pod{"before": served(before, revBefore)})

	after := storedPod(ns, "after", "10.1.0.2")
	after.UID = "0d1e2f30-4152-6374-8596-a7b8c9d0e1f2"
	revAfter := putProtobuf(t, c, "/registry/pods/"+ns+"/after", after)
	check("after", map[string]*corev1.Pod{"before": served(before, revBefore), "after": served(after, revAfter)})

	// Watches: from 0 the state as ADDED; from revAfter the changes
	// kube-apiserver makes in etcd.
	for rf, cs := range clients {
		wi, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatalf("watch (%s): %v", rf, err)
		}
		got := map[string]*corev1.Pod{}
		for range 2 {
			ev := nextEvent(t, wi)
			if ev.Type != watch.Added {
				t.Errorf("watch (%s) from 0: %s, want ADDED", rf, ev.Type)
				continue
			}
			p := ev.Object.(*corev1.Pod)
			got[p.Name] = p
		}
		wi.Stop()
		want := map[string]*corev1.Pod{"before": served(before, revBefore), "after": served(after, revAfter)}
		if d := cmp.Diff(want, got, podCmp...); d != "" {
			t.Errorf("watch (%s) from 0 (-want +got):\n%s", rf, d)
		}
	}
	watchers := map[string]watch.Interface{}
	for rf, cs := range clients {
		wi, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(revAfter, 10)})
		if err != nil {
			t.Fatalf("watch (%s): %v", rf, err)
		}
		defer wi.Stop()
		watchers[rf] = wi
	}
	changed := after.DeepCopy()
	changed.Labels["version"] = "2"
	changed.Status.ContainerStatuses[0].RestartCount = 1
	revChanged := putProtobuf(t, c, "/registry/pods/"+ns+"/after", changed)
	del, err := c.EtcdClient().Delete(ctx, "/registry/pods/"+ns+"/before")
	if err != nil || del.Deleted != 1 {
		t.Fatalf("etcd delete: %v %v", del, err)
	}
	revDeleted := del.Header.Revision
	for rf, wi := range watchers {
		ev := nextEvent(t, wi)
		if ev.Type != watch.Modified {
			t.Errorf("watch (%s): %s, want MODIFIED", rf, ev.Type)
		} else if d := diffPods(served(changed, revChanged), ev.Object.(*corev1.Pod)); d != "" {
			t.Errorf("watch (%s) MODIFIED (-want +got):\n%s", rf, d)
		}
		ev = nextEvent(t, wi)
		if ev.Type != watch.Deleted {
			t.Errorf("watch (%s): %s, want DELETED", rf, ev.Type)
		} else if d := diffPods(served(before, revDeleted), ev.Object.(*corev1.Pod)); d != "" {
			t.Errorf("watch (%s) DELETED (-want +got):\n%s", rf, d)
		}
	}
	check("changed", map[string]*corev1.Pod{"after": served(changed, revChanged)})
}
