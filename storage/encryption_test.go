package storage_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/encryption"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"
)

// encryptionConfig writes an EncryptionConfiguration: Secrets with aescbc
// (then aesgcm for reading), ConfigMaps with secretbox, everything else
// not encrypted.
func encryptionConfig(t *testing.T, first string) string {
	t.Helper()
	key := func(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }
	providers := map[string]string{
		"aescbc": "  - aescbc:\n      keys:\n      - name: key1\n        secret: " + key(1) + "\n",
		"aesgcm": "  - aesgcm:\n      keys:\n      - name: key2\n        secret: " + key(2) + "\n",
	}
	second := "aesgcm"
	if first == "aesgcm" {
		second = "aescbc"
	}
	cfg := "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n" +
		"- resources: [secrets]\n  providers:\n" + providers[first] + providers[second] + "  - identity: {}\n" +
		"- resources: [configmaps]\n  providers:\n  - secretbox:\n      keys:\n      - name: key3\n        secret: " + key(3) + "\n"
	path := filepath.Join(t.TempDir(), "encryption.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// upstream loads path with kube-apiserver's own loader, independently of
// kgate: what kube-apiserver would read and write with it.
func upstream(t *testing.T, path string, gr schema.GroupResource) value.Transformer {
	t.Helper()
	cfg, err := encryptionconfig.LoadEncryptionConfig(t.Context(), path, false, "")
	if err != nil {
		t.Fatal(err)
	}
	return encryptionconfig.StaticTransformers(cfg.Transformers).TransformerForResource(gr)
}

// TestEncryptionAtRest: values are encrypted as configured, readable by
// kube-apiserver's transformers; values kube-apiserver encrypted are read;
// a value encrypted with a provider other than the first is rewritten on
// update even when nothing changed; a resource not configured is stored
// in the clear.
func TestEncryptionAtRest(t *testing.T) {
	ctx := context.Background()
	path := encryptionConfig(t, "aescbc")
	tr, err := encryption.Load(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *storage.Config) { c.Transformers = tr })
	secrets, cms, pods := e.res("", "secrets"), e.res("", "configmaps"), e.pods()

	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"}, Data: map[string][]byte{"password": []byte("hunter2")}}
	e.create(secrets, sec)
	e.create(cms, configMap("default", "c", map[string]string{"k": "hunter2"}))
	e.create(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "hunter2"}}}})

	for _, c := range []struct {
		res    string
		key    string
		prefix string
	}{
		{"secrets", secrets.Key("default", "s"), "k8s:enc:aescbc:v1:key1:"},
		{"configmaps", cms.Key("default", "c"), "k8s:enc:secretbox:v1:key3:"},
	} {
		raw := e.raw(c.key)
		if !strings.HasPrefix(string(raw), c.prefix) || bytes.Contains(raw, []byte("hunter2")) {
			t.Errorf("%s stored as %q, want it encrypted under %s", c.res, raw, c.prefix)
			continue
		}
		// kube-apiserver's transformer, keyed by the full etcd key,
		// decrypts it to the protobuf it would have written.
		plain, stale, err := upstream(t, path, schema.GroupResource{Resource: c.res}).TransformFromStorage(ctx, raw, value.DefaultContext(c.key))
		if err != nil || stale {
			t.Fatalf("upstream cannot read kgate's %s: stale %v, %v", c.res, stale, err)
		}
		if !bytes.HasPrefix(plain, []byte("k8s\x00")) || !bytes.Contains(plain, []byte("hunter2")) {
			t.Errorf("%s decrypted to %q", c.res, plain)
		}
	}
	if raw := e.raw(pods.Key("default", "p")); !bytes.HasPrefix(raw, []byte("k8s\x00")) {
		t.Errorf("a Pod (not configured) stored as %q, want plain protobuf", raw)
	}

	// A Secret kube-apiserver wrote with the second provider (aesgcm,
	// whose authenticated data is the key) is read.
	key := secrets.Key("default", "old")
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "old", UID: "0b8b8a3e-6f3c-4a57-9a5e-2b2c2d2e2f30", CreationTimestamp: metav1.NewTime(t0)}, Data: map[string][]byte{"k": []byte("v")}}
	plain, err := e.codec.EncodeProtobuf(old)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := upstream(t, encryptionConfig(t, "aesgcm"), schema.GroupResource{Resource: "secrets"}).TransformToStorage(ctx, plain, value.DefaultContext(key))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(sealed), "k8s:enc:aesgcm:v1:key2:") {
		t.Fatalf("upstream sealed %q", sealed)
	}
	if _, err := e.client.Put(ctx, key, string(sealed)); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Get(ctx, secrets, "default", "old", 0)
	if err != nil || string(got.(*corev1.Secret).Data["k"]) != "v" {
		t.Fatalf("Get of kube-apiserver's aesgcm Secret = %v, %v", got, err)
	}
	// The same value under another key fails to authenticate: no object.
	moved := secrets.Key("default", "moved")
	if _, err := e.client.Put(ctx, moved, string(sealed)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Get(ctx, secrets, "default", "moved", 0); err == nil {
		t.Error("an aesgcm value moved to another key was read")
	}
	// An update changing nothing still rewrites a stale value, with the
	// first provider, as kube-apiserver does (storage migration).
	if _, err := e.store.Update(ctx, secrets, "default", "old", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) { return cur, nil }); err != nil {
		t.Fatal(err)
	}
	if raw := e.raw(key); !strings.HasPrefix(string(raw), "k8s:enc:aescbc:v1:key1:") {
		t.Errorf("stale value after a no-op update: %q", raw[:min(len(raw), 30)])
	}
	// Without the configuration, an encrypted value is refused rather
	// than read as garbage.
	plainStore := newEnv(t)
	if _, err := plainStore.client.Put(ctx, key, string(sealed)); err != nil {
		t.Fatal(err)
	}
	if _, err := plainStore.store.Get(ctx, secrets, "default", "old", 0); err == nil {
		t.Error("an encrypted value was read without the encryption configuration")
	}
}

func TestLoadRejectsBadConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - name: k\n        secret: c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := encryption.Load(context.Background(), path); err == nil {
		t.Error("a 5-byte aescbc key was accepted")
	}
	if _, err := encryption.Load(context.Background(), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file was accepted")
	}
}
