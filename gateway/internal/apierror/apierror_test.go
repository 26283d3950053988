package apierror

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kgate/kgate/storage"
)

var (
	pods  = schema.GroupResource{Resource: "pods"}
	deps  = schema.GroupResource{Group: "apps", Resource: "deployments"}
	tmeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
)

// plainStatus is an APIStatus that is not a StatusError and leaves the
// code and status empty.
type plainStatus struct{}

func (plainStatus) Error() string { return "plain" }
func (plainStatus) Status() metav1.Status {
	return metav1.Status{Reason: metav1.StatusReasonUnknown, Message: "plain"}
}

func TestStatus(t *testing.T) {
	failure := func(code int32, reason metav1.StatusReason, message string, details *metav1.StatusDetails) *metav1.Status {
		return &metav1.Status{TypeMeta: tmeta, Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message, Details: details}
	}
	tests := []struct {
		name      string
		err       error
		resource  schema.GroupResource
		objName   string
		want      *metav1.Status
		clientSee func(error) bool // how client-go recognises it
	}{
		{"nil", nil, pods, "p", nil, nil},
		{"not found", fmt.Errorf("cannot get pods/p: %w", storage.ErrNotFound), pods, "p",
			failure(404, metav1.StatusReasonNotFound, `pods "p" not found`, &metav1.StatusDetails{Kind: "pods", Name: "p"}),
			apierrors.IsNotFound},
		{"not found in group", storage.ErrNotFound, deps, "d",
			failure(404, metav1.StatusReasonNotFound, `deployments.apps "d" not found`, &metav1.StatusDetails{Group: "apps", Kind: "deployments", Name: "d"}),
			apierrors.IsNotFound},
		{"already exists", fmt.Errorf("cannot create: %w", storage.ErrAlreadyExists), pods, "p",
			failure(409, metav1.StatusReasonAlreadyExists, `pods "p" already exists`, &metav1.StatusDetails{Kind: "pods", Name: "p"}),
			apierrors.IsAlreadyExists},
		{"conflict", fmt.Errorf("cannot update: %w", storage.ErrConflict), pods, "p",
			failure(409, metav1.StatusReasonConflict,
				`Operation cannot be fulfilled on pods "p": the object has been modified; please apply your changes to the latest version and try again`,
				&metav1.StatusDetails{Kind: "pods", Name: "p"}),
			apierrors.IsConflict},
		{"compacted", storage.ErrCompacted, pods, "",
			failure(410, metav1.StatusReasonExpired, "too old resource version", nil),
			apierrors.IsResourceExpired},
		{"compacted with detail", fmt.Errorf("cannot watch from revision 12 (oldest 40): %w", storage.ErrCompacted), pods, "",
			failure(410, metav1.StatusReasonExpired, "too old resource version: cannot watch from revision 12 (oldest 40)", nil),
			apierrors.IsResourceExpired},
		{"revision too large", fmt.Errorf("cannot wait for revision 99: %w", storage.ErrRevisionTooLarge), pods, "",
			failure(504, metav1.StatusReasonTimeout, "Timeout: Too large resource version: cannot wait for revision 99",
				&metav1.StatusDetails{RetryAfterSeconds: 1, Causes: []metav1.StatusCause{{
					Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}}),
			func(err error) bool {
				return apierrors.IsTimeout(err) && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
			}},
		{"unavailable", fmt.Errorf("cannot list: %w", storage.ErrUnavailable), pods, "",
			failure(503, metav1.StatusReasonServiceUnavailable, "cannot list: storage: unavailable", nil),
			apierrors.IsServiceUnavailable},
		{"not ready", fmt.Errorf("range pods-0: route: no ready replica: %w", storage.ErrNotReady), pods, "",
			failure(429, metav1.StatusReasonTooManyRequests, "storage is (re)initializing: range pods-0: route: no ready replica",
				&metav1.StatusDetails{RetryAfterSeconds: 1}),
			apierrors.IsTooManyRequests},
		{"invalid object", fmt.Errorf("cannot decode /registry/pods/ns/p: %w", storage.ErrInvalidObject), pods, "p",
			failure(500, metav1.StatusReasonInternalError, "Internal error occurred: cannot decode /registry/pods/ns/p: storage: invalid object",
				&metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "cannot decode /registry/pods/ns/p: storage: invalid object"}}}),
			apierrors.IsInternalError},
		{"deadline", fmt.Errorf("cannot get: %w", context.DeadlineExceeded), pods, "p",
			failure(504, metav1.StatusReasonTimeout, "Timeout: request did not complete within requested timeout - context deadline exceeded",
				&metav1.StatusDetails{}),
			apierrors.IsTimeout},
		{"other", errors.New("boom"), pods, "p",
			failure(500, metav1.StatusReasonInternalError, "Internal error occurred: boom",
				&metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "boom"}}}),
			apierrors.IsInternalError},
		{"status error passes through wrapped", fmt.Errorf("cannot admit: %w", apierrors.NewBadRequest("no")), pods, "p",
			failure(400, metav1.StatusReasonBadRequest, "no", nil),
			apierrors.IsBadRequest},
		{"api status gets code and kind", plainStatus{}, pods, "p",
			failure(500, metav1.StatusReasonUnknown, "plain", nil),
			nil},
		{"success status keeps 200", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusSuccess}}, pods, "p",
			&metav1.Status{TypeMeta: tmeta, Status: metav1.StatusSuccess, Code: 200},
			nil},

		// the gateway's own errors
		{"bad request", BadRequest("bad body"), pods, "",
			failure(400, metav1.StatusReasonBadRequest, "bad body", nil), apierrors.IsBadRequest},
		{"invalid", Invalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{
			field.Required(field.NewPath("spec", "containers"), ""),
			field.Invalid(field.NewPath("metadata", "name"), "P", "must be lower case"),
		}), pods, "p",
			failure(422, metav1.StatusReasonInvalid,
				`Pod "p" is invalid: [spec.containers: Required value, metadata.name: Invalid value: "P": must be lower case]`,
				&metav1.StatusDetails{Kind: "Pod", Name: "p", Causes: []metav1.StatusCause{
					{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.containers"},
					{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "P": must be lower case`, Field: "metadata.name"},
				}}),
			apierrors.IsInvalid},
		{"not acceptable", NotAcceptable([]string{"application/json", "application/yaml"}), pods, "",
			failure(406, metav1.StatusReasonNotAcceptable, "only the following media types are accepted: application/json, application/yaml", nil),
			apierrors.IsNotAcceptable},
		{"unsupported media type", UnsupportedMediaType([]string{"application/json", "application/yaml"}), pods, "",
			failure(415, metav1.StatusReasonUnsupportedMediaType,
				"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml", nil),
			apierrors.IsUnsupportedMediaType},
		{"entity too large", RequestEntityTooLarge(3 << 20), pods, "",
			failure(413, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 3145728", nil),
			apierrors.IsRequestEntityTooLargeError},
		{"method not supported", MethodNotSupported(schema.GroupResource{Resource: "bindings"}, "get"), pods, "",
			failure(405, metav1.StatusReasonMethodNotAllowed, `get is not supported on resources of kind "bindings"`,
				&metav1.StatusDetails{Kind: "bindings"}),
			apierrors.IsMethodNotSupported},
		{"forbidden", Forbidden(pods, "p", errors.New(`User "u" cannot get resource "pods" in API group "" in the namespace "ns"`)), pods, "",
			failure(403, metav1.StatusReasonForbidden,
				`pods "p" is forbidden: User "u" cannot get resource "pods" in API group "" in the namespace "ns"`,
				&metav1.StatusDetails{Kind: "pods", Name: "p"}),
			apierrors.IsForbidden},
		{"unauthorized", Unauthorized(""), pods, "",
			failure(401, metav1.StatusReasonUnauthorized, "Unauthorized", nil), apierrors.IsUnauthorized},
		{"too many requests", TooManyRequests("too many requests, please try again later", 3), pods, "",
			failure(429, metav1.StatusReasonTooManyRequests, "too many requests, please try again later",
				&metav1.StatusDetails{RetryAfterSeconds: 3}),
			apierrors.IsTooManyRequests},
		{"not found by the gateway", NotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), pods, "p",
			failure(404, metav1.StatusReasonNotFound, `namespaces "ns" not found`, &metav1.StatusDetails{Kind: "namespaces", Name: "ns"}),
			apierrors.IsNotFound},
		{"conflict with a reason", Conflict(schema.GroupResource{Resource: "Pod"}, "p", errors.New("the UID does not match")), pods, "",
			failure(409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on Pod "p": the UID does not match`,
				&metav1.StatusDetails{Kind: "Pod", Name: "p"}),
			apierrors.IsConflict},
		// Server-side apply's conflict: built by upstream's field manager
		// (managedfields, through apierrors.NewApplyConflict) and passed
		// through with its causes, one per conflicting field.
		{"apply conflict", fmt.Errorf("cannot apply: %w", apierrors.NewApplyConflict([]metav1.StatusCause{
			{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl"`, Field: ".data.color"},
			{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl"`, Field: ".data.size"},
		}, "Apply failed with 2 conflicts: conflicts with \"kubectl\":\n- .data.color\n- .data.size")), pods, "p",
			failure(409, metav1.StatusReasonConflict, "Apply failed with 2 conflicts: conflicts with \"kubectl\":\n- .data.color\n- .data.size",
				&metav1.StatusDetails{Causes: []metav1.StatusCause{
					{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl"`, Field: ".data.color"},
					{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl"`, Field: ".data.size"},
				}}),
			apierrors.IsConflict},
		{"internal error", InternalError(errors.New("cannot read namespace ns: boom")), pods, "",
			failure(500, metav1.StatusReasonInternalError, "Internal error occurred: cannot read namespace ns: boom",
				&metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "cannot read namespace ns: boom"}}}),
			apierrors.IsInternalError},
		{"conversion failed", fmt.Errorf("cannot serve: %w", ConversionFailed(errors.New(`conversion webhook for example.com/v1, Kind=Gadget failed: Post "https://127.0.0.1:1/convert": connection refused`))), pods, "",
			failure(500, metav1.StatusReasonUnknown, `conversion webhook for example.com/v1, Kind=Gadget failed: Post "https://127.0.0.1:1/convert": connection refused`, nil),
			nil},
		{"webhook denied without a result", WebhookDenied("w.example.com", nil), pods, "",
			failure(400, "", `admission webhook "w.example.com" denied the request without explanation`, nil), nil},
		{"webhook denied with a result", WebhookDenied("w", &metav1.Status{Code: 403, Reason: metav1.StatusReasonForbidden, Message: "no",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Field: "spec"}}}}), pods, "",
			failure(403, metav1.StatusReasonForbidden, `admission webhook "w" denied the request: no`,
				&metav1.StatusDetails{Causes: []metav1.StatusCause{{Field: "spec"}}}),
			apierrors.IsForbidden},
		{"webhook denied with a success and a reason", WebhookDenied("w", &metav1.Status{Status: metav1.StatusSuccess, Code: 200, Reason: "NotAllowed"}), pods, "",
			failure(400, "NotAllowed", `admission webhook "w" denied the request: NotAllowed`, nil), nil},
		{"policy denied", PolicyDenied("p", "b", metav1.StatusReasonInvalid, "x"), pods, "",
			failure(422, metav1.StatusReasonInvalid, "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: x",
				&metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: x"}}}),
			apierrors.IsInvalid},
		{"policy denied forbidden", PolicyDenied("p", "b", metav1.StatusReasonForbidden, "x"), pods, "",
			failure(403, metav1.StatusReasonForbidden, "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: x",
				&metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: x"}}}),
			apierrors.IsForbidden},
		{"policy denied unauthorized", PolicyDenied("p", "b", metav1.StatusReasonUnauthorized, "x"), pods, "",
			failure(401, metav1.StatusReasonUnauthorized, "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: x",
				&metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: x"}}}),
			apierrors.IsUnauthorized},
		{"policy denied too large", PolicyDenied("p", "b", metav1.StatusReasonRequestEntityTooLarge, "x"), pods, "",
			failure(413, metav1.StatusReasonRequestEntityTooLarge, "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: x",
				&metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: x"}}}),
			apierrors.IsRequestEntityTooLargeError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Status(tt.err, tt.resource, tt.objName)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tt.want)
			}
			if tt.clientSee != nil && !tt.clientSee(&apierrors.StatusError{ErrStatus: *got}) {
				t.Errorf("client-go does not recognise %#v", got)
			}
			if got != nil && http.StatusText(int(got.Code)) == "" {
				t.Errorf("code %d is not an HTTP status", got.Code)
			}
		})
	}
}

