// Package webhook is kube-apiserver's --authorization-mode Webhook: each
// request the modes before it leave undecided is posted as an
// authorization.k8s.io SubjectAccessReview to a remote service named by a
// kubeconfig file, as k8s.io/apiserver/plugin/pkg/authorizer/webhook does.
// Answers are cached by request (allowed for one TTL, denied or
// no opinion for a shorter one); transient failures are retried within a
// small budget; a call that still fails, or an answer that cannot be
// read, is no opinion, logged.
//
// The upstream package is not imported: it pulls in the apiserver's
// egress selector (konnectivity), OpenTelemetry and cobra modules,
// client-go's fake clients and klog's global logger. The client here uses
// client-go's rest config from the kubeconfig, so every credential a
// kubeconfig can carry (certificates, tokens, exec plugins) works.
package webhook

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1beta1 "k8s.io/api/authorization/v1beta1"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/kgate/kgate/gateway/internal/authz"
)

// Defaults: kube-apiserver's for the flags it has; Timeout is its
// per-call timeout for webhooks configured by flags.
const (
	DefaultAuthorizedTTL   = 5 * time.Minute
	DefaultUnauthorizedTTL = 30 * time.Second
	DefaultTimeout         = 30 * time.Second
	DefaultRetryBudget     = 300 * time.Millisecond
	DefaultVersion         = "v1"
)

// cacheSize is how many answers are kept (upstream: 8192).
const cacheSize = 8192

// maxCachedAttrBytes: requests whose requester-controlled attributes are
// this long are not cached (upstream's guard against filling the cache).
const maxCachedAttrBytes = 10000

// Clock tells the time for cache expiry.
type Clock interface{ Now() time.Time }

// Config configures the webhook authorizer.
type Config struct {
	// ConfigFile is the kubeconfig of the service: the current context's
	// cluster is the service (server URL, CA), its user the gateway's
	// credentials (client certificate, token). Required
	// (--authorization-webhook-config-file).
	ConfigFile string
	// Version is the SubjectAccessReview version sent: "v1" or
	// "v1beta1" (--authorization-webhook-version). Default v1.
	Version string
	// AuthorizedTTL is how long an allow is cached; UnauthorizedTTL how
	// long a deny or no opinion is. Zero means the default (5m, 30s);
	// negative, not cached.
	AuthorizedTTL   time.Duration
	UnauthorizedTTL time.Duration
	// Timeout bounds one decision, retries included. Default 30s.
	Timeout time.Duration
	// RetryBudget bounds the time spent waiting between retries of
	// transient failures (connection reset, 429, 500, 504, Retry-After).
	// Default 300ms; negative: no retries.
	RetryBudget time.Duration
	// Logger is required; Metrics optional.
	Logger  *slog.Logger
	Metrics *Metrics
	// Clock expires cached answers; default the wall clock (tests).
	Clock Clock
}

// ErrConfig is the class of every Config error.
var ErrConfig = errors.New("authorization webhook")

