// Package node is kube-apiserver's --authorization-mode Node: kubelets
// (users system:node:<name> in group system:nodes) may read only the
// objects of their own node, as upstream's graph authorizer
// (k8s.io/kubernetes plugin/pkg/auth/authorizer/node) decides with
// upstream's node rules (bootstrappolicy.NodeRules). The graph of pods,
// persistent volumes, volume attachments, resource slices and pod
// certificate requests is fed from the cache nodes through a feed.Feed,
// as kube-apiserver feeds it from its informers.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	certsv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/auth/nodeidentifier"
	"k8s.io/kubernetes/pkg/features"
	nodeauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/node"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// Config configures an Authorizer.
type Config struct {
	Registry  *registry.Registry
	Ranges    ranges.Source
	Cache     feed.Lister
	Hub       feed.Watcher
	Revisions feed.Revisions
	Codec     *codec.Codec
	Logger    *slog.Logger
	// Backoff is the pause after a failed list or watch. Default 1s.
	Backoff time.Duration
	// PageSize of the lists. Default 500.
	PageSize int64
}

// Authorizer is the Node authorizer with the feed keeping its graph
// current. Start begins feeding, Close ends it.
type Authorizer struct {
	z     *nodeauthorizer.NodeAuthorizer
	ident nodeidentifier.NodeIdentifier
	feed  *feed.Feed
}

// New checks cfg and builds the graph, the authorizer and the feed.
func New(cfg Config) (*Authorizer, error) {
	if cfg.Registry == nil {
		return nil, errors.New("cannot make Node authorizer: every dependency is required")
	}
	graph := nodeauthorizer.NewGraph()
	sinks := map[schema.GroupVersionResource]feed.Sink{}
	for gvr, s := range Sinks(graph) {
		if gate, ok := gates[gvr]; !ok || utilfeature.DefaultFeatureGate.Enabled(gate) {
			sinks[gvr] = s
		}
	}
	f, err := feed.New(feed.Config{
		Registry: cfg.Registry, Ranges: cfg.Ranges, Cache: cfg.Cache, Hub: cfg.Hub, Revisions: cfg.Revisions,
		Codec: cfg.Codec, Sinks: sinks, Logger: cfg.Logger, Backoff: cfg.Backoff, PageSize: cfg.PageSize,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make Node authorizer: %w", err)
	}
	a := newAuthorizer(graph)
	a.feed = f
	return a, nil
}

// newAuthorizer is upstream's Node authorizer over graph, as
// kube-apiserver builds it: the default node identifier and upstream's
// node rules.
func newAuthorizer(graph *nodeauthorizer.Graph) *Authorizer {
	ident := nodeidentifier.NewDefaultNodeIdentifier()
	return &Authorizer{z: nodeauthorizer.NewAuthorizer(graph, ident, bootstrappolicy.NodeRules()), ident: ident}
}

// gates are the feature gates without which kube-apiserver does not feed
// a resource to the graph; the others are always fed.
var gates = map[schema.GroupVersionResource]featuregate.Feature{
	slicesGVR: features.DynamicResourceAllocation,
	pcrsGVR:   features.PodCertificateRequest,
}

var (
	podsGVR        = corev1.SchemeGroupVersion.WithResource("pods")
	pvsGVR         = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	attachmentsGVR = storagev1.SchemeGroupVersion.WithResource("volumeattachments")
	slicesGVR      = resourcev1.SchemeGroupVersion.WithResource("resourceslices")
	pcrsGVR        = certsv1.SchemeGroupVersion.WithResource("podcertificaterequests")
)

// Start starts feeding the graph; call it once.
func (a *Authorizer) Start() { a.feed.Start() }

// Close stops the feed and waits for it.
func (a *Authorizer) Close() error { return a.feed.Close() }

// Synced reports whether every resource of the graph was listed once.
func (a *Authorizer) Synced() bool { return a.feed.Synced() }

// Ready is nil once synced: until then a kubelet would be denied objects
// of its node that the graph does not hold yet. The gateway's /readyz
// check "node-authorizer".
func (a *Authorizer) Ready(context.Context) error {
	if !a.Synced() {
		return errors.New("Node authorizer graph not synced yet")
	}
	return nil
}

// WaitSynced blocks until Synced or ctx ends.
func (a *Authorizer) WaitSynced(ctx context.Context) error { return a.feed.WaitSynced(ctx) }

// Authorize implements authz.Authorizer with upstream's decision: no
// opinion on users that are not nodes, Allow for what a node may do
// with its own objects, no opinion with upstream's reason otherwise.
func (a *Authorizer) Authorize(at authz.Attributes) (authz.Decision, string) {
	d, reason, _ := a.Evaluate(at)
	return d, reason
}

// Evaluate implements authz.Evaluator.
func (a *Authorizer) Evaluate(at authz.Attributes) (authz.Decision, string, error) {
	d, reason, err := a.z.Authorize(context.Background(), record(at))
	switch d {
	case authorizer.DecisionAllow:
		return authz.Allow, reason, err
	case authorizer.DecisionDeny:
		return authz.Deny, reason, err
	default:
		return authz.NoOpinion, reason, err
	}
}

// ErrNoRules is upstream's RulesFor error for nodes: their permissions
// depend on the graph and cannot be listed (a SelfSubjectRulesReview's
// evaluationError, the list incomplete).
var ErrNoRules = errors.New("node authorizer does not support user rule resolution")

// IsNode reports whether u is a node to this authorizer (its rules then
// cannot be listed: ErrNoRules).
func (a *Authorizer) IsNode(u user.Info) bool {
	_, ok := a.ident.NodeIdentity(u)
	return ok
}

// record is at as upstream's authorization filter builds it, selectors
// parsed (GetAuthorizerAttributes).
func record(at authz.Attributes) authorizer.AttributesRecord {
	r := authorizer.AttributesRecord{
		User: at.User, Verb: at.Verb, Namespace: at.Namespace, APIGroup: at.APIGroup, APIVersion: at.APIVersion,
		Resource: at.Resource, Subresource: at.Subresource, Name: at.Name, ResourceRequest: at.IsResourceRequest, Path: at.Path,
	}
	if at.FieldSelector != "" {
		if sel, err := fields.ParseSelector(at.FieldSelector); err != nil {
			r.FieldSelectorParsingErr = err
		} else if reqs := sel.Requirements(); len(reqs) > 0 {
			r.FieldSelectorRequirements = reqs
		}
	}
	if at.LabelSelector != "" {
		if sel, err := labels.Parse(at.LabelSelector); err != nil {
			r.LabelSelectorParsingErr = err
		} else if reqs, _ := sel.Requirements(); len(reqs) > 0 {
			r.LabelSelectorRequirements = reqs
		}
	}
	return r
}
