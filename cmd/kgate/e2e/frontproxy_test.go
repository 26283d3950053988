package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/kgate/kgate/deploy/pki"
)

// TestDevFrontProxy: kgate dev started without front-proxy flags makes
// its own front proxy, as kubeadm sets up kube-apiserver: the
// extension-apiserver-authentication ConfigMap publishes its CA and
// request-header settings for extension servers, and a request bearing
// its client certificate is served as the user its X-Remote-* headers
// name.
func TestDevFrontProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary; skipped under -short")
	}
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	s := startServer(t, dataDir)
	k := &kubectl{kubeconfig: s.kubeconfig, cacheDir: filepath.Join(dir, "cache")}
	fpDir := filepath.Join(dataDir, "front-proxy")
	caPEM, err := os.ReadFile(filepath.Join(fpDir, pki.FrontProxyCAFileName))
	if err != nil {
		t.Fatal(err)
	}

	eventuallyOut(t, k, "the request-header settings in extension-apiserver-authentication", func(out string) bool {
		var data map[string]string
		if json.Unmarshal([]byte(out), &data) != nil {
			return false
		}
		return data["requestheader-client-ca-file"] == string(caPEM) &&
			data["requestheader-allowed-names"] == `["front-proxy-client"]` &&
			data["requestheader-username-headers"] == `["X-Remote-User"]` &&
			data["requestheader-group-headers"] == `["X-Remote-Group"]` &&
			data["requestheader-extra-headers-prefix"] == `["X-Remote-Extra-"]`
	}, "get", "configmap", "extension-apiserver-authentication", "-n", "kube-system", "-o", "jsonpath={.data}")

	cert, err := tls.LoadX509KeyPair(filepath.Join(fpDir, pki.FrontProxyCertFileName), filepath.Join(fpDir, pki.FrontProxyKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	servingCA, err := os.ReadFile(filepath.Join(dataDir, pki.CAFileName))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(servingCA)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(s.servingURL, "/")+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Remote-User", "alice")
	req.Header.Add("X-Remote-Group", "developers")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var review authenticationv1.SelfSubjectReview
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(out, &review) != nil {
		t.Fatalf("SelfSubjectReview through the front proxy: %d %s", resp.StatusCode, out)
	}
	if u := review.Status.UserInfo; u.Username != "alice" || !strings.Contains(strings.Join(u.Groups, ","), "developers") {
		t.Errorf("served as %+v, want alice in developers", u)
	}
}
