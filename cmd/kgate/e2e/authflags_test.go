package e2e

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kgate/kgate/storage/storagetest"
)

const oidcIssuer = "https://oidc.example.com"

// TestAuthFlags runs kgate dev with an OIDC issuer and an audit policy
// given as flags, and the real kubectl with an ID token: whoami names the
// OIDC user, RBAC forbids what it was not granted, an expired token is
// 401, and the audit log has both the user's requests and the rejected
// one.
func TestAuthFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary; skipped under -short")
	}
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	jwksFile, policy, auditLog := filepath.Join(dir, "jwks.json"), filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, filepath.Join(dir, "data"),
		"--oidc-issuer-url", oidcIssuer, "--oidc-client-id", "kgate", "--oidc-jwks-file", jwksFile,
		"--oidc-groups-claim", "groups", "--oidc-groups-prefix", "oidc:",
		"--audit-policy-file", policy, "--audit-log-path", auditLog)

	sign := func(exp time.Time) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		claims := map[string]any{
			"iss": oidcIssuer, "aud": "kgate", "sub": "jane", "groups": []string{"devs"},
			"iat": exp.Add(-time.Hour).Unix(), "exp": exp.Unix(),
		}
		tok, err := jwt.Signed(signer).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	withToken := func(name, token string) *kubectl {
		cfg, err := clientcmd.LoadFromFile(s.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for n := range cfg.AuthInfos {
			cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{Token: token}
		}
		path := filepath.Join(dir, name+"-kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		return &kubectl{kubeconfig: path, cacheDir: filepath.Join(dir, name+"-cache")}
	}

	jane := withToken("jane", sign(time.Now().Add(time.Hour)))
	tb := parseTable(t, jane.ok(t, "auth", "whoami"))
	checkRow(t, tb.row(t, "ATTRIBUTE", "Username"), map[string]string{"VALUE": oidcIssuer + "#jane"})
	checkRow(t, tb.row(t, "ATTRIBUTE", "Groups"), map[string]string{"VALUE": "[oidc:devs system:authenticated]"})
	if r := jane.fails(t, "get", "pods", "-n", "default"); !strings.Contains(r.stderr, `User "`+oidcIssuer+`#jane" cannot list resource "pods"`) {
		t.Errorf("get pods as the OIDC user: %s", r)
	}
	expired := withToken("expired", sign(time.Now().Add(-time.Minute)))
	if r := expired.fails(t, "get", "pods", "-n", "default"); !strings.Contains(r.stderr, "the server has asked for the client to provide credentials") {
		t.Errorf("get pods with an expired token: %s", r)
	}

	// The audit log: the OIDC user's whoami, and the rejected requests
	// (kubectl's discovery, first) without a user.
	storagetest.Eventually(t, 10*time.Second, "the audit log", func() error {
		whoami, rejected := false, false
		for _, ev := range readAuditLog(t, auditLog) {
			if ev.User.Username == oidcIssuer+"#jane" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "selfsubjectreviews" && ev.Stage == auditv1.StageResponseComplete {
				whoami = true
			}
			if ev.User.Username == "" && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 401 && ev.Stage == auditv1.StageResponseStarted {
				rejected = true
			}
		}
		if whoami && rejected {
			return nil
		}
		return fmt.Errorf("audit log lacks the events (whoami %v, rejected %v)", whoami, rejected)
	})
}

func readAuditLog(t *testing.T, path string) []auditv1.Event {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}
