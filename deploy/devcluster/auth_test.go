package devcluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/storage/storagetest"
)

// The auth tests share a cluster of their own: it has a token file with
// users that are not cluster admins.
var authShared struct {
	once sync.Once
	c    *devcluster.Cluster
	dir  string
	err  error
}

const authTokens = `tok-alice,alice,uid-alice
tok-bob,bob,uid-bob,"team-b"
tok-carol,carol,uid-carol
`

func authCluster(tb testing.TB) *devcluster.Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration test: skipped under -short")
	}
	authShared.once.Do(func() {
		dir, err := os.MkdirTemp("", "kgate-devcluster-auth-")
		if err != nil {
			authShared.err = err
			return
		}
		authShared.dir = dir
		tokens := filepath.Join(dir, "tokens.csv")
		if authShared.err = os.WriteFile(tokens, []byte(authTokens), 0o600); authShared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		authShared.c, authShared.err = startDev(ctx, devcluster.Config{
			DataDir: filepath.Join(dir, "data"), UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
			TokenAuthFile: tokens, AuthorizationModes: []string{"Node", "RBAC"}, // as production gateways
			Profiling: true,
		})
	})
	if authShared.err != nil {
		tb.Fatalf("cannot start the auth cluster: %v", authShared.err)
	}
	waitRBAC(tb, authShared.c)
	return authShared.c
}

// closeAuthCluster stops the auth tests' cluster (TestMain).
func closeAuthCluster() error {
	defer func() {
		if authShared.dir != "" {
			os.RemoveAll(authShared.dir)
		}
	}()
	if authShared.c == nil {
		return nil
	}
	return authShared.c.Close()
}

// waitRBAC waits until /readyz passes, the RBAC check included.
func waitRBAC(tb testing.TB, c *devcluster.Cluster) {
	tb.Helper()
	rc := newRawClient(tb, c)
	storagetest.Eventually(tb, 20*time.Second, "/readyz", func() error {
		resp, body := rc.do(tb, "GET", "/readyz?verbose", nil)
		if resp.StatusCode != 200 {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		if !strings.Contains(string(body), "[+]rbac ok") {
			tb.Fatalf("/readyz has no rbac check:\n%s", body)
		}
		return nil
	})
}

// tokenConfig is c's config for a bearer token instead of the admin
// certificate.
func tokenConfig(tb testing.TB, c *devcluster.Cluster, token string) *rest.Config {
	tb.Helper()
	cfg := restConfig(tb, c, false, nil)
	cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = nil, nil
	cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = "", ""
	cfg.BearerToken = token
	return cfg
}

func tokenClient(tb testing.TB, c *devcluster.Cluster, token string) kubernetes.Interface {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(tokenConfig(tb, c, token))
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

func bindRole(tb testing.TB, admin kubernetes.Interface, ns, name, kind, role string, subjects ...rbacv1.Subject) {
	tb.Helper()
	_, err := admin.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   subjects,
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// TestViewInOneNamespace: a token-file user bound to "view" in one
// namespace lists there, is forbidden elsewhere (kube-apiserver's
// message), and cannot read secrets ("view" excludes them).
func TestViewInOneNamespace(t *testing.T) {
	c := authCluster(t)
	admin := clientset(t, c, false, nil)
	mine, other := uniqueNS("view"), uniqueNS("other")
	ensureNamespace(t, admin, mine)
	ensureNamespace(t, admin, other)
	ctx := context.Background()
	alice := tokenClient(t, c, "tok-alice")
	_, err := alice.CoreV1().Pods(mine).List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "`+mine+`"`)

	bindRole(t, admin, mine, "alice-view", "ClusterRole", "view", userSubject("alice"))
	storagetest.Eventually(t, 15*time.Second, "alice lists pods once bound to view", func() error {
		_, err := alice.CoreV1().Pods(mine).List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := alice.CoreV1().ConfigMaps(mine).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get configmap as viewer: %v, want NotFound", err)
	}
	_, err = alice.CoreV1().Pods(other).List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "`+other+`"`)
	_, err = alice.CoreV1().Secrets(mine).Get(ctx, "s", metav1.GetOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`secrets "s" is forbidden: User "alice" cannot get resource "secrets" in API group "" in the namespace "`+mine+`"`)
	if se, ok := err.(*apierrors.StatusError); ok {
		if d := se.ErrStatus.Details; d == nil || d.Kind != "secrets" || d.Name != "s" || d.Group != "" {
			t.Errorf("details %+v", d)
		}
	}
	_, err = alice.CoreV1().ConfigMaps(mine).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, "")
	_, err = alice.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`namespaces is forbidden: User "alice" cannot list resource "namespaces" in API group "" at the cluster scope`)
	// Discovery is everyone's (system:discovery).
	if _, err := alice.Discovery().ServerGroups(); err != nil {
		t.Errorf("discovery as alice: %v", err)
	}
	// Non-resource paths: /metrics needs system:monitoring.
	raw := tokenClient(t, c, "tok-alice").CoreV1().RESTClient()
	err = raw.Get().AbsPath("/metrics").Do(ctx).Error()
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, `forbidden: User "alice" cannot get path "/metrics"`)
	// The profiles (--profiling) are cluster-admin's, as kube-apiserver's.
	err = raw.Get().AbsPath("/debug/pprof/goroutine").Do(ctx).Error()
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, `forbidden: User "alice" cannot get path "/debug/pprof/goroutine"`)
	prof, err := admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/goroutine").Param("debug", "1").DoRaw(ctx)
	if err != nil || !strings.Contains(string(prof), "goroutine profile:") {
		t.Errorf("the goroutine profile as admin: %v %.200s", err, prof)
	}
	// Bad credentials are 401, whatever the path.
	err = tokenClient(t, c, "tok-nobody").CoreV1().RESTClient().Get().AbsPath("/api").Do(ctx).Error()
	checkAPIError(t, err, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
}

