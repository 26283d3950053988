// Package upstream runs kube-apiserver's own admission plugins
// (k8s.io/kubernetes/plugin/pkg/admission/...) on kgate's admission
// Attributes: the object is converted to upstream's internal version,
// given to the plugins as admission.Attributes, and converted back after
// the mutating phase. Their listers come from client-go informers that
// the gateway's feed fills, their client reads etcd, their authorizer is
// the gateway's, their feature gates the process's. Names lists
// kube-apiserver's plugins in its order and resolves
// --enable-admission-plugins / --disable-admission-plugins.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	admissioninit "k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	certapproval "k8s.io/kubernetes/plugin/pkg/admission/certificates/approval"
	"k8s.io/kubernetes/plugin/pkg/admission/certificates/ctbattest"
	certsigning "k8s.io/kubernetes/plugin/pkg/admission/certificates/signing"
	certsubjectrestriction "k8s.io/kubernetes/plugin/pkg/admission/certificates/subjectrestriction"
	"k8s.io/kubernetes/plugin/pkg/admission/defaulttolerationseconds"
	"k8s.io/kubernetes/plugin/pkg/admission/network/defaultingressclass"
	"k8s.io/kubernetes/plugin/pkg/admission/nodedeclaredfeatures"
	"k8s.io/kubernetes/plugin/pkg/admission/noderestriction"
	"k8s.io/kubernetes/plugin/pkg/admission/nodetaint"
	"k8s.io/kubernetes/plugin/pkg/admission/podresize"
	"k8s.io/kubernetes/plugin/pkg/admission/podtopologylabels"
	"k8s.io/kubernetes/plugin/pkg/admission/priority"
	"k8s.io/kubernetes/plugin/pkg/admission/runtimeclass"
	"k8s.io/kubernetes/plugin/pkg/admission/scheduling/podgroupprotection"
	"k8s.io/kubernetes/plugin/pkg/admission/security/podsecurity"
	"k8s.io/kubernetes/plugin/pkg/admission/serviceaccount"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/persistentvolume/resize"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/storageclass/setdefault"
	"k8s.io/kubernetes/plugin/pkg/admission/storage/storageobjectinuseprotection"

	adm "github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/gateway/internal/feedinformers"
)

// ErrConfig is wrapped by every configuration error of New.
var ErrConfig = errors.New("upstream: invalid config")

// Config says which plugins to run and what they run on.
type Config struct {
	// Names are upstream plugin names to run, in kube-apiserver's order
	// (a subset of Resolve's result; IsOwn names are not allowed).
	Names []string
	// Scheme has upstream's internal and versioned built-in types and
	// their conversions (builtin.Semantics.Scheme).
	Scheme *runtime.Scheme
	// Kinds maps a versioned object to its served resource, for the
	// informers the plugins ask for.
	Kinds func(runtime.Object) (schema.GroupVersionResource, error)
	// Objects reads stored objects for the plugins' client.
	Objects Objects
	// Authorizer answers the plugins' checks (CertificateApproval's
	// "approve", CertificateSigning's "sign", ...).
	Authorizer authorizer.UnconditionalAuthorizer
	// Features are the feature gates the plugins inspect (the process's
	// utilfeature.DefaultFeatureGate, set by main).
	Features featuregate.FeatureGate
	// Version is the Kubernetes version kgate serves ("1.37").
	Version string
}

// Plugins runs upstream plugins as one link of kgate's chain (they are
// contiguous in kube-apiserver's order): adm.Mutator and adm.Validator.
type Plugins struct {
	scheme *runtime.Scheme
	chain  admission.Interface
	oi     admission.ObjectInterfaces
	sinks  map[schema.GroupVersionResource]feed.Sink
}

// New initialises the named plugins with upstream's plugin initializer
// and checks each plugin's ValidateInitialization.
func New(cfg Config) (*Plugins, error) {
	if cfg.Scheme == nil || cfg.Kinds == nil || cfg.Objects == nil || cfg.Authorizer == nil || cfg.Features == nil || cfg.Version == "" {
		return nil, fmt.Errorf("%w: Scheme, Kinds, Objects, Authorizer, Features and Version are required", ErrConfig)
	}
	for _, n := range cfg.Names {
		if IsOwn(n) {
			return nil, fmt.Errorf("%w: %s is kgate's own plugin", ErrConfig, n)
		}
	}
	plugins := admission.NewPlugins()
	for _, register := range []func(*admission.Plugins){
		serviceaccount.Register, noderestriction.Register, nodetaint.Register, podsecurity.Register,
		priority.Register, defaulttolerationseconds.Register, setdefault.Register,
		storageobjectinuseprotection.Register, podgroupprotection.Register, resize.Register,
		runtimeclass.Register, certapproval.Register, certsigning.Register, ctbattest.Register,
		certsubjectrestriction.Register, defaultingressclass.Register, podtopologylabels.Register,
		nodedeclaredfeatures.Register, podresize.Register,
	} {
		register(plugins)
	}
	for _, n := range cfg.Names {
		if !slices.Contains(plugins.Registered(), n) {
			return nil, fmt.Errorf("%w: kgate does not run admission plugin %q", ErrConfig, n)
		}
	}
	f := feedinformers.NewFactory(cfg.Kinds)
	// AuthorizerFunc: the plugins ask unconditional questions only.
	init := admissioninit.New(newClient(cfg.Objects), nil, f, authorizer.AuthorizerFunc(cfg.Authorizer.Authorize), cfg.Features,
		compatibility.NewEffectiveVersionFromString(cfg.Version, "", ""), nil, nil)
	chain, err := plugins.NewFromPlugins(cfg.Names, noConfig{}, init, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot make admission plugins: %w", err)
	}
	sinks, err := f.Sinks()
	if err != nil {
		return nil, fmt.Errorf("cannot make admission plugins: %w", err)
	}
	return &Plugins{scheme: cfg.Scheme, chain: chain, oi: admission.NewObjectInterfacesFromScheme(cfg.Scheme), sinks: sinks}, nil
}

