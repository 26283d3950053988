package ipalloc

import (
	"bytes"
	"encoding/base64"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestEncryptedAddresses: with ipaddresses.networking.k8s.io under
// aescbc, the IPAddress values are stored encrypted, and a collision
// reads the holder back through the decryption.
func TestEncryptedAddresses(t *testing.T) {
	storagetest.CheckGoroutines(t)
	client := storagetest.StartEtcd(t)
	ctx := testContext(t)
	path := filepath.Join(t.TempDir(), "encryption.yaml")
	cfg := "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [ipaddresses.networking.k8s.io]\n  providers:\n" +
		"  - aescbc:\n      keys:\n      - name: k\n        secret: " + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32)) + "\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	values, err := encryption.Load(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Client: client, CIDR: "10.96.0.0/24", Logger: storagetest.Logger(t), Transformers: values})
	if err != nil {
		t.Fatal(err)
	}
	ip, err := a.Allocate(ctx, "team", "api")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(ctx, KeyPrefix+ip)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("cannot read %s%s: %v", KeyPrefix, ip, err)
	}
	if v := string(resp.Kvs[0].Value); !strings.HasPrefix(v, "k8s:enc:aescbc:v1:k:") || strings.Contains(v, "team") {
		t.Fatalf("stored value %q is not encrypted", v)
	}
	held, err := a.create(ctx, netip.MustParseAddr(ip), "other", "svc")
	if err != nil {
		t.Fatal(err)
	}
	if held == nil || held.Spec.ParentRef == nil || held.Spec.ParentRef.Namespace != "team" || held.Spec.ParentRef.Name != "api" {
		t.Fatalf("the holder of %s read back as %+v", ip, held)
	}
}