func (c *Config) validate() error {
	if c.ConfigFile == "" {
		return fmt.Errorf("%w: a config file is required", ErrConfig)
	}
	if c.Logger == nil {
		return fmt.Errorf("%w: a logger is required", ErrConfig)
	}
	switch c.Version {
	case "":
		c.Version = DefaultVersion
	case authorizationv1.SchemeGroupVersion.Version, authorizationv1beta1.SchemeGroupVersion.Version:
	default:
		return fmt.Errorf("%w: unsupported version %q, supported versions are \"v1\", \"v1beta1\"", ErrConfig, c.Version)
	}
	if c.AuthorizedTTL == 0 {
		c.AuthorizedTTL = DefaultAuthorizedTTL
	}
	if c.UnauthorizedTTL == 0 {
		c.UnauthorizedTTL = DefaultUnauthorizedTTL
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.RetryBudget == 0 {
		c.RetryBudget = DefaultRetryBudget
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	return nil
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Authorizer asks the webhook. It is safe for concurrent use.
type Authorizer struct {
	cfg    Config
	base   context.Context // cancelled at shutdown: ends calls in flight
	client *client
	cache  *cache.LRUExpireCache // cacheKey → SubjectAccessReviewStatus; has its own lock
}

// New reads the kubeconfig and returns the authorizer. Calls end when
// base does.
func New(base context.Context, cfg Config) (*Authorizer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Authorizer{cfg: cfg, base: base, client: c, cache: cache.NewLRUExpireCacheWithClock(cacheSize, cfg.Clock)}, nil
}

// Authorize implements authz.Authorizer: a failed call has no opinion.
func (w *Authorizer) Authorize(a authz.Attributes) (authz.Decision, string) {
	d, reason, _ := w.Evaluate(a)
	return d, reason
}

// Evaluate implements authz.Evaluator: a failed call has no opinion and
// returns why.
func (w *Authorizer) Evaluate(a authz.Attributes) (authz.Decision, string, error) {
	var key string // "": not cached
	if controlledBytes(a) < maxCachedAttrBytes {
		key = cacheKey(a)
		if v, ok := w.cache.Get(key); ok {
			d, reason := w.decision(a, v.(authorizationv1.SubjectAccessReviewStatus))
			return d, reason, nil
		}
	}
	ctx, cancel := context.WithTimeout(w.base, w.cfg.Timeout)
	defer cancel()
	st, err := w.client.review(ctx, Spec(a))
	if err != nil {
		w.cfg.Logger.Warn("authorization webhook failed, no opinion", "user", userName(a), "verb", a.Verb,
			"resource", a.Resource, "path", a.Path, "err", err)
		return authz.NoOpinion, "", fmt.Errorf("authorization webhook failed: %w", err)
	}
	if key != "" {
		if ttl := w.ttl(st.Allowed); ttl > 0 {
			w.cache.Add(key, st, ttl)
		}
	}
	d, reason := w.decision(a, st)
	return d, reason, nil
}

func (w *Authorizer) ttl(allowed bool) time.Duration {
	if allowed {
		return w.cfg.AuthorizedTTL
	}
	return w.cfg.UnauthorizedTTL
}

// decision reads a review's status as upstream: both allowed and denied
// is a deny (logged), denied a deny, allowed an allow, else no opinion.
func (w *Authorizer) decision(a authz.Attributes, st authorizationv1.SubjectAccessReviewStatus) (authz.Decision, string) {
	switch {
	case st.Denied && st.Allowed:
		w.cfg.Logger.Warn("authorization webhook answered both allowed and denied, denying", "user", userName(a), "verb", a.Verb, "resource", a.Resource)
		return authz.Deny, st.Reason
	case st.Denied:
		return authz.Deny, st.Reason
	case st.Allowed:
		return authz.Allow, st.Reason
	default:
		return authz.NoOpinion, st.Reason
	}
}

// controlledBytes is the length of the attributes a requester controls
// (upstream's shouldCache).
func controlledBytes(a authz.Attributes) int {
	return len(a.Namespace) + len(a.Verb) + len(a.APIGroup) + len(a.APIVersion) + len(a.Resource) +
		len(a.Subresource) + len(a.Name) + len(a.Path)
}

// cacheKey identifies a's review in the cache without building it (Spec
// parses the selectors): the user and every attribute, each
// length-prefixed, so that two requests share a key only when all of them
// are equal. It may tell apart requests whose reviews are equal
// (selectors that parse alike, a=b and a==b; resource requests differing
// only in path), never the reverse.
func cacheKey(a authz.Attributes) string {
	var name, uid string
	var groups []string
	var extra map[string][]string
	if u := a.User; u != nil {
		name, uid, groups, extra = u.GetName(), u.GetUID(), u.GetGroups(), u.GetExtra()
	}
	var buf [256]byte
	b := appendString(buf[:0], name)
	b = appendString(b, uid)
	b = appendStrings(b, groups)
	b = binary.AppendUvarint(b, uint64(len(extra)))
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		b = appendString(b, k)
		b = appendStrings(b, extra[k])
	}
	if a.IsResourceRequest {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, s := range [...]string{a.Verb, a.Namespace, a.APIGroup, a.APIVersion, a.Resource, a.Subresource, a.Name,
		a.Path, a.FieldSelector, a.LabelSelector} {
		b = appendString(b, s)
	}
	return string(b)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendStrings(b []byte, l []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, s := range l {
		b = appendString(b, s)
	}
	return b
}

func userName(a authz.Attributes) string {
	if a.User == nil {
		return ""
	}
	return a.User.GetName()
}