func TestStatusDoesNotAliasInput(t *testing.T) {
	se := apierrors.NewNotFound(pods, "p")
	got := Status(se, pods, "p")
	got.Message = "changed"
	if se.ErrStatus.Message == "changed" || se.ErrStatus.Kind != "" {
		t.Fatalf("input modified: %#v", se.ErrStatus)
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name    string
		status  *metav1.Status
		seconds int
		ok      bool
	}{
		{"nil", nil, 0, false},
		{"no details", Status(storage.ErrNotFound, pods, "p"), 0, false},
		{"zero", &metav1.Status{Details: &metav1.StatusDetails{}}, 0, false},
		{"too many requests", Status(TooManyRequests("x", 5), pods, ""), 5, true},
		{"revision too large", Status(storage.ErrRevisionTooLarge, pods, ""), 1, true},
		{"deadline", Status(context.DeadlineExceeded, pods, ""), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := RetryAfter(tt.status)
			if s != tt.seconds || ok != tt.ok {
				t.Fatalf("RetryAfter = %d, %v; want %d, %v", s, ok, tt.seconds, tt.ok)
			}
		})
	}
}

func TestSuccess(t *testing.T) {
	want := &metav1.Status{TypeMeta: tmeta, Status: metav1.StatusSuccess, Code: http.StatusCreated}
	if got := Success(http.StatusCreated); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
}

func TestWebhookDeniedDoesNotAliasResult(t *testing.T) {
	result := &metav1.Status{Code: 200, Message: "no", Details: &metav1.StatusDetails{Name: "x"}}
	se := WebhookDenied("w", result)
	se.ErrStatus.Details.Name = "changed"
	if result.Code != 200 || result.Message != "no" || result.Details.Name != "x" {
		t.Fatalf("result modified: %#v", result)
	}
}
