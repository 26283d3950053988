package dropin

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cachenodetest"
	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/storagetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const token = "dropin-admin-token"

// TestStoredBytes: kube-apiserver and kgate's storage on one etcd with
// one encryption configuration (Secrets under aescbc). A Secret and a
// ConfigMap kube-apiserver writes are read by kgate's store and by a
// cache node, and kgate encodes the decoded objects to the very bytes
// kube-apiserver stored; those kgate writes are read, updated and
// deleted by kube-apiserver.
func TestStoredBytes(t *testing.T) {
	bin := os.Getenv("KUBE_APISERVER_BIN")
	if bin == "" {
		t.Skip("KUBE_APISERVER_BIN not set: `make test-controlplane` builds kube-apiserver and runs this test")
	}
	dir := t.TempDir()
	encConfig := writeEncryptionConfig(t, dir)
	values, err := encryption.Load(t.Context(), encConfig)
	if err != nil {
		t.Fatal(err)
	}
	// etcd and a cache node that decrypts with the configuration.
	e := cachenodetest.Start(t, func(c *cachenode.Config) { c.Transformers = values })
	kas, err := kubernetes.NewForConfig(startKubeAPIServer(t, bin, dir, e.Etcd.Endpoints()[0], encConfig))
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.Open(backend.Config{Etcd: e.Etcd, Transformers: values, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx := t.Context()
	secrets, _ := b.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "secrets"})
	cms, _ := b.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	upstreamSecrets := upstreamTransformer(t, encConfig, schema.GroupResource{Resource: "secrets"})

	// kube-apiserver writes; kgate reads.
	var s1 *corev1.Secret
	storagetest.Eventually(t, time.Minute, "kube-apiserver creating a Secret in default", func() error {
		s1, err = kas.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "from-kas", Labels: map[string]string{"by": "kube-apiserver"}},
			Data:       map[string][]byte{"password": []byte("hunter2")},
		}, metav1.CreateOptions{})
		return err
	})
	c1, err := kas.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "from-kas"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sKey, cKey := secrets.Key("default", "from-kas"), cms.Key("default", "from-kas")
	raw := rawValue(t, e, sKey)
	if !strings.HasPrefix(string(raw), "k8s:enc:aescbc:v1:key1:") {
		t.Fatalf("kube-apiserver stored the Secret as %q", raw[:min(len(raw), 40)])
	}
	stored, _, err := upstreamSecrets.TransformFromStorage(ctx, raw, value.DefaultContext(sKey))
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Store.Get(ctx, secrets, "default", "from-kas", 0)
	if err != nil {
		t.Fatalf("kgate cannot read kube-apiserver's Secret: %v", err)
	}
	gs := got.(*corev1.Secret)
	if string(gs.Data["password"]) != "hunter2" || gs.UID != s1.UID || gs.ResourceVersion != s1.ResourceVersion {
		t.Fatalf("kgate read %+v %q, kube-apiserver wrote %+v", gs.ObjectMeta, gs.Data, s1.ObjectMeta)
	}
	gs.ResourceVersion = ""
	mine, err := b.Codec.EncodeProtobuf(gs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mine, stored) {
		t.Errorf("kgate encodes kube-apiserver's Secret differently:\nkube-apiserver %q\nkgate          %q", stored, mine)
	}
	if raw := rawValue(t, e, cKey); !bytes.HasPrefix(raw, []byte("k8s\x00")) {
		t.Errorf("kube-apiserver stored the ConfigMap as %q", raw)
	}
	gc, err := b.Store.Get(ctx, cms, "default", "from-kas", 0)
	if err != nil || gc.(*corev1.ConfigMap).Data["k"] != "v" || gc.(*corev1.ConfigMap).UID != c1.UID {
		t.Fatalf("kgate reads kube-apiserver's ConfigMap as %v, %v", gc, err)
	}
	// So does a cache node, serving JSON.
	rv, err := strconv.ParseInt(s1.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := e.Client.Get(ctx, "secrets", sKey, client.Read{ResourceVersion: rv, Match: "NotOlderThan"}, client.JSON)
	if err != nil {
		t.Fatalf("cache node: %v", err)
	}
	var served corev1.Secret
	if err := json.Unmarshal(obj.Data, &served); err != nil || string(served.Data["password"]) != "hunter2" {
		t.Fatalf("cache node serves %s, %v", obj.Data, err)
	}

	// kgate writes; kube-apiserver reads, updates and deletes.
	created, err := b.Store.Create(ctx, secrets, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "from-kgate", UID: "7d3c1a2b-0000-4000-8000-000000000001", CreationTimestamp: metav1.Now()},
		Data:       map[string][]byte{"token": []byte("s3cret")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if raw := rawValue(t, e, secrets.Key("default", "from-kgate")); !strings.HasPrefix(string(raw), "k8s:enc:aescbc:v1:key1:") || bytes.Contains(raw, []byte("s3cret")) {
		t.Fatalf("kgate stored the Secret as %q", raw[:min(len(raw), 40)])
	}
	ks, err := kas.CoreV1().Secrets("default").Get(ctx, "from-kgate", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kube-apiserver cannot read kgate's Secret: %v", err)
	}
	if string(ks.Data["token"]) != "s3cret" || ks.ResourceVersion != created.(*corev1.Secret).ResourceVersion {
		t.Fatalf("kube-apiserver reads kgate's Secret as %+v %q", ks.ObjectMeta, ks.Data)
	}
	ks.Labels = map[string]string{"updated": "by-kube-apiserver"}
	if _, err := kas.CoreV1().Secrets("default").Update(ctx, ks, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("kube-apiserver cannot update kgate's Secret: %v", err)
	}
	after, err := b.Store.Get(ctx, secrets, "default", "from-kgate", 0)
	if err != nil || after.(*corev1.Secret).Labels["updated"] != "by-kube-apiserver" {
		t.Fatalf("kgate reads the update as %v, %v", after, err)
	}
	if err := kas.CoreV1().Secrets("default").Delete(ctx, "from-kgate", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("kube-apiserver cannot delete kgate's Secret: %v", err)
	}
}

// writeEncryptionConfig encrypts Secrets with aescbc (identity after it,
// to read what was written before).
func writeEncryptionConfig(t *testing.T, dir string) string {
	t.Helper()
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	cfg := "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n" +
		"  - aescbc:\n      keys:\n      - name: key1\n        secret: " + secret + "\n  - identity: {}\n"
	path := filepath.Join(dir, "encryption.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func upstreamTransformer(t *testing.T, path string, gr schema.GroupResource) value.Transformer {
	t.Helper()
	cfg, err := encryptionconfig.LoadEncryptionConfig(t.Context(), path, false, "")
	if err != nil {
		t.Fatal(err)
	}
	return encryptionconfig.StaticTransformers(cfg.Transformers).TransformerForResource(gr)
}

func rawValue(t *testing.T, e *cachenodetest.Env, key string) []byte {
	t.Helper()
	resp, err := e.Etcd.Get(t.Context(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get %s: %v (%d keys)", key, err, len(resp.Kvs))
	}
	return resp.Kvs[0].Value
}

// startKubeAPIServer runs kube-apiserver on etcd (more flags in extra)
// and returns an admin client configuration of it once /readyz passes;
// its log goes to dir.
func startKubeAPIServer(t *testing.T, bin, dir, etcd, encConfig string, extra ...string) *rest.Config {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.key")
	if err := os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logPath := filepath.Join(dir, "kube-apiserver.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{
		"--etcd-servers", etcd, "--encryption-provider-config", encConfig,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port), "--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.96.0.0/12", "--endpoint-reconciler-type", "none"}, extra...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("kube-apiserver's log (%s), last lines:\n%s", logPath, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	cfg := &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(port), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 100, Burst: 100,
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 2*time.Minute, "kube-apiserver ready", func() error {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("kube-apiserver exited: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%v: %s", err, body)
		}
		return nil
	})
	return cfg
}
