package dropin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
	clientv3 "go.etcd.io/etcd/client/v3"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// server is one of the two API servers as a test's client sees it.
type server struct {
	name string
	cs   kubernetes.Interface
	dyn  dynamic.Interface
}

// TestBesideKubeAPIServer: kgate dev and kube-apiserver on kgate dev's
// etcd with one encryption configuration. Pods, Deployments, Secrets
// (encrypted at rest) and a custom resource written through either
// server are read identically through the other, and a watch on either
// sees the other's writes.
func TestBesideKubeAPIServer(t *testing.T) {
	bin := os.Getenv("KUBE_APISERVER_BIN")
	if bin == "" {
		t.Skip("KUBE_APISERVER_BIN not set: `make test-controlplane` builds kube-apiserver and runs this test")
	}
	dir := t.TempDir()
	if d := os.Getenv("DROPIN_DIR"); d != "" {
		dir = d
	}
	encConfig := writeEncryptionConfig(t, dir)
	kg := startKgate(t, filepath.Join(dir, "kgate"), encConfig)
	in := filepath.Join(dir, "kgate", "internal")
	kas := startKubeAPIServer(t, bin, dir, kg.EtcdEndpoints()[0], encConfig,
		"--etcd-cafile", filepath.Join(in, "ca.crt"), "--etcd-certfile", filepath.Join(in, "gateway.crt"), "--etcd-keyfile", filepath.Join(in, "gateway.key"))
	kgRest, err := clientcmd.BuildConfigFromFlags("", kg.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	servers := [2]server{newServer(t, "kgate", kgRest), newServer(t, "kube-apiserver", kas)}
	ctx := t.Context()
	const ns = "dropin"
	if _, err := servers[1].cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kube-apiserver's ServiceAccount admission wants the Pods' account.
	if _, err := servers[0].cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	// Watches on both from now on: each must see every write below.
	watches := [2]watch.Interface{}
	for i, s := range servers {
		list, err := s.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if watches[i], err = s.cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion}); err != nil {
			t.Fatal(err)
		}
		defer watches[i].Stop()
	}

	for i, writer := range servers {
		reader := servers[1-i]
		t.Run("written by "+writer.name, func(t *testing.T) {
			suffix := strings.ReplaceAll(writer.name, "-", "")
			pod, err := writer.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p-" + suffix, Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := reader.cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{ResourceVersion: pod.ResourceVersion})
			same(t, "Pod", pod, got, err)

			dep, err := writer.cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "d-" + suffix},
				Spec: appsv1.DeploymentSpec{
					Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
					},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gotDep, err := reader.cs.AppsV1().Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{ResourceVersion: dep.ResourceVersion})
			same(t, "Deployment", dep, gotDep, err)

			sec, err := writer.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "s-" + suffix}, Data: map[string][]byte{"password": []byte("hunter2")},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := kg.EtcdClient().Get(ctx, "/registry/secrets/"+ns+"/"+sec.Name)
			if err != nil || len(resp.Kvs) != 1 || !strings.HasPrefix(string(resp.Kvs[0].Value), "k8s:enc:aescbc:v1:key1:") {
				t.Fatalf("%s's Secret in etcd: %v, %v", writer.name, resp, err)
			}
			gotSec, err := reader.cs.CoreV1().Secrets(ns).Get(ctx, sec.Name, metav1.GetOptions{ResourceVersion: sec.ResourceVersion})
			same(t, "Secret", sec, gotSec, err)

			cm, err := writer.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "c-" + suffix}, Data: map[string]string{"by": writer.name},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for j, w := range watches {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatalf("the watch on %s ended", servers[j].name)
					}
					got, isCM := ev.Object.(*corev1.ConfigMap)
					if ev.Type != watch.Added || !isCM {
						t.Fatalf("the watch on %s: %s %T, want ADDED of %s", servers[j].name, ev.Type, ev.Object, cm.Name)
					}
					same(t, "watched ConfigMap on "+servers[j].name, cm, got, nil)
				case <-time.After(30 * time.Second):
					t.Fatalf("the watch on %s did not see %s's ConfigMap", servers[j].name, writer.name)
				}
			}
		})
	}

	t.Run("mutating admission policy", func(t *testing.T) {
		// One policy in etcd, run by both servers' admission: the objects
		// each creates come out mutated alike.
		pol := &admissionregistrationv1.MutatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "dropin-tier"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
					},
				}}},
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "m", Expression: "object.metadata.name.startsWith('m-')"}},
				Variables:       []admissionregistrationv1.Variable{{Name: "tier", Expression: "'gold'"}},
				Mutations: []admissionregistrationv1.Mutation{
					{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
						Expression: `Object{metadata: Object.metadata{labels: {"tier": variables.tier}}, data: {"added": "yes"}}`}},
					{PatchType: admissionregistrationv1.PatchTypeJSONPatch, JSONPatch: &admissionregistrationv1.JSONPatch{
						Expression: `[JSONPatch{op: "add", path: "/metadata/annotations", value: {"keys": string(size(object.data))}}]`}},
				},
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			},
		}
		if _, err := servers[0].cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := servers[0].cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "dropin-tier"}, Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "dropin-tier"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var results [2]*corev1.ConfigMap
		for i, s := range servers {
			// Each server follows the policy objects on its own: probe
			// until it mutates, then compare a fresh object.
			probe := 0
			storagetest.Eventually(t, time.Minute, s.name+" applying the policy", func() error {
				probe++
				cm, err := s.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-probe-%d-%d", i, probe)}, Data: map[string]string{"k": "v"},
				}, metav1.CreateOptions{})
				if err != nil {
					return err
				}
				if cm.Labels["tier"] != "gold" {
					return fmt.Errorf("not mutated: %v", cm.Labels)
				}
				return nil
			})
			cm, err := s.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "m-" + strings.ReplaceAll(s.name, "-", ""), Labels: map[string]string{"app": "x"}}, Data: map[string]string{"k": "v"},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			results[i] = cm
		}
		for i, cm := range results {
			want := map[string]string{"app": "x", "tier": "gold"}
			if d := cmp.Diff(want, cm.Labels); d != "" {
				t.Errorf("%s's labels (-want +got):\n%s", servers[i].name, d)
			}
			if d := cmp.Diff(map[string]string{"keys": "2"}, cm.Annotations); d != "" {
				t.Errorf("%s's annotations (-want +got):\n%s", servers[i].name, d)
			}
			if d := cmp.Diff(map[string]string{"k": "v", "added": "yes"}, cm.Data); d != "" {
				t.Errorf("%s's data (-want +got):\n%s", servers[i].name, d)
			}
		}
	})

	t.Run("custom resource", func(t *testing.T) {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "gizmos.dropin.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "dropin.example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
						},
					}},
				}},
			},
		}
		ext, err := apiextensionsclient.NewForConfig(kgRest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: "dropin.example.com", Version: "v1", Resource: "gizmos"}
		for i, writer := range servers {
			reader := servers[1-i]
			name := "g-" + strings.ReplaceAll(writer.name, "-", "")
			var cr *unstructured.Unstructured
			// Each server serves the resource once it has seen the CRD
			// established.
			storagetest.Eventually(t, time.Minute, writer.name+" creating a Gizmo", func() error {
				cr, err = writer.dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "dropin.example.com/v1", "kind": "Gizmo",
					"metadata": map[string]any{"name": name}, "spec": map[string]any{"size": int64(3)},
				}}, metav1.CreateOptions{})
				return err
			})
			var got *unstructured.Unstructured
			storagetest.Eventually(t, time.Minute, reader.name+" reading "+writer.name+"'s Gizmo", func() error {
				got, err = reader.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				return err
			})
			if d := cmp.Diff(cr.Object, got.Object); d != "" {
				t.Errorf("%s reads %s's Gizmo differently (-written +read):\n%s", reader.name, writer.name, d)
			}
		}
	})

	t.Run("every value in etcd", func(t *testing.T) { checkEveryValue(t, kg, encConfig) })
}

