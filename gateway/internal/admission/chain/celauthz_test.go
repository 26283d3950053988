package chain

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kgate/kgate/gateway/internal/authz"
)

// failing is an authorizer that cannot decide, as the webhook when its
// service is down.
type failing struct{ got authz.Attributes }

func (f *failing) Authorize(a authz.Attributes) (authz.Decision, string) {
	d, r, _ := f.Evaluate(a)
	return d, r
}

func (f *failing) Evaluate(a authz.Attributes) (authz.Decision, string, error) {
	f.got = a
	return authz.NoOpinion, "", errors.New("webhook down")
}

// TestCELAuthorizerReportsErrors: CEL's authorizer checks see an
// authorizer that could not decide as an error (errored() in CEL), not
// as no opinion, and get the request's version.
func TestCELAuthorizerReportsErrors(t *testing.T) {
	f := &failing{}
	d, _, err := celAuthorizer{authz.Union{f}}.Authorize(context.Background(), &authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: "u"}, Verb: "get", APIGroup: "apps", APIVersion: "v1", Resource: "deployments", ResourceRequest: true,
	})
	if d != authorizer.DecisionNoOpinion || err == nil {
		t.Fatalf("decision %v, error %v; want no opinion with the error", d, err)
	}
	if f.got.APIVersion != "v1" || f.got.Resource != "deployments" {
		t.Fatalf("the authorizer got %+v", f.got)
	}
}
