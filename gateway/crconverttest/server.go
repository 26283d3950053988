// Package crconverttest is a CustomResourceDefinition conversion webhook
// for tests: HTTPS on loopback (httptest's TLS server, its certificate
// as the caBundle), answering ConversionReview v1 and v1beta1 with a
// conversion function the test gives, counting the reviews it answers.
package crconverttest

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ConvertFunc converts obj (a copy the server owns) to apiVersion in
// place; an error fails the review.
type ConvertFunc func(obj *unstructured.Unstructured, apiVersion string) error

// Server is a conversion webhook. Close it when done.
type Server struct {
	srv     *httptest.Server
	convert ConvertFunc

	mu      sync.Mutex // guards reviews, objects
	reviews int        // ConversionReviews answered
	objects int        // objects converted
}

// Path is where the server answers reviews.
const Path = "/convert"

// New starts a conversion webhook on 127.0.0.1.
func New(convert ConvertFunc) *Server {
	s := &Server{convert: convert}
	mux := http.NewServeMux()
	mux.HandleFunc(Path, s.serve)
	s.srv = httptest.NewTLSServer(mux)
	return s
}

// URL is the webhook's url for the CRD's clientConfig.
func (s *Server) URL() string { return s.srv.URL + Path }

// CABundle is the PEM of the server's certificate, the CRD's caBundle.
func (s *Server) CABundle() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// Conversion is the CRD's spec.conversion calling this server with the
// given ConversionReview versions.
func (s *Server) Conversion(reviewVersions ...string) *apiextensionsv1.CustomResourceConversion {
	u := s.URL()
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &u, CABundle: s.CABundle()},
			ConversionReviewVersions: reviewVersions,
		},
	}
}

// Counts returns how many reviews were answered and how many objects
// they converted.
func (s *Server) Counts() (reviews, objects int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reviews, s.objects
}

// Close stops the server: later reviews fail to connect.
func (s *Server) Close() { s.srv.Close() }

// result is the review's result: the fields of a metav1.Status a
// webhook sets (a webhook's answer, not an API error).
type result struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// review is what v1 and v1beta1 ConversionReviews share.
type review struct {
	metav1.TypeMeta `json:",inline"`
	Request         *struct {
		UID               types.UID              `json:"uid"`
		DesiredAPIVersion string                 `json:"desiredAPIVersion"`
		Objects           []runtime.RawExtension `json:"objects"`
	} `json:"request,omitempty"`
	Response *struct {
		UID              types.UID              `json:"uid"`
		ConvertedObjects []runtime.RawExtension `json:"convertedObjects"`
		Result           result                 `json:"result"`
	} `json:"response,omitempty"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in review
	if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	if in.APIVersion != apiextensionsv1.SchemeGroupVersion.String() && in.APIVersion != apiextensionsv1beta1.SchemeGroupVersion.String() {
		http.Error(w, "unexpected apiVersion "+in.APIVersion, http.StatusBadRequest)
		return
	}
	out := review{TypeMeta: in.TypeMeta}
	out.Response = &struct {
		UID              types.UID              `json:"uid"`
		ConvertedObjects []runtime.RawExtension `json:"convertedObjects"`
		Result           result                 `json:"result"`
	}{UID: in.Request.UID, Result: result{Status: metav1.StatusSuccess}}
	for _, raw := range in.Request.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			out.Response.Result = result{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		if err := s.convert(u, in.Request.DesiredAPIVersion); err != nil {
			out.Response.Result = result{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		u.SetAPIVersion(in.Request.DesiredAPIVersion)
		b, err := u.MarshalJSON()
		if err != nil {
			out.Response.Result = result{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		out.Response.ConvertedObjects = append(out.Response.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	if out.Response.Result.Status != metav1.StatusSuccess {
		out.Response.ConvertedObjects = nil
	}
	s.mu.Lock()
	s.reviews++
	s.objects += len(out.Response.ConvertedObjects)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&out)
}

// RenameField is a ConvertFunc between versions of a kind whose spec
// field is called oldName in oldVersion and newName in every other
// version (e.g. spec.size in v1, spec.replicas in v2).
func RenameField(oldVersion, oldName, newName string) ConvertFunc {
	return func(obj *unstructured.Unstructured, apiVersion string) error {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return err
		}
		fromOld, toOld := obj.GroupVersionKind().Version == oldVersion, gv.Version == oldVersion
		if fromOld == toOld {
			return nil
		}
		from, to := newName, oldName
		if fromOld {
			from, to = oldName, newName
		}
		v, found, err := unstructured.NestedFieldNoCopy(obj.Object, "spec", from)
		if err != nil || !found {
			return err
		}
		unstructured.RemoveNestedField(obj.Object, "spec", from)
		return unstructured.SetNestedField(obj.Object, v, "spec", to)
	}
}
