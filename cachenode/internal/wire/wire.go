// Package wire is the private protocol between a cache node's read API and
// its client: plain HTTP GETs with query arguments, answered with binary
// bodies of uvarint-prefixed fields. Objects travel as the bytes the store
// holds; nothing is re-encoded per item.
//
//	get    → uvarint mod_revision, object bytes (the rest of the body)
//	list   → uvarint revision, uvarint remaining, bytes continue, uvarint count, count × bytes item
//	events → uvarint seen, uvarint count, count × bytes event (event.Event wire form)
//
// where bytes is a uvarint length and that many bytes. An error is a non-200
// status with the HeaderError kind and the message as body.
package wire

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/kgate/kgate/storage"
	"google.golang.org/protobuf/encoding/protowire"
)

// Paths served.
const (
	PathGet    = "/v1/get"
	PathList   = "/v1/list"
	PathEvents = "/v1/events"
	PathReady  = "/readyz"
)

// Query arguments.
const (
	ArgRange    = "range"
	ArgKey      = "key"
	ArgRV       = "rv"
	ArgMatch    = "match"
	ArgFormat   = "format"
	ArgPrefix   = "prefix"
	ArgLabel    = "label"
	ArgField    = "field"
	ArgLimit    = "limit"
	ArgContinue = "continue"
	ArgSince    = "since"
	// ArgWait is how long, in milliseconds, the server may wait for a
	// revision: the client's deadline minus a margin.
	ArgWait = "wait"
)

// Formats of objects.
const (
	FormatJSON     = "json"
	FormatProtobuf = "protobuf"
)

// Read matches, as in metav1.ResourceVersionMatch.
const (
	MatchNotOlderThan = "NotOlderThan"
	MatchExact        = "Exact"
)

// HeaderError carries the kind of error of a failed request.
const HeaderError = "X-Kgate-Error"

// Error kinds.
const (
	KindNotFound    = "notfound"
	KindCompacted   = "compacted"
	KindTooLarge    = "toolarge"
	KindUnavailable = "unavailable"
	KindBadRequest  = "badrequest"
	KindInternal    = "internal"
)

// ErrBadRequest marks a request the server refuses as malformed (a bad
// selector, a bad argument).
var ErrBadRequest = errors.New("cachenode: bad request")

// Kind returns the error kind and HTTP status of err.
func Kind(err error) (kind string, status int) {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return KindNotFound, http.StatusNotFound
	case errors.Is(err, storage.ErrCompacted):
		return KindCompacted, http.StatusGone
	case errors.Is(err, storage.ErrRevisionTooLarge):
		return KindTooLarge, http.StatusGatewayTimeout
	case errors.Is(err, storage.ErrUnavailable):
		return KindUnavailable, http.StatusServiceUnavailable
	case errors.Is(err, ErrBadRequest):
		return KindBadRequest, http.StatusBadRequest
	}
	return KindInternal, http.StatusInternalServerError
}

// Sentinel returns the error a kind stands for; badRequest is the client's
// bad request error.
func Sentinel(kind string, badRequest error) error {
	switch kind {
	case KindNotFound:
		return storage.ErrNotFound
	case KindCompacted:
		return storage.ErrCompacted
	case KindTooLarge:
		return storage.ErrRevisionTooLarge
	case KindUnavailable:
		return storage.ErrUnavailable
	case KindBadRequest:
		return badRequest
	}
	return nil
}

// AppendUvarint appends v.
func AppendUvarint(b []byte, v uint64) []byte { return protowire.AppendVarint(b, v) }

// AppendBytes appends a length-prefixed v.
func AppendBytes(b []byte, v []byte) []byte { return protowire.AppendBytes(b, v) }

// AppendString appends a length-prefixed s.
func AppendString(b []byte, s string) []byte { return protowire.AppendString(b, s) }

// ErrMalformed is returned for a body that does not parse.
var ErrMalformed = errors.New("cachenode: malformed response")

// Uvarint reads a uvarint from b.
func Uvarint(b []byte) (uint64, []byte, error) {
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, b, fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
	}
	return v, b[n:], nil
}

// Bytes reads a length-prefixed field from b; it aliases b.
func Bytes(b []byte) ([]byte, []byte, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, b, fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
	}
	return v[:len(v):len(v)], b[n:], nil
}
