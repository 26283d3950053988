package access

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/authz"
)

func TestConfigValidate(t *testing.T) {
	f := func(name string, c Config, want string) {
		t.Helper()
		err := c.validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	f("empty", Config{}, "")
	f("OIDC complete", Config{OIDC: OIDCConfig{IssuerURL: "https://issuer", ClientID: "c"}}, "")
	f("OIDC without issuer", Config{OIDC: OIDCConfig{ClientID: "c"}}, "need an issuer URL")
	f("request header without CA", Config{RequestHeader: RequestHeaderConfig{UsernameHeaders: []string{"X-User"}}}, "need a client CA file")
	f("SA key without issuer", Config{ServiceAccountKeyFiles: []string{"k.pem"}}, "need a service-account issuer")
	f("SA signing key with issuer", Config{ServiceAccountSigningKeyFile: "k.pem", ServiceAccountIssuers: []string{"https://i"}}, "")
}

func TestForbidden(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice"}
	f := func(a authz.Attributes, reason, want string) {
		t.Helper()
		err := forbidden(a, reason)
		if !apierrors.IsForbidden(err) {
			t.Fatalf("%v is not a 403", err)
		}
		if got := err.(*apierrors.StatusError).ErrStatus.Message; !strings.Contains(got, want) {
			t.Errorf("message %q, want it to contain %q", got, want)
		}
	}
	f(authz.Attributes{User: alice, Verb: "list", Resource: "pods", Namespace: "ns", IsResourceRequest: true}, "",
		`User "alice" cannot list resource "pods" in API group "" in the namespace "ns"`)
	f(authz.Attributes{User: alice, Verb: "get", APIGroup: "apps", Resource: "deployments", Subresource: "scale", IsResourceRequest: true}, "no rule",
		`User "alice" cannot get resource "deployments/scale" in API group "apps" at the cluster scope: no rule`)
	f(authz.Attributes{User: alice, Verb: "get", Path: "/metrics"}, "", `User "alice" cannot get path "/metrics"`)
}

func TestRuleResolver(t *testing.T) {
	alice := &user.DefaultInfo{Name: "alice"}
	f := func(modes []string, wantRules int, wantIncomplete, wantErr bool) {
		t.Helper()
		rules, incomplete, err := ruleResolver{modes: modes, rbac: authz.NewRBAC()}.RulesFor(alice, "ns")
		if len(rules) != wantRules || incomplete != wantIncomplete || (err != nil) != wantErr {
			t.Errorf("%v: %d rules, incomplete %v, err %v; want %d, %v, error %v", modes, len(rules), incomplete, err, wantRules, wantIncomplete, wantErr)
		}
		if wantErr && !errors.Is(err, errWebhookRules) {
			t.Errorf("%v: %v, want the webhook's error", modes, err)
		}
	}
	f(nil, 0, false, false) // RBAC, which grants alice nothing
	f([]string{authz.ModeAlwaysAllow}, len(everything), false, false)
	f([]string{authz.ModeWebhook, authz.ModeAlwaysAllow}, len(everything), true, true)
}
