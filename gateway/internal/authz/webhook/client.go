package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1beta1 "k8s.io/api/authorization/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// maxResponseBytes bounds the webhook's answer.
const maxResponseBytes = 1 << 20

// firstBackoff is the wait before the first retry; each next one doubles.
const firstBackoff = 100 * time.Millisecond

// client posts reviews to the URL of the kubeconfig's cluster, as is: the
// path is the server's, nothing is appended (upstream's generic webhook).
type client struct {
	http    *http.Client
	url     string
	version string
	budget  time.Duration
	metrics *Metrics
}

func newClient(cfg Config) (*client, error) {
	rc, err := loadKubeconfig(cfg.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot load %s: %w", ErrConfig, cfg.ConfigFile, err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot make a client from %s: %w", ErrConfig, cfg.ConfigFile, err)
	}
	u := rc.Host
	if !strings.Contains(u, "://") {
		u = "https://" + u
	}
	return &client{http: hc, url: u, version: cfg.Version, budget: cfg.RetryBudget, metrics: cfg.Metrics}, nil
}

// loadKubeconfig reads only file (no $KUBECONFIG, no defaults), as
// k8s.io/apiserver's webhook.LoadKubeconfig; the client-side rate
// limiter is off.
func loadKubeconfig(file string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: file}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	rc.QPS = -1
	return rc, nil
}

// review asks the webhook about spec, retrying transient failures while
// the retry budget and ctx last.
func (c *client) review(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	body, err := c.encode(spec)
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	wait, waited := firstBackoff, time.Duration(0)
	for {
		st, retry, err := c.post(ctx, body)
		if err == nil || !retry || waited+wait > c.budget {
			return st, err
		}
		d := wait + time.Duration(rand.Int64N(int64(wait)/5+1)) // 20% jitter, as upstream
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, fmt.Errorf("%w (after: %w)", ctx.Err(), err)
		case <-t.C:
		}
		waited += wait
		wait *= 2
	}
}

func (c *client) encode(spec authorizationv1.SubjectAccessReviewSpec) ([]byte, error) {
	if c.version == authorizationv1beta1.SchemeGroupVersion.Version {
		return json.Marshal(&authorizationv1beta1.SubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: authorizationv1beta1.SchemeGroupVersion.String(), Kind: "SubjectAccessReview"},
			Spec:     v1beta1Spec(spec),
		})
	}
	return json.Marshal(&authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: authorizationv1.SchemeGroupVersion.String(), Kind: "SubjectAccessReview"},
		Spec:     spec,
	})
}

// post makes one call; retry tells whether a failure is worth another.
func (c *client) post(ctx context.Context, body []byte) (st authorizationv1.SubjectAccessReviewStatus, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return st, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		c.metrics.observe("<error>", time.Since(start))
		return st, utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err), err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	c.metrics.observe(strconv.Itoa(resp.StatusCode), time.Since(start))
	if err != nil {
		return st, utilnet.IsConnectionReset(err), fmt.Errorf("cannot read the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		retry = resp.StatusCode == http.StatusInternalServerError || resp.StatusCode == http.StatusGatewayTimeout ||
			resp.StatusCode == http.StatusTooManyRequests ||
			(resp.StatusCode >= 500 && resp.Header.Get("Retry-After") != "")
		return st, retry, fmt.Errorf("the server answered %s: %s", resp.Status, snippet(data))
	}
	if len(data) > maxResponseBytes {
		return st, false, fmt.Errorf("the answer is larger than %d bytes", maxResponseBytes)
	}
	st, err = decode(data)
	return st, false, err
}

// decode reads a SubjectAccessReview answer of either version (the
// status is the same in both); apiVersion and kind may be left out, as
// upstream's decoder defaults them, and so may status (no opinion).
func decode(data []byte) (authorizationv1.SubjectAccessReviewStatus, error) {
	var r struct {
		metav1.TypeMeta
		Status authorizationv1.SubjectAccessReviewStatus `json:"status"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, fmt.Errorf("cannot decode the answer: %w", err)
	}
	if r.Kind != "" && r.Kind != "SubjectAccessReview" {
		return authorizationv1.SubjectAccessReviewStatus{}, fmt.Errorf("the answer is a %s, not a SubjectAccessReview", r.Kind)
	}
	if r.APIVersion != "" && r.APIVersion != authorizationv1.SchemeGroupVersion.String() && r.APIVersion != authorizationv1beta1.SchemeGroupVersion.String() {
		return authorizationv1.SubjectAccessReviewStatus{}, fmt.Errorf("the answer has apiVersion %q", r.APIVersion)
	}
	return r.Status, nil
}

func snippet(b []byte) string {
	const n = 256
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