// TestAccessReviews: kubectl auth can-i's APIs, over protobuf (typed
// clients) and JSON, answered from the authorizer.
func TestAccessReviews(t *testing.T) {
	c := authCluster(t)
	admin := clientset(t, c, false, nil)
	ns := uniqueNS("review")
	ensureNamespace(t, admin, ns)
	bindRole(t, admin, ns, "carol-view", "ClusterRole", "view", userSubject("carol"))
	ctx := context.Background()
	for _, json := range []bool{false, true} {
		cfg := tokenConfig(t, c, "tok-carol")
		if json {
			cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
		}
		carol := kubernetes.NewForConfigOrDie(cfg)
		can := func(verb, resource, namespace string) bool {
			t.Helper()
			r, err := carol.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: verb, Resource: resource, Namespace: namespace}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("json=%v: %v", json, err)
			}
			return r.Status.Allowed
		}
		storagetest.Eventually(t, 15*time.Second, "carol's binding", func() error {
			if !can("list", "pods", ns) {
				return apierrors.NewForbidden(corev1.Resource("pods"), "", nil)
			}
			return nil
		})
		if can("list", "pods", "default") || can("create", "pods", ns) || can("get", "secrets", ns) {
			t.Errorf("json=%v: carol may do more than view in %s", json, ns)
		}
		who, err := carol.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u := who.Status.UserInfo; u.Username != "carol" || u.UID != "uid-carol" || !slices.Equal(u.Groups, []string{"system:authenticated"}) {
			t.Errorf("json=%v: whoami %+v", json, u)
		}
		rules, err := carol.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range rules.Status.ResourceRules {
			if slices.Contains(r.Resources, "pods") && slices.Contains(r.Verbs, "list") {
				found = true
			}
		}
		if !found || len(rules.Status.NonResourceRules) == 0 {
			t.Errorf("json=%v: rules review %+v", json, rules.Status)
		}
		// A SubjectAccessReview needs rights carol lacks.
		_, err = carol.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{}, metav1.CreateOptions{})
		checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, "")
	}
	sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "carol", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods", Namespace: ns}}}, metav1.CreateOptions{})
	if err != nil || !sar.Status.Allowed {
		t.Errorf("SubjectAccessReview for carol: %+v %v", sar, err)
	}
	_, err = admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get"}}}, metav1.CreateOptions{})
	checkAPIError(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	lsar, err := admin.AuthorizationV1().LocalSubjectAccessReviews(ns).Create(ctx, &authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "carol", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: ns}}}, metav1.CreateOptions{})
	if err != nil || !lsar.Status.Allowed {
		t.Errorf("LocalSubjectAccessReview for carol: %+v %v", lsar, err)
	}
}

