// Package apierror is the one place where errors become the metav1.Status
// a client sees. Status maps storage errors, context deadlines and errors
// that already carry a Status; the constructors build the gateway's own
// client errors with k8s.io/apimachinery/pkg/api/errors, so their codes,
// reasons and messages are kube-apiserver's.
package apierror

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kgate/kgate/storage"
)

// Messages kube-apiserver uses for the same conditions.
const (
	conflictMessage = "the object has been modified; please apply your changes to the latest version and try again"
	expiredMessage  = "too old resource version"
	tooLargeMessage = "Too large resource version"
	timeoutMessage  = "request did not complete within requested timeout - context deadline exceeded"
)

// notReadyMessage and notReadySeconds are kube-apiserver's answer to a
// read of a resource whose watch cache is initializing (a 429).
const (
	notReadyMessage = "storage is (re)initializing"
	notReadySeconds = 1
)

// tooLargeRetrySeconds is the Retry-After of a resource version not yet
// reached, as kube-apiserver's watch cache sends it.
const tooLargeRetrySeconds = 1

// Status returns the Status a client sees for err, which happened on the
// object name of resource qualified (name may be empty). A nil err gives
// nil. Errors that carry a Status (apierrors.APIStatus, also wrapped) pass
// through; storage errors map to their Kubernetes equivalents; anything
// else is a 500 InternalError keeping err's message.
func Status(err error, qualified schema.GroupResource, name string) *metav1.Status {
	if err == nil {
		return nil
	}
	var se *apierrors.StatusError
	switch {
	case asAPIStatus(err) != nil:
		return complete(asAPIStatus(err).Status())
	case errors.Is(err, storage.ErrNotFound):
		se = apierrors.NewNotFound(qualified, name)
	case errors.Is(err, storage.ErrAlreadyExists):
		se = apierrors.NewAlreadyExists(qualified, name)
	case errors.Is(err, storage.ErrConflict):
		se = apierrors.NewConflict(qualified, name, errors.New(conflictMessage))
	case errors.Is(err, storage.ErrCompacted):
		// 410 Expired, as the etcd3 store and watch cache answer for
		// lists, watches and continue tokens (Gone is deprecated).
		se = apierrors.NewResourceExpired(withDetail(expiredMessage, err, storage.ErrCompacted))
	case errors.Is(err, storage.ErrRevisionTooLarge):
		se = apierrors.NewTimeoutError(withDetail(tooLargeMessage, err, storage.ErrRevisionTooLarge), tooLargeRetrySeconds)
		se.ErrStatus.Details.Causes = []metav1.StatusCause{{
			Type:    metav1.CauseTypeResourceVersionTooLarge,
			Message: tooLargeMessage,
		}}
	case errors.Is(err, storage.ErrNotReady):
		// As kube-apiserver's cacher while its watch cache initializes:
		// client-go waits Retry-After and tries again.
		se = apierrors.NewTooManyRequests(withDetail(notReadyMessage, err, storage.ErrNotReady), notReadySeconds)
	case errors.Is(err, storage.ErrUnavailable):
		se = apierrors.NewServiceUnavailable(err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		se = apierrors.NewTimeoutError(timeoutMessage, 0)
	default:
		// storage.ErrInvalidObject (a stored object that cannot be decoded
		// or encoded) and everything unexpected.
		se = apierrors.NewInternalError(err)
	}
	return complete(se.ErrStatus)
}

func asAPIStatus(err error) apierrors.APIStatus {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s
	}
	return nil
}

// complete fills what upstream's ErrorToAPIStatus fills: Status, a code
// matching it, and the Status kind.
func complete(s metav1.Status) *metav1.Status {
	if s.Status == "" {
		s.Status = metav1.StatusFailure
	}
	if s.Code == 0 {
		if s.Status == metav1.StatusSuccess {
			s.Code = http.StatusOK
		} else {
			s.Code = http.StatusInternalServerError
		}
	}
	s.Kind = "Status"
	s.APIVersion = "v1"
	return &s
}

// withDetail returns msg, followed by what err says beyond sentinel when
// err wraps it: "too old resource version: cannot watch from 12".
func withDetail(msg string, err, sentinel error) string {
	text := err.Error()
	if text == sentinel.Error() {
		return msg
	}
	return msg + ": " + strings.TrimSuffix(text, ": "+sentinel.Error())
}

