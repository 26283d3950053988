package negotiate

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
)

func TestContentType(t *testing.T) {
	tests := []struct {
		ct   string
		want Format
		ok   bool
	}{
		{"", JSON, true},
		{"application/json", JSON, true},
		{"application/json; charset=utf-8", JSON, true},
		{"APPLICATION/JSON", JSON, true},
		{"application/yaml", YAML, true},
		{"application/vnd.kubernetes.protobuf", Protobuf, true},
		{"application/vnd.kubernetes.protobuf;stream=watch", Protobuf, true},
		{"application/json;", JSON, true},
		{"application/json; charset", JSON, false},
		{"text/plain", JSON, false},
		{"application/x-yaml", JSON, false},
		{"application/merge-patch+json", JSON, false},
		{"application/*", JSON, false},
		{"application/cbor", JSON, false},
	}
	f := newFixture(t)
	for _, tt := range tests {
		t.Run(tt.ct, func(t *testing.T) {
			got, err := ContentType(tt.ct)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ContentType(%q) = %v, %v; want %v, ok %v", tt.ct, got, err, tt.want, tt.ok)
			}
			if err != nil && !apierrors.IsUnsupportedMediaType(err) {
				t.Fatalf("error %v is not a 415", err)
			}
			checkContentTypeUpstream(t, f, tt.ct, got, err)
		})
	}
}

// checkContentTypeUpstream compares with kube-apiserver's input
// negotiation.
func checkContentTypeUpstream(t *testing.T, f *fixture, ct string, got Format, err error) {
	t.Helper()
	info, upErr := negotiation.NegotiateInputSerializerForMediaType(ct, false, f.codec.factory)
	if (err == nil) != (upErr == nil) {
		t.Fatalf("ContentType(%q) error %v; kube-apiserver %v", ct, err, upErr)
	}
	if err != nil {
		if err.Error() != upErr.Error() {
			t.Fatalf("message %q; kube-apiserver %q", err, upErr)
		}
		return
	}
	if info.MediaType != got.MediaType() {
		t.Fatalf("ContentType(%q) = %v; kube-apiserver %v", ct, got, info.MediaType)
	}
}

func FuzzContentType(f *testing.F) {
	for _, s := range []string{"", "application/json", "Application/Yaml; a=b", "application/vnd.kubernetes.protobuf;x=\"y\"", "text/plain;;"} {
		f.Add(s)
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, ct string) {
		got, err := ContentType(ct)
		checkContentTypeUpstream(t, fx, ct, got, err)
	})
}

func TestPatchType(t *testing.T) {
	tests := []struct {
		ct        string
		strategic bool
		want      types.PatchType
		ok        bool
	}{
		{"application/json-patch+json", true, types.JSONPatchType, true},
		{"application/merge-patch+json", false, types.MergePatchType, true},
		{"application/merge-patch+json; charset=utf-8", true, types.MergePatchType, true},
		{"application/strategic-merge-patch+json", true, types.StrategicMergePatchType, true},
		{"application/strategic-merge-patch+json", false, "", false},
		{"application/apply-patch+yaml", true, types.ApplyYAMLPatchType, true},
		{"application/apply-patch+yaml;charset=utf-8", false, types.ApplyYAMLPatchType, true},
		{"application/apply-patch+cbor", true, "", false},
		{"application/json", true, "", false},
		{"Application/Merge-Patch+JSON", true, "", false},
		{" application/merge-patch+json", true, "", false},
		{";application/merge-patch+json", true, "", false},
		{"", true, "", false},
	}
	for _, tt := range tests {
		got, err := PatchType(tt.ct, tt.strategic)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("PatchType(%q, %v) = %q, %v; want %q, ok %v", tt.ct, tt.strategic, got, err, tt.want, tt.ok)
		}
		if err != nil {
			if !apierrors.IsUnsupportedMediaType(err) {
				t.Errorf("error %v is not a 415", err)
			}
			if strings.Contains(err.Error(), "strategic") != tt.strategic {
				t.Errorf("error %q lists the wrong patch types", err)
			}
		}
	}
	_, err := PatchType("text/plain", true)
	want := "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
