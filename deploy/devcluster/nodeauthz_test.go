package devcluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/storage/storagetest"
)

// nodeClient is a client with a certificate of c's CA for kubelet
// system:node:<name> in group system:nodes, as kubelets present.
func nodeClient(t *testing.T, c *devcluster.Cluster, name string) kubernetes.Interface {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(c.Bundle.CAFile, filepath.Join(filepath.Dir(c.Bundle.CAFile), pki.CAKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "system:node:" + name, Organization: []string{user.NodesGroup}},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := restConfig(t, c, false, nil)
	cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = "", ""
	cfg.TLSClientConfig.CertData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cfg.TLSClientConfig.KeyData = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestNodeAuthorizer: a kubelet's client certificate (CN=system:node:n1,
// O=system:nodes) reads the secret of a pod bound to its node, not the
// secret of another node's pod (upstream's 403 and message), and no
// longer its own once the pod is gone; the graph is fed from the cache
// nodes, and /readyz waits for it.
func TestNodeAuthorizer(t *testing.T) {
	c := authCluster(t) // --authorization-mode Node,RBAC
	rc := newRawClient(t, c)
	if _, body := rc.do(t, "GET", "/readyz?verbose", nil); !strings.Contains(string(body), "[+]node-authorizer ok") {
		t.Fatalf("/readyz has no passing node-authorizer check:\n%s", body)
	}
	admin := clientset(t, c, false, nil)
	ns := uniqueNS("node-authz")
	ensureNamespace(t, admin, ns)
	ctx := context.Background()
	for _, s := range []string{"mine", "theirs"} {
		if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound := func(name, node, secret string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				NodeName:   node,
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
				Volumes:    []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}},
			},
		}
	}
	for _, p := range []*corev1.Pod{bound("web", "n1", "mine"), bound("db", "n2", "theirs")} {
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	n1 := nodeClient(t, c, "n1")
	storagetest.Eventually(t, 20*time.Second, "n1 reads the secret of its pod", func() error {
		_, err := n1.CoreV1().Secrets(ns).Get(ctx, "mine", metav1.GetOptions{})
		return err
	})
	_, err := n1.CoreV1().Secrets(ns).Get(ctx, "theirs", metav1.GetOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`secrets "theirs" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "`+ns+
			`": no relationship found between node 'n1' and this object`)
	_, err = n1.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, "")

	// Its own Node object (not created yet: 404, so authorized), not
	// another's; its pods by field selector only.
	if _, err := n1.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get own node: %v, want NotFound", err)
	}
	_, err = n1.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`nodes "n2" is forbidden: User "system:node:n1" cannot get resource "nodes" in API group "" at the cluster scope: node 'n1' cannot read 'n2', only its own Node object`)
	pods, err := n1.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "web" {
		t.Errorf("list pods of n1: %v %v", pods, err)
	}
	_, err = n1.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`pods is forbidden: User "system:node:n1" cannot list resource "pods" in API group "" at the cluster scope: can only list/watch pods with spec.nodeName field selector`)

	// The pod gone, so is the node's access to its secret.
	if err := admin.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 20*time.Second, "n1 loses the secret of its deleted pod", func() error {
		_, err := n1.CoreV1().Secrets(ns).Get(ctx, "mine", metav1.GetOptions{})
		if apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("get: %v, want 403", err)
	})
}