// RetryAfter returns the seconds a client should wait before retrying, for
// the Retry-After header, when s asks for it.
func RetryAfter(s *metav1.Status) (seconds int, ok bool) {
	if s == nil || s.Details == nil || s.Details.RetryAfterSeconds <= 0 {
		return 0, false
	}
	return int(s.Details.RetryAfterSeconds), true
}

// BadRequest is a 400 BadRequest with message.
func BadRequest(message string) *apierrors.StatusError {
	return apierrors.NewBadRequest(message)
}

// ServiceUnavailable is a 503 ServiceUnavailable with message (a proxied
// Service with no port or endpoint to send to, as upstream's
// ResourceLocation says it).
func ServiceUnavailable(message string) *apierrors.StatusError {
	return apierrors.NewServiceUnavailable(message)
}

// UnprocessableEntity is the 422 kube-apiserver answers for a well-formed
// patch that cannot be applied (a failed JSON patch test, a missing path).
func UnprocessableEntity(message string) *apierrors.StatusError {
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, "", message, 0, false)
}

// Invalid is a 422 Invalid for the object name of kind qualified, with
// one cause per field error.
func Invalid(qualified schema.GroupKind, name string, errs field.ErrorList) *apierrors.StatusError {
	return apierrors.NewInvalid(qualified, name, errs)
}

// NotAcceptable is the 406 of a failed Accept negotiation: accepted lists
// the media types the endpoint serves.
func NotAcceptable(accepted []string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: fmt.Sprintf("only the following media types are accepted: %v", strings.Join(accepted, ", ")),
	}}
}

// UnsupportedMediaType is the 415 of a request body in a format the
// endpoint does not read: accepted lists the media types it reads.
func UnsupportedMediaType(accepted []string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %v",
			strings.Join(accepted, ", ")),
	}}
}

// RequestEntityTooLarge is the 413 of a body over limit bytes.
func RequestEntityTooLarge(limit int64) *apierrors.StatusError {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit))
}

// MethodNotSupported is the 405 of a verb (action) the resource does not
// serve.
func MethodNotSupported(qualified schema.GroupResource, action string) *apierrors.StatusError {
	return apierrors.NewMethodNotSupported(qualified, action)
}

// Forbidden is the 403 of a denied request on the object name of resource
// qualified; reason says why ("User \"u\" cannot get resource ...").
func Forbidden(qualified schema.GroupResource, name string, reason error) *apierrors.StatusError {
	return apierrors.NewForbidden(qualified, name, reason)
}

// Unauthorized is the 401 of a request without valid credentials; an
// empty message gives kube-apiserver's "Unauthorized".
func Unauthorized(message string) *apierrors.StatusError {
	if message == "" {
		message = "Unauthorized"
	}
	return apierrors.NewUnauthorized(message)
}

// ExpiredContinue is kube-apiserver's 410 for a continue token whose
// snapshot is gone. With a fresh token (one that continues from the same
// key at the latest revision) the Status carries it in
// metadata.continue, and the message says the list will be inconsistent.
func ExpiredContinue(freshToken string) *apierrors.StatusError {
	if freshToken == "" {
		return apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
	}
	se := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	se.ErrStatus.ListMeta.Continue = freshToken
	return se
}

// TooManyRequests is the 429 of a rejected request; the client should
// retry after retryAfterSeconds.
func TooManyRequests(message string, retryAfterSeconds int) *apierrors.StatusError {
	return apierrors.NewTooManyRequests(message, retryAfterSeconds)
}

// DisruptionBudget adds to err (a 429 or 403 of pods/eviction) the
// DisruptionBudget cause kube-apiserver's eviction REST attaches, with
// message; it returns err.
func DisruptionBudget(err *apierrors.StatusError, message string) *apierrors.StatusError {
	if err.ErrStatus.Details == nil {
		err.ErrStatus.Details = &metav1.StatusDetails{}
	}
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: message})
	return err
}

// Failure is a bare failure Status with code and message and no reason,
// as kube-apiserver's eviction REST returns for a pod with more than one
// PodDisruptionBudget (500).
func Failure(code int32, message string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Message: message}}
}

// NotFound is the 404 of the object name of resource qualified, when the
// gateway looks it up itself (a namespace, the object a token is bound
// to) rather than through storage's errors.
func NotFound(qualified schema.GroupResource, name string) *apierrors.StatusError {
	return apierrors.NewNotFound(qualified, name)
}