// TestEscalationPrevention: a user who may write roles and bindings in a
// namespace cannot grant more than they hold.
func TestEscalationPrevention(t *testing.T) {
	c := authCluster(t)
	admin := clientset(t, c, false, nil)
	ns := uniqueNS("escalate")
	ensureNamespace(t, admin, ns)
	ctx := context.Background()
	_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "rbac-writer"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "create", "update", "patch"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}},
		{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindRole(t, admin, ns, "bob-rbac", "Role", "rbac-writer", userSubject("bob"))
	bob := tokenClient(t, c, "tok-bob")
	// Within what bob holds: allowed (once bob's binding is in force).
	storagetest.Eventually(t, 15*time.Second, "bob creates a role within his rights", func() error {
		_, err := bob.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}, metav1.CreateOptions{})
		return err
	})
	// Beyond: forbidden, with kube-apiserver's message.
	_, err = bob.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}}, metav1.CreateOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`roles.rbac.authorization.k8s.io "secret-reader" is forbidden: user "bob" (groups=["team-b" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`+"\n"+
			`{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`)
	// Updating a role to grant more: forbidden too.
	cur, err := bob.RbacV1().Roles(ns).Get(ctx, "cm-reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Rules[0].Verbs = []string{"get", "delete"}
	_, err = bob.RbacV1().Roles(ns).Update(ctx, cur, metav1.UpdateOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, "")
	// Binding a role bob holds all of: allowed; binding "admin": not.
	if _, err := bob.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "carol-cm"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-reader"},
		Subjects: []rbacv1.Subject{userSubject("carol")}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("binding a role within bob's rights: %v", err)
	}
	_, err = bob.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "carol-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{userSubject("carol")}}, metav1.CreateOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, "")
	if err != nil && !strings.HasPrefix(err.Error(), `rolebindings.rbac.authorization.k8s.io "carol-admin" is forbidden: user "bob"`) {
		t.Errorf("message %q", err)
	}
	_, err = bob.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dangling"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "no-such-role"},
		Subjects: []rbacv1.Subject{userSubject("carol")}}, metav1.CreateOptions{})
	checkAPIError(t, err, http.StatusNotFound, metav1.StatusReasonNotFound, `clusterrole.rbac.authorization.k8s.io "no-such-role" not found`)
	// With "bind" on the ClusterRole admin, bob may bind it.
	_, err = admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bind-admin"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"bind"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, ResourceNames: []string{"admin"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindRole(t, admin, ns, "bob-bind", "Role", "bind-admin", userSubject("bob"))
	storagetest.Eventually(t, 15*time.Second, "bob binds admin once allowed to bind it", func() error {
		_, err := bob.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "carol-admin"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects: []rbacv1.Subject{userSubject("carol")}}, metav1.CreateOptions{})
		return err
	})
	// The admin (system:masters) may do anything.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: uniqueNS("agg")},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"x": "y"}}}}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("admin creating an aggregated ClusterRole: %v", err)
	}
}

