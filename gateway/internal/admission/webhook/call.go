package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/kgate/kgate/gateway/internal/admission"
)

// maxResponseBytes bounds a webhook's answer.
const maxResponseBytes = 3 << 20

// clients caches one HTTP client per CA bundle and server name.
type clients struct {
	mu    sync.Mutex // guards byKey
	byKey map[string]*clientEntry
}

type clientEntry struct{ c *http.Client }

func (cs *clients) get(caBundle []byte, serverName string) (*http.Client, error) {
	key := serverName + "\x00" + string(caBundle)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if e, ok := cs.byKey[key]; ok {
		return e.c, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("invalid caBundle")
		}
		tc.RootCAs = pool
	}
	c := &http.Client{Transport: &http.Transport{
		TLSClientConfig: tc, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}
	if len(cs.byKey) > 256 {
		cs.byKey = map[string]*clientEntry{}
	}
	cs.byKey[key] = &clientEntry{c: c}
	return c, nil
}

// endpoint returns the URL to post to and the TLS server name.
func (p *Plugin) endpoint(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig) (string, string, error) {
	if cc.URL != nil {
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return "", "", err
		}
		if u.Scheme != "https" {
			return "", "", fmt.Errorf("webhook URL %q is not https", *cc.URL)
		}
		return u.String(), u.Hostname(), nil
	}
	s := cc.Service
	if s == nil {
		return "", "", errors.New("webhook has neither url nor service")
	}
	if p.cfg.Services == nil {
		return "", "", errors.New("service references are not supported")
	}
	ip, err := p.cfg.Services.ClusterIP(ctx, s.Namespace, s.Name)
	if err != nil {
		return "", "", fmt.Errorf("cannot resolve service %s/%s: %w", s.Namespace, s.Name, err)
	}
	port := int32(443)
	if s.Port != nil {
		port = *s.Port
	}
	path := ""
	if s.Path != nil {
		path = *s.Path
	}
	u := url.URL{Scheme: "https", Host: net.JoinHostPort(ip, strconv.Itoa(int(port))), Path: path}
	return u.String(), s.Name + "." + s.Namespace + ".svc", nil
}

// call posts a's AdmissionReview to h and returns the response.
func (p *Plugin) call(ctx context.Context, h *hook, a *admission.Attributes) (*admissionv1.AdmissionResponse, error) {
	timeout := p.cfg.DefaultTimeout
	if h.timeoutSeconds > 0 {
		timeout = time.Duration(h.timeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u, serverName, err := p.endpoint(ctx, h.clientConfig)
	if err != nil {
		return nil, err
	}
	c, err := p.clients.get(h.clientConfig.CABundle, serverName)
	if err != nil {
		return nil, err
	}
	review, err := p.review(a)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to call webhook: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("failed to read the webhook's response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("webhook answered %d: %s", resp.StatusCode, truncate(data))
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("cannot decode the webhook's response: %w", err)
	}
	if out.Response == nil {
		return nil, errors.New("webhook response was absent")
	}
	if out.Response.UID != review.Request.UID {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", review.Request.UID, out.Response.UID)
	}
	return out.Response, nil
}

func truncate(b []byte) string {
	if len(b) > 256 {
		b = b[:256]
	}
	return string(b)
}

// review builds the AdmissionReview v1 of a.
func (p *Plugin) review(a *admission.Attributes) (*admissionv1.AdmissionReview, error) {
	gvr, gvk := a.GVR(), a.GVK()
	r := &admissionv1.AdmissionRequest{
		UID:         types.UID(uuid.NewUUID()),
		Kind:        metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:    metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
		SubResource: a.Subresource,
		Name:        a.Name,
		Namespace:   a.Namespace,
		Operation:   admissionv1.Operation(a.Operation),
		DryRun:      &a.DryRun,
	}
	r.RequestKind, r.RequestResource, r.RequestSubResource = &r.Kind, &r.Resource, r.SubResource
	if u := a.User; u != nil {
		r.UserInfo = authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
		if ex := u.GetExtra(); len(ex) > 0 {
			r.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
			for k, v := range ex {
				r.UserInfo.Extra[k] = v
			}
		}
	}
	var err error
	if r.Object.Raw, err = p.encode(a.Object); err != nil {
		return nil, err
	}
	if r.OldObject.Raw, err = p.encode(a.OldObject); err != nil {
		return nil, err
	}
	if a.Options != nil {
		if r.Options.Raw, err = p.encode(a.Options); err != nil {
			return nil, err
		}
	}
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request:  r,
	}, nil
}

// encode writes obj as JSON with its apiVersion and kind.
func (p *Plugin) encode(obj runtime.Object) ([]byte, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, nil
	}
	obj = obj.DeepCopyObject()
	if gvks, _, err := p.cfg.Scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return json.Marshal(obj)
}

// applyPatch applies a webhook's JSON patch to obj.
func (p *Plugin) applyPatch(obj runtime.Object, pt *admissionv1.PatchType, patch []byte) (runtime.Object, error) {
	if pt == nil || *pt != admissionv1.PatchTypeJSONPatch {
		return nil, errors.New("the response's patchType must be JSONPatch")
	}
	doc, err := p.encode(obj)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, fmt.Errorf("cannot decode the patch: %w", err)
	}
	out, err := ops.Apply(doc)
	if err != nil {
		return nil, fmt.Errorf("cannot apply the patch: %w", err)
	}
	next := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(out, next); err != nil {
		return nil, fmt.Errorf("cannot decode the patched object: %w", err)
	}
	next.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return next, nil
}
