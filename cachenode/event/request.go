package event

import (
	"errors"
	"strconv"
	"strings"
)

// ProgressRequestPrefix starts the subjects on which gateways ask a
// range's primary how far the range is complete.
const ProgressRequestPrefix = "kgate.progressreq"

// ProgressRequestSubject is where a gateway asks for a Progress of range
// rangeID through a revision: a merged watch holds an event of another
// range at that revision and cannot release it before this range is known
// complete up to there. The range's primary answers on ProgressSubject.
func ProgressRequestSubject(rangeID string) string {
	return ProgressRequestPrefix + "." + rangeID
}

// ProgressRequestSubjects is the subject pattern of every range's
// progress requests, which cache nodes subscribe to.
const ProgressRequestSubjects = ProgressRequestPrefix + ".*"

// RangeOfProgressRequest returns the range id of a subject made by
// ProgressRequestSubject, or "" when it is not one.
func RangeOfProgressRequest(subject string) string {
	id, ok := strings.CutPrefix(subject, ProgressRequestPrefix+".")
	if !ok || id == "" || strings.IndexByte(id, '.') >= 0 {
		return ""
	}
	return id
}

// AppendProgressRequest appends the payload of a progress request through
// rev: the revision in decimal.
func AppendProgressRequest(b []byte, rev int64) []byte {
	return strconv.AppendInt(b, rev, 10)
}

// errBadRequest is returned for a progress request that is not a positive
// revision.
var errBadRequest = errors.New("event: progress request is not a positive revision")

// ParseProgressRequest returns the revision of a progress request payload.
func ParseProgressRequest(data []byte) (int64, error) {
	rev, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil || rev <= 0 {
		return 0, errBadRequest
	}
	return rev, nil
}