// Conflict is the 409 Conflict of the object name of resource qualified
// that is not in the state the request expects; reason says how.
func Conflict(qualified schema.GroupResource, name string, reason error) *apierrors.StatusError {
	return apierrors.NewConflict(qualified, name, reason)
}

// InternalError is the 500 of err, a failure of the gateway or of
// something it depends on, not of the request.
func InternalError(err error) *apierrors.StatusError {
	return apierrors.NewInternalError(err)
}

// ConversionFailed is kube-apiserver's answer when a custom resource
// cannot be converted between versions (its conversion webhook failed or
// answered wrongly): the converter's error is not a Status, so
// ErrorToAPIStatus makes it a 500 of unknown reason with err's message.
func ConversionFailed(err error) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: *complete(metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonUnknown, Message: err.Error(),
	})}
}

// Success is the Status of a request that succeeded with code and has no
// object to return (kube-apiserver answers a pods/binding create with a
// 201 Success Status).
func Success(code int32) *metav1.Status {
	return complete(metav1.Status{Status: metav1.StatusSuccess, Code: code})
}

// WebhookDenied is kube-apiserver's error for the admission webhook name
// that denied a request: the webhook's result (nil for none) as a
// failure, with a code of at least 400 and the message prefixed with who
// denied it.
func WebhookDenied(name string, result *metav1.Status) *apierrors.StatusError {
	deniedBy := fmt.Sprintf("admission webhook %q denied the request", name)
	s := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		s = *result.DeepCopy()
	}
	if s.Code < http.StatusBadRequest {
		s.Code = http.StatusBadRequest
	}
	if s.Status == "" || s.Status == metav1.StatusSuccess {
		s.Status = metav1.StatusFailure
	}
	switch {
	case s.Message != "":
		s.Message = deniedBy + ": " + s.Message
	case s.Reason != "":
		s.Message = deniedBy + ": " + string(s.Reason)
	default:
		s.Message = deniedBy + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: s}
}

// PolicyDenied is kube-apiserver's error for a ValidatingAdmissionPolicy
// that denied a request through binding, with the reason of the failed
// validation (Invalid 422 unless Unauthorized 401, Forbidden 403 or
// RequestEntityTooLarge 413) and msg as its one cause.
func PolicyDenied(policy, binding string, reason metav1.StatusReason, msg string) *apierrors.StatusError {
	m := fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", policy, binding, msg)
	code := int32(http.StatusUnprocessableEntity)
	switch reason {
	case metav1.StatusReasonUnauthorized:
		code = http.StatusUnauthorized
	case metav1.StatusReasonForbidden:
		code = http.StatusForbidden
	case metav1.StatusReasonRequestEntityTooLarge:
		code = http.StatusRequestEntityTooLarge
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Message: m, Reason: reason, Code: code,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: m}}},
	}}
}

// MutatingPoliciesDenied is kube-apiserver's error for
// MutatingAdmissionPolicies that failed under failurePolicy Fail, as its
// policy dispatcher builds it: 403 on the object, the first failure's
// message and reason, every failure a cause.
func MutatingPoliciesDenied(qualified schema.GroupResource, name string, reason metav1.StatusReason, messages []string) *apierrors.StatusError {
	err := apierrors.NewForbidden(qualified, name, errors.New("admission request denied by policy"))
	if len(messages) == 0 {
		return err
	}
	err.ErrStatus.Message = messages[0]
	if reason != "" {
		err.ErrStatus.Reason = reason
	}
	for _, m := range messages {
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Message: m})
	}
	return err
}

// Deleted is kube-apiserver's answer to a delete that removed an object
// of a resource whose registry store does not return the object (its
// finalizeDelete): Success, with the details naming the object and, as
// upstream does, the resource in the kind field; no code.
func Deleted(qualified schema.GroupResource, name string, uid types.UID) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: name, Group: qualified.Group, Kind: qualified.Resource, UID: uid},
	}
}

// StatusError is Status as an error, for upstream code run over kgate's
// storage that tells errors apart with apimachinery's apierrors.IsNotFound,
// IsAlreadyExists, IsConflict (the APF bootstrap ensurer).
func StatusError(err error, qualified schema.GroupResource, name string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: *Status(err, qualified, name)}
}