// Sinks are the resources the plugins read through listers: the chain's
// feed must fill each sink.
func (p *Plugins) Sinks() map[schema.GroupVersionResource]feed.Sink { return p.sinks }

// Admit implements adm.Mutator: the mutating phase of the plugins, on the
// internal version of the object, converted back when done.
func (p *Plugins) Admit(ctx context.Context, at *adm.Attributes) error {
	m, ok := p.chain.(admission.MutationInterface)
	if !ok || !p.chain.Handles(admission.Operation(at.Operation)) {
		return nil
	}
	attrs, back, err := p.attributes(at)
	if err != nil {
		return err
	}
	if err := m.Admit(withWarnings(ctx, at), attrs, p.oi); err != nil {
		return err
	}
	if back.Empty() {
		return nil
	}
	out, err := p.scheme.ConvertToVersion(attrs.GetObject(), back)
	if err != nil {
		return fmt.Errorf("cannot convert %s back from the internal version: %w", at.GVK().Kind, err)
	}
	at.Object = out
	return nil
}

// Validate implements adm.Validator.
func (p *Plugins) Validate(ctx context.Context, at *adm.Attributes) error {
	v, ok := p.chain.(admission.ValidationInterface)
	if !ok || !p.chain.Handles(admission.Operation(at.Operation)) {
		return nil
	}
	attrs, _, err := p.attributes(at)
	if err != nil {
		return err
	}
	return v.Validate(withWarnings(ctx, at), attrs, p.oi)
}

// attributes returns upstream's attributes of at, with the objects in
// upstream's internal version when their group has one (built-in kinds;
// custom resources stay as they are), and the version to convert the
// object back to (empty when it was not converted).
func (p *Plugins) attributes(at *adm.Attributes) (admission.Attributes, schema.GroupVersion, error) {
	obj, back, err := p.toInternal(at.Object)
	if err != nil {
		return nil, back, err
	}
	old, _, err := p.toInternal(at.OldObject)
	if err != nil {
		return nil, back, err
	}
	return admission.NewAttributesRecord(obj, old, at.GVK(), at.Namespace, at.Name, at.GVR(), at.Subresource,
		admission.Operation(at.Operation), at.Options, at.DryRun, at.User), back, nil
}

// toInternal converts a versioned object to its group's internal version
// (a copy) and returns the version it had; an object of a group without
// one (a custom resource) is returned as it is, with an empty version.
func (p *Plugins) toInternal(obj runtime.Object) (runtime.Object, schema.GroupVersion, error) {
	if obj == nil {
		return nil, schema.GroupVersion{}, nil
	}
	if _, ok := obj.(runtime.Unstructured); ok {
		return obj, schema.GroupVersion{}, nil
	}
	kinds, _, err := p.scheme.ObjectKinds(obj)
	if err != nil || len(kinds) == 0 || kinds[0].Version == runtime.APIVersionInternal {
		return obj, schema.GroupVersion{}, nil
	}
	gv := kinds[0].GroupVersion()
	out, err := p.scheme.ConvertToVersion(obj, schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal})
	if err != nil {
		// A kind without an internal version: the plugins, which all
		// read internal types, pass it by.
		return obj, schema.GroupVersion{}, nil
	}
	return out, gv, nil
}

// withWarnings records the plugins' warnings (warning.AddWarning) on at.
func withWarnings(ctx context.Context, at *adm.Attributes) context.Context {
	return warning.WithWarningRecorder(ctx, recorder{at})
}

type recorder struct{ at *adm.Attributes }

func (r recorder) AddWarning(_, text string) { r.at.AddWarning(text) }

// noConfig gives every plugin its default configuration (PodSecurity's
// is privileged everywhere unless namespace labels say otherwise).
type noConfig struct{}

func (noConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }
