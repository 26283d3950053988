package authtrust

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/storagetest"
)

// newCA returns a self-signed CA certificate valid until notAfter, PEM.
func newCA(t *testing.T, cn string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
}

// TestSync: the ConfigMap is created with upstream's keys; a second
// server's settings already there (another CA, another header) are kept
// and merged, an expired CA is dropped, and a pass that changes nothing
// writes nothing.
func TestSync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	b, err := backend.Open(backend.Config{Etcd: storagetest.StartEtcd(t), Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	now := time.Now()
	clientCA, proxyCA := newCA(t, "client-ca", now.Add(time.Hour)), newCA(t, "front-proxy-ca", now.Add(time.Hour))
	info := Info{
		ClientCAFile: writeFile(t, "client.pem", clientCA), RequestHeaderCAFile: writeFile(t, "proxy.pem", proxyCA),
		AllowedNames: []string{"front-proxy-client"}, UsernameHeaders: []string{"X-Remote-User"},
		GroupHeaders: []string{"X-Remote-Group"}, ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
	}
	c, err := New(Config{Store: b.Store, Registry: b.Registry, Logger: storagetest.Logger(t), Info: info})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, _ := b.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("configmaps"))
	get := func() *corev1.ConfigMap {
		t.Helper()
		obj, err := b.Store.Get(ctx, res, Namespace, Name, 0)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.ConfigMap)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"client-ca-file": string(clientCA), "requestheader-client-ca-file": string(proxyCA),
		"requestheader-allowed-names": `["front-proxy-client"]`, "requestheader-username-headers": `["X-Remote-User"]`,
		"requestheader-group-headers": `["X-Remote-Group"]`, "requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	}
	if got := get().Data; !reflect.DeepEqual(got, want) {
		t.Errorf("data\n%v\nwant\n%v", got, want)
	}

	// Another server's settings, and an expired CA, are in the ConfigMap.
	otherCA, expiredCA := newCA(t, "other-client-ca", now.Add(time.Hour)), newCA(t, "expired", now.Add(-time.Hour))
	if _, err := b.Store.Update(ctx, res, Namespace, Name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		cm := cur.(*corev1.ConfigMap).DeepCopy()
		cm.Data["client-ca-file"] = string(otherCA) + string(expiredCA)
		cm.Data["requestheader-username-headers"] = `["X-Other-User"]`
		cm.Data["requestheader-uid-headers"] = `["X-Other-Uid"]`
		return cm, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	merged := get()
	want["client-ca-file"] = string(otherCA) + string(clientCA)
	want["requestheader-username-headers"] = `["X-Other-User","X-Remote-User"]`
	want["requestheader-uid-headers"] = `["X-Other-Uid"]`
	if !reflect.DeepEqual(merged.Data, want) {
		t.Errorf("merged data\n%v\nwant\n%v", merged.Data, want)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if again := get(); again.ResourceVersion != merged.ResourceVersion {
		t.Errorf("a pass with nothing to change wrote the configmap (resourceVersion %s -> %s)", merged.ResourceVersion, again.ResourceVersion)
	}
}

// TestNoRequestHeader: without a front-proxy CA only client-ca-file is
// written, as upstream.
func TestMergedWithoutRequestHeader(t *testing.T) {
	c := &Controller{cfg: Config{Now: time.Now}}
	ca := newCA(t, "client-ca", time.Now().Add(time.Hour))
	certs, err := parseCerts(ca)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.merged(nil, settings{clientCA: certs, username: []string{"X-Remote-User"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"client-ca-file": string(ca)}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