// TestImpersonation: impersonating needs verb "impersonate"; the request
// then runs as the impersonated user.
func TestImpersonation(t *testing.T) {
	c := authCluster(t)
	admin := clientset(t, c, false, nil)
	ns := uniqueNS("imp")
	ensureNamespace(t, admin, ns)
	ctx := context.Background()
	bindRole(t, admin, ns, "alice-view", "ClusterRole", "view", userSubject("alice"))
	as := func(token string, imp rest.ImpersonationConfig) kubernetes.Interface {
		var cfg *rest.Config
		if token == "" {
			cfg = restConfig(t, c, false, nil)
		} else {
			cfg = tokenConfig(t, c, token)
		}
		cfg.Impersonate = imp
		return kubernetes.NewForConfigOrDie(cfg)
	}
	// The admin impersonates alice: alice's rights, alice's identity.
	asAlice := as("", rest.ImpersonationConfig{UserName: "alice", Extra: map[string][]string{"scopes": {"view"}}})
	storagetest.Eventually(t, 15*time.Second, "admin as alice lists pods", func() error {
		_, err := asAlice.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	_, err := asAlice.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "`+ns+`"`)
	who, err := asAlice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := who.Status.UserInfo; u.Username != "alice" || !slices.Equal(u.Groups, []string{"system:authenticated"}) || !slices.Equal(u.Extra["scopes"], []string{"view"}) {
		t.Errorf("impersonated whoami %+v", u)
	}
	// bob may not impersonate.
	_, err = as("tok-bob", rest.ImpersonationConfig{UserName: "alice"}).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope`)
	// Allowed to impersonate alice (only): bob may, as alice, with her
	// rights; impersonating a group needs its own grant.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "impersonate-alice-" + ns},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{"alice"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-impersonates-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "impersonate-alice-" + ns},
		Subjects: []rbacv1.Subject{userSubject("bob")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bobAsAlice := as("tok-bob", rest.ImpersonationConfig{UserName: "alice"})
	storagetest.Eventually(t, 15*time.Second, "bob as alice", func() error {
		_, err := bobAsAlice.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	_, err = as("tok-bob", rest.ImpersonationConfig{UserName: "carol"}).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, "")
	_, err = as("tok-bob", rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:masters"}}).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`groups "system:masters" is forbidden: User "bob" cannot impersonate resource "groups" in API group "" at the cluster scope`)
	// A group without a user is a bad request.
	rc := newRawClient(t, c)
	resp, body := rc.do(t, "GET", "/api/v1/namespaces/"+ns+"/pods", nil, "Impersonate-Group", "team")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "without impersonating a user") {
		t.Errorf("group without user: %d %s", resp.StatusCode, body)
	}
}

// TestServiceAccountTokens: a namespace gets its default ServiceAccount,
// pods run as it by default, a TokenRequest token authenticates as the
// ServiceAccount and stops working once it is deleted.
func TestServiceAccountTokens(t *testing.T) {
	c := authCluster(t)
	admin := clientset(t, c, false, nil)
	ns := uniqueNS("sa")
	ensureNamespace(t, admin, ns)
	ctx := context.Background()
	if _, err := admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("default service account of a new namespace: %v", err)
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("pod serviceAccountName %q, want default", pod.Spec.ServiceAccountName)
	}
	sa, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "builder", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if exp := *tr.Spec.ExpirationSeconds; exp != 3600 || time.Until(tr.Status.ExpirationTimestamp.Time) > time.Hour || time.Until(tr.Status.ExpirationTimestamp.Time) < 59*time.Minute {
		t.Errorf("token expiry %d s, at %v", exp, tr.Status.ExpirationTimestamp)
	}
	if !slices.Equal(tr.Spec.Audiences, []string{devcluster.DefaultServiceAccountIssuer}) {
		t.Errorf("audiences %q", tr.Spec.Audiences)
	}
	builder := tokenClient(t, c, tr.Status.Token)
	who, err := builder.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("whoami with a TokenRequest token: %v", err)
	}
	if u := who.Status.UserInfo; u.Username != "system:serviceaccount:"+ns+":builder" || u.UID != string(sa.UID) ||
		!slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}) {
		t.Errorf("service account whoami %+v", u)
	}
	// The TokenReview of the token agrees.
	review, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil || !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:"+ns+":builder" {
		t.Errorf("TokenReview: %+v %v", review, err)
	}
	// Bound to the pod; the pod's service account must be the token's.
	bound, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: pod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	who, err = tokenClient(t, c, bound.Status.Token).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || !slices.Equal(who.Status.UserInfo.Extra["authentication.kubernetes.io/pod-name"], []string{"p"}) {
		t.Errorf("pod-bound token: %+v %v", who, err)
	}
	_, err = admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p"}}}, metav1.CreateOptions{})
	checkAPIError(t, err, http.StatusBadRequest, metav1.StatusReasonBadRequest, "")
	short := int64(60)
	_, err = admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &short}}, metav1.CreateOptions{})
	checkAPIError(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	_, err = admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	checkAPIError(t, err, http.StatusNotFound, metav1.StatusReasonNotFound, `serviceaccounts "nobody" not found`)

	// Deleting the service account ends its tokens.
	if err := admin.CoreV1().ServiceAccounts(ns).Delete(ctx, "builder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 15*time.Second, "the token stops working", func() error {
		_, err := builder.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return err
	})
	// A service account of the same name is another one.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = builder.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("old token for a recreated service account: %v, want 401", err)
	}
}

// TestStoredAggregation: kgate dev writes the rules of aggregated
// ClusterRoles into them, as kube-controller-manager would, and follows
// a new member.
func TestStoredAggregation(t *testing.T) {
	c := authCluster(t)
	admin := clientset(t, c, false, nil)
	ctx := context.Background()
	has := func(role string, match func(rbacv1.PolicyRule) bool) error {
		cr, err := admin.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(cr.Rules, match) {
			return fmt.Errorf("%s stores %d rules, none matching", role, len(cr.Rules))
		}
		return nil
	}
	podsRead := func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "pods") && slices.Contains(r.Verbs, "list")
	}
	for _, role := range []string{"view", "edit", "admin"} {
		storagetest.Eventually(t, 15*time.Second, role+" stores its aggregated rules", func() error { return has(role, podsRead) })
	}
	widgets := func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "widgets") }
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "widget-viewer", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer admin.RbacV1().ClusterRoles().Delete(ctx, "widget-viewer", metav1.DeleteOptions{})
	// view takes the new rule; edit and admin aggregate view's members.
	for _, role := range []string{"view", "edit", "admin"} {
		storagetest.Eventually(t, 15*time.Second, role+" stores the new member's rule", func() error { return has(role, widgets) })
	}
	if err := admin.RbacV1().ClusterRoles().Delete(ctx, "widget-viewer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 15*time.Second, "view drops the deleted member's rule", func() error {
		if has("view", widgets) == nil {
			return errors.New("view still grants widgets")
		}
		return has("view", podsRead)
	})
}
