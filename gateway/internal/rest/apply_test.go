package rest

import (
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/gateway/internal/negotiate"
)

// The options of a patch as upstream's ValidatePatchOptions checks them:
// each bad case is 422 Invalid of PatchOptions naming the field.
func TestReadPatchOptions(t *testing.T) {
	long := strings.Repeat("m", 129)
	for _, tt := range []struct {
		name, query string
		pt          types.PatchType
		want        patchOptions
		wantCause   string // field of the 422's cause; "" for success
		wantCode    int32
	}{
		{"apply", "fieldManager=kubectl", types.ApplyPatchType, patchOptions{manager: "kubectl"}, "", 0},
		{"apply forced", "fieldManager=kubectl&force=true", types.ApplyPatchType, patchOptions{manager: "kubectl", force: true}, "", 0},
		{"apply without fieldManager", "", types.ApplyPatchType, patchOptions{}, "fieldManager", 422},
		{"apply with a long fieldManager", "fieldManager=" + long, types.ApplyPatchType, patchOptions{}, "fieldManager", 422},
		{"force on a merge patch", "force=true", types.MergePatchType, patchOptions{}, "force", 422},
		{"force not a boolean", "fieldManager=a&force=maybe", types.ApplyPatchType, patchOptions{}, "", 400},
		{"merge patch without fieldManager", "", types.MergePatchType, patchOptions{}, "", 0},
		{"unknown dryRun", "fieldManager=a&dryRun=Some", types.ApplyPatchType, patchOptions{}, "dryRun", 422},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := &fasthttp.RequestCtx{}
			rc.Request.SetRequestURI("/api/v1/namespaces/ns/configmaps/cm?" + tt.query)
			got, err := readPatchOptions(&request{rc: rc}, tt.pt, negotiate.Ignore)
			if tt.wantCode == 0 {
				if err != nil || got != tt.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			var se apierrors.APIStatus
			if !errors.As(err, &se) || se.Status().Code != tt.wantCode {
				t.Fatalf("got %v, want a %d", err, tt.wantCode)
			}
			st := se.Status()
			if tt.wantCode == 422 {
				if st.Details == nil || st.Details.Kind != "PatchOptions" || st.Details.Group != "meta.k8s.io" ||
					len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != tt.wantCause {
					t.Errorf("status %+v, want a cause on %s of PatchOptions.meta.k8s.io", st, tt.wantCause)
				}
			}
		})
	}
}

// A write's manager: the fieldManager option, else the user agent's
// prefix; a bad fieldManager is 422 of the write's options kind.
func TestManagerName(t *testing.T) {
	for _, tt := range []struct {
		query, userAgent, kind string
		want                   string
		wantErr                bool
	}{
		{"fieldManager=helm", "kubectl/v1.37.2", "CreateOptions", "helm", false},
		{"", "kubectl/v1.37.2 (linux/amd64) kubernetes/abc", "UpdateOptions", "kubectl", false},
		{"fieldManager=" + strings.Repeat("x", 129), "", "UpdateOptions", "", true},
	} {
		rc := &fasthttp.RequestCtx{}
		rc.Request.SetRequestURI("/api/v1/namespaces/ns/configmaps?" + tt.query)
		rc.Request.Header.SetUserAgent(tt.userAgent)
		got, err := managerName(&request{rc: rc}, tt.kind)
		if tt.wantErr {
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.kind+".meta.k8s.io") {
				t.Errorf("%q: got %q, %v; want 422 of %s", tt.query, got, err, tt.kind)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q, %q: got %q, %v; want %q", tt.query, tt.userAgent, got, err, tt.want)
		}
	}
}
