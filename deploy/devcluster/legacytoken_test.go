package devcluster_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// TestLegacyServiceAccountToken: a token Secret's token, signed with the
// service-account key as kube-controller-manager's tokens controller
// signs it (issuer kubernetes/serviceaccount), authenticates as its
// ServiceAccount while the Secret holds it, and the Secret is labelled
// with the day it was last used; a changed or deleted Secret ends it.
func TestLegacyServiceAccountToken(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ns := uniqueNS("legacy")
	ensureNamespace(t, cs, ns)
	ctx := context.Background()
	sa, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "robot-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "robot", corev1.ServiceAccountUIDKey: string(sa.UID)}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := keyutil.PrivateKeyFromFile(filepath.Join(shared.dir, "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, key)
	if err != nil {
		t.Fatal(err)
	}
	public, private := serviceaccount.LegacyClaims(*sa, *secret)
	token, err := gen.GenerateToken(ctx, public, private)
	if err != nil {
		t.Fatal(err)
	}
	robot := tokenClient(t, c, token)

	// Not yet in the Secret: refused.
	if _, err := whoami(t, robot); !apierrors.IsUnauthorized(err) {
		t.Fatalf("token not in its Secret: %v, want 401", err)
	}
	secret.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte(token)}
	if _, err := cs.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := whoami(t, robot)
	if err != nil {
		t.Fatalf("legacy token: %v", err)
	}
	if want := "system:serviceaccount:" + ns + ":robot"; u.Username != want || u.UID != string(sa.UID) {
		t.Errorf("legacy token is %q (uid %q), want %q (uid %q)", u.Username, u.UID, want, sa.UID)
	}
	got, err := cs.CoreV1().Secrets(ns).Get(ctx, secret.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if day := got.Labels[serviceaccount.LastUsedLabelKey]; day != time.Now().UTC().Format("2006-01-02") && day != time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02") {
		t.Errorf("the Secret's %s label is %q, want today", serviceaccount.LastUsedLabelKey, day)
	}

	if err := cs.CoreV1().Secrets(ns).Delete(ctx, secret.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := whoami(t, robot); !apierrors.IsUnauthorized(err) {
		t.Errorf("token of a deleted Secret: %v, want 401", err)
	}
}
