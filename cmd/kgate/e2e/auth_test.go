package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kgate/kgate/storage/storagetest"
)

// testAuth: kubectl auth can-i and whoami as the admin, then as a service
// account with a TokenRequest token (kubectl create token) that is bound
// to "view" in one namespace: it may list there and is forbidden
// elsewhere; impersonation (--as) gives the same answers.
func testAuth(t *testing.T, e *env) {
	const authNS, sa = "e2e-auth", "reader"
	saUser := "system:serviceaccount:" + authNS + ":" + sa
	t.Run("admin can-i", func(t *testing.T) {
		if out := e.k.ok(t, "auth", "can-i", "create", "pods", "-n", ns); out != "yes\n" {
			t.Errorf("auth can-i create pods = %q, want yes", out)
		}
		out := e.k.ok(t, "auth", "can-i", "--list", "-n", ns)
		if !strings.Contains(out, "*.*") {
			t.Errorf("auth can-i --list as admin lacks *.*:\n%s", out)
		}
	})
	e.k.ok(t, "create", "namespace", authNS)
	e.k.ok(t, "create", "serviceaccount", sa, "-n", authNS)
	token := strings.TrimSpace(e.k.ok(t, "create", "token", sa, "-n", authNS, "--duration", "20m"))
	if strings.Count(token, ".") != 2 {
		t.Fatalf("kubectl create token printed %q, want a JWT", token)
	}
	// A kubeconfig with only the token (the admin's has a client
	// certificate, which would win).
	cfg, err := clientcmd.LoadFromFile(e.srv.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name := range cfg.AuthInfos {
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	}
	path := filepath.Join(e.scratch, "sa-kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	k := &kubectl{kubeconfig: path, cacheDir: filepath.Join(e.scratch, "sa-kubectl-cache")}
	t.Run("whoami with a TokenRequest token", func(t *testing.T) {
		tb := parseTable(t, k.ok(t, "auth", "whoami"))
		tb.checkHeader(t, "ATTRIBUTE", "VALUE")
		checkRow(t, tb.row(t, "ATTRIBUTE", "Username"), map[string]string{"VALUE": saUser})
		checkRow(t, tb.row(t, "ATTRIBUTE", "Groups"), map[string]string{"VALUE": "[system:serviceaccounts system:serviceaccounts:" + authNS + " system:authenticated]"})
	})
	t.Run("view in one namespace", func(t *testing.T) {
		if r := k.fails(t, "auth", "can-i", "list", "pods", "-n", authNS); r.stdout != "no\n" {
			t.Errorf("can-i before the binding: %s", r)
		}
		e.k.ok(t, "create", "rolebinding", "reader-view", "-n", authNS, "--clusterrole", "view", "--serviceaccount", authNS+":"+sa)
		storagetest.Eventually(t, 15*time.Second, "the binding applies", func() error {
			if r := k.run("auth", "can-i", "list", "pods", "-n", authNS); r.err != nil || r.stdout != "yes\n" {
				return fmt.Errorf("the binding never applied: %s", r)
			}
			return nil
		})
		if out := k.ok(t, "get", "configmaps", "-n", authNS, "-o", "name"); out != "" {
			t.Errorf("get configmaps in %s: %q", authNS, out)
		}
		r := k.fails(t, "get", "pods", "-n", ns)
		want := `Error from server (Forbidden): pods is forbidden: User "` + saUser + `" cannot list resource "pods" in API group "" in the namespace "` + ns + `"`
		if strings.TrimSpace(r.stderr) != want {
			t.Errorf("get pods elsewhere: stderr %q, want %q", r.stderr, want)
		}
		if r := k.fails(t, "auth", "can-i", "get", "secrets", "-n", authNS); r.stdout != "no\n" {
			t.Errorf("can-i get secrets as viewer: %s", r)
		}
		out := k.ok(t, "auth", "can-i", "--list", "-n", authNS)
		if !strings.Contains(out, "pods ") || strings.Contains(out, "*.*") {
			t.Errorf("auth can-i --list as viewer:\n%s", out)
		}
	})
	t.Run("impersonation", func(t *testing.T) {
		if out := e.k.ok(t, "auth", "can-i", "list", "pods", "-n", authNS, "--as", saUser); out != "yes\n" {
			t.Errorf("admin --as the service account, its namespace: %q", out)
		}
		if r := e.k.fails(t, "auth", "can-i", "list", "pods", "-n", ns, "--as", saUser); r.stdout != "no\n" {
			t.Errorf("admin --as the service account, elsewhere: %s", r)
		}
		r := k.fails(t, "get", "pods", "-n", authNS, "--as", "kgate-admin")
		if !strings.Contains(r.stderr, `users "kgate-admin" is forbidden: User "`+saUser+`" cannot impersonate resource "users" in API group "" at the cluster scope`) {
			t.Errorf("impersonation without rights: %s", r)
		}
	})
}
