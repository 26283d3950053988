// Package storage keeps Kubernetes objects in etcd with kube-apiserver's key
// layout and optimistic concurrency: create, get, list, update and delete
// through etcd transactions, metadata.resourceVersion = the mod revision.
package storage

import (
	"errors"
	"fmt"
)

// Errors returned by storage and by the cache node read client. They say
// what happened, not what a client sees: the gateway maps them to
// metav1.Status in one place.
var (
	// ErrNotFound: no object at the key.
	ErrNotFound = errors.New("storage: not found")
	// ErrAlreadyExists: create of a key that holds an object.
	ErrAlreadyExists = errors.New("storage: already exists")
	// ErrConflict: a resourceVersion or UID precondition did not hold.
	ErrConflict = errors.New("storage: conflict")
	// ErrCompacted: the revision asked for is older than what is kept
	// (etcd compaction, or the cache node's window).
	ErrCompacted = errors.New("storage: revision compacted")
	// ErrRevisionTooLarge: the revision asked for was not reached in time.
	ErrRevisionTooLarge = errors.New("storage: resource version too large")
	// ErrUnavailable: the backend (etcd, cache node) did not answer.
	ErrUnavailable = errors.New("storage: unavailable")
	// ErrNotReady: no cache node serves the range yet (a resource just
	// added, or every replica restarting); an ErrUnavailable too, answered
	// as kube-apiserver answers while its watch cache initializes.
	ErrNotReady = fmt.Errorf("storage: not ready: %w", ErrUnavailable)
	// ErrInvalidObject: a stored or given object cannot be decoded or
	// encoded.
	ErrInvalidObject = errors.New("storage: invalid object")
	// ErrTooLarge: an object too large for etcd's request limit (an
	// ErrInvalidObject too). kube-apiserver's write handlers retry such a
	// write without managedFields.
	ErrTooLarge = fmt.Errorf("%w: too large for etcd", ErrInvalidObject)
)