// storedKind is the kind a stored value carries: the protobuf envelope's
// type, or a JSON value's apiVersion and kind.
func storedKind(value []byte) (schema.GroupVersionKind, error) {
	var tm runtime.TypeMeta
	if codec.IsProtobuf(value) {
		var u runtime.Unknown
		if err := u.Unmarshal(value[4:]); err != nil {
			return schema.GroupVersionKind{}, err
		}
		tm = u.TypeMeta
	} else if err := json.Unmarshal(value, &tm); err != nil {
		return schema.GroupVersionKind{}, err
	}
	return schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind), nil
}

// checkEveryValue decodes every built-in object in etcd — what
// kube-apiserver's and kgate's bootstraps and the test wrote — with
// kgate's storage kinds, and reports the values stored in another
// version than kgate's: kube-apiserver stores CRDs as v1beta1 (read
// through their internal version); any other would be a kind kgate
// could not read from a cluster kube-apiserver ran.
func checkEveryValue(t *testing.T, kg *devcluster.Cluster, encConfig string) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	table, err := ranges.Default(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := codec.New(reg.Scheme())
	values, err := encryption.Load(t.Context(), encConfig)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := kg.EtcdClient().Get(t.Context(), "/registry/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	decoded := map[string]int{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		rng, ok := table.Lookup(key)
		if !ok {
			continue // not a resource's key (allocations, leases of the endpoint reconciler, custom resources)
		}
		res := rng.Resource
		data, _, err := values.FromStorage(t.Context(), res.GVR().GroupResource(), key, kv.Value)
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		obj, err := reg.NewStored(res)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Decode(data, obj); err != nil {
			t.Errorf("%s: kgate cannot decode it: %v", key, err)
			continue
		}
		gvk, err := storedKind(data)
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		if gvk != res.StorageGVK() && gvk != (schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1beta1", Kind: "CustomResourceDefinition"}) {
			t.Errorf("%s is stored as %v, kgate stores %v", key, gvk, res.StorageGVK())
		}
		decoded[res.GVR().GroupResource().String()]++
	}
	if len(decoded) < 20 {
		t.Errorf("decoded only %v", decoded)
	}
	t.Logf("decoded %d kinds of stored objects: %v", len(decoded), decoded)
}

func newServer(t *testing.T, name string, cfg *rest.Config) server {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return server{name: name, cs: cs, dyn: dyn}
}

// same fails t unless got, read with err, is want.
func same(t *testing.T, what string, want, got any, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("%s read differently (-written +read):\n%s", what, cmp.Diff(want, got))
	}
}

// startKgate runs kgate dev in the test process with the encryption
// configuration; its etcd requires the internal plane's client
// certificates (kube-apiserver gets the gateway's).
func startKgate(t *testing.T, dir, encConfig string) *devcluster.Cluster {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	c, err := devcluster.Start(t.Context(), devcluster.Config{
		DataDir: dir, Listen: listen, UnsafeNoFsync: true, EncryptionProviderConfig: encConfig,
		Logger: slog.New(slog.NewTextHandler(logFile(t, filepath.Join(filepath.Dir(dir), "kgate.log")), nil)),
	})
	if err != nil {
		t.Fatalf("cannot start kgate dev: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("kgate dev: %v", err)
		}
	})
	return c
}

func logFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(path)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s, last lines:\n%s", path, strings.Join(lines[max(0, len(lines)-8):], "\n"))
		}
	})
	return f
}
