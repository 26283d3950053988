package kubeletproxy

import (
	"context"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"

	adm "github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
)

// Admission is the admission chain a connect request passes
// (chain.Admission).
type Admission interface {
	Admit(ctx context.Context, at *adm.Attributes) error
	Validate(ctx context.Context, at *adm.Attributes) error
}

// admitted runs the admission chain on a connect request as upstream's
// ConnectResource does: operation CONNECT, the request's options
// (versioned: v1 PodExecOptions, PodProxyOptions, ...) as the object, the
// mutating phase then the validating one. It returns the options the
// chain let through, converted into internal (the internal version
// upstream's location helpers take); a mutating plugin or webhook may
// have changed them. Without a chain the options pass as they are.
func (p *Proxy) admitted(ctx context.Context, info *requestinfo.Info, u user.Info, versioned, internal runtime.Object) error {
	if p.d.Admission != nil {
		res, ok := p.d.Registry.Lookup(corev1.SchemeGroupVersion.WithResource(info.Resource))
		if !ok {
			return apierror.InternalError(fmt.Errorf("cannot admit %s/%s: no such resource", info.Resource, info.Subresource))
		}
		gvks, _, err := p.d.Scheme.ObjectKinds(versioned)
		if err != nil {
			return apierror.InternalError(fmt.Errorf("cannot admit %s/%s: %w", info.Resource, info.Subresource, err))
		}
		at := &adm.Attributes{
			User: u, Resource: res, Subresource: info.Subresource, Kind: gvks[0], Operation: adm.Connect,
			Namespace: info.Namespace, Name: info.Name, Object: versioned,
		}
		if err := p.d.Admission.Admit(ctx, at); err != nil {
			return err
		}
		if err := p.d.Admission.Validate(ctx, at); err != nil {
			return err
		}
		versioned = at.Object
	}
	if err := p.d.Scheme.Convert(versioned, internal, nil); err != nil {
		return apierror.InternalError(fmt.Errorf("cannot convert the %s/%s options: %w", info.Resource, info.Subresource, err))
	}
	return nil
}

// connectOptions decodes a connect request's options from its query
// (v1, as upstream's parameter codec does), admits them and returns
// them in internal.
func (p *Proxy) connectOptions(ctx context.Context, info *requestinfo.Info, u user.Info, query url.Values, versioned, internal runtime.Object) error {
	if err := p.params.DecodeParameters(query, corev1.SchemeGroupVersion, versioned); err != nil {
		return apierror.BadRequest(fmt.Sprintf("cannot decode the options: %v", err))
	}
	return p.admitted(ctx, info, u, versioned, internal)
}
