package access

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/satoken"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// newLegacyTokens is upstream's authenticator of legacy service-account
// tokens (issuer kubernetes/serviceaccount, kept in token Secrets that
// kube-controller-manager's tokens controller fills), as kube-apiserver
// builds it: its JWT authenticator and legacy validator, which checks
// that the Secret still holds the token and the ServiceAccount's UID, and
// labels the Secret with the day it was last used.
func newLegacyTokens(keys []crypto.PublicKey, audiences []string, lookup objectLookup, store *storage.Store) (authenticator.Token, error) {
	pub := make([]any, len(keys))
	for i, k := range keys {
		pub[i] = k
	}
	getter, err := serviceaccount.StaticPublicKeysGetter(pub)
	if err != nil {
		return nil, fmt.Errorf("cannot make the legacy token authenticator: %w", err)
	}
	objs := tokenObjects{lookup: lookup}
	validator, err := serviceaccount.NewLegacyValidator(true, objs, secretsWriter(lookup.reg, store).CoreV1())
	if err != nil {
		return nil, fmt.Errorf("cannot make the legacy token authenticator: %w", err)
	}
	return serviceaccount.JWTTokenAuthenticator([]string{serviceaccount.LegacyIssuer}, getter, audiences, validator), nil
}

// tokenObjects is upstream's ServiceAccountTokenGetter over the cache
// nodes, read consistently (at etcd's current revision): a token Secret
// just filled authenticates at once, and one just deleted or changed no
// longer does. Legacy tokens are rare; the revision read is their cost.
type tokenObjects struct{ lookup objectLookup }

// get decodes the object into out, or returns upstream's NotFound.
func (o tokenObjects) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, out any) error {
	data, err := o.lookup.raw(ctx, gvr, namespace, name, true)
	if errors.Is(err, satoken.ErrNotFound) {
		return apierror.NotFound(gvr.GroupResource(), name)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("cannot decode %s %s/%s: %w", gvr.Resource, namespace, name, err)
	}
	return nil
}

func (o tokenObjects) GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	var sa corev1.ServiceAccount
	return &sa, o.get(ctx, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), namespace, name, &sa)
}

func (o tokenObjects) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	var p corev1.Pod
	return &p, o.get(ctx, corev1.SchemeGroupVersion.WithResource("pods"), namespace, name, &p)
}

func (o tokenObjects) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	return &s, o.get(ctx, corev1.SchemeGroupVersion.WithResource("secrets"), namespace, name, &s)
}

func (o tokenObjects) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	return &n, o.get(ctx, corev1.SchemeGroupVersion.WithResource("nodes"), "", name, &n)
}

func (o tokenObjects) GetValidatingWebhookConfiguration(ctx context.Context, name string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	var c admissionregistrationv1.ValidatingWebhookConfiguration
	return &c, o.get(ctx, admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations"), "", name, &c)
}

func (o tokenObjects) GetMutatingWebhookConfiguration(ctx context.Context, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	var c admissionregistrationv1.MutatingWebhookConfiguration
	return &c, o.get(ctx, admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations"), "", name, &c)
}

// secretsWriter is the Secrets client the legacy validator patches the
// last-used label with, in place of kube-apiserver's loopback client:
// client-go's typed client over a reaction that applies a merge patch of
// a Secret in storage (with its UID as precondition). Nothing else is
// asked of it.
func secretsWriter(reg *registry.Registry, store *storage.Store) *fake.Clientset {
	cs := &fake.Clientset{}
	cs.AddReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p, ok := a.(clienttesting.PatchAction)
		if !ok || a.GetResource().Resource != "secrets" || a.GetSubresource() != "" || p.GetPatchType() != types.MergePatchType {
			return true, nil, fmt.Errorf("cannot %s %s: the token validator's client only merge-patches Secrets", a.GetVerb(), a.GetResource().Resource)
		}
		res, ok := reg.Lookup(corev1.SchemeGroupVersion.WithResource("secrets"))
		if !ok {
			return true, nil, errors.New("cannot patch secrets: not served")
		}
		var meta struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &meta); err != nil {
			return true, nil, fmt.Errorf("cannot read the patch: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		defer cancel()
		obj, err := store.Update(ctx, res, p.GetNamespace(), p.GetName(), storage.Preconditions{UID: meta.Metadata.UID}, func(cur runtime.Object) (runtime.Object, error) {
			orig, err := json.Marshal(cur)
			if err != nil {
				return nil, err
			}
			patched, err := jsonpatch.MergePatch(orig, p.GetPatch())
			if err != nil {
				return nil, fmt.Errorf("cannot apply the patch: %w", err)
			}
			var next corev1.Secret
			if err := json.Unmarshal(patched, &next); err != nil {
				return nil, err
			}
			return &next, nil
		})
		return true, obj, err
	})
	return cs
}
