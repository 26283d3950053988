package watchhub

import (
	"sync"

	"github.com/kgate/kgate/cachenode/event"
)

// Shared is one event as the hub hands it to all interested watchers. Its
// encodings are computed once and remembered, so a thousand watchers that
// want the same format cost one encoding.
type Shared struct {
	event.Event

	mu    sync.Mutex // guards memo and named
	memo  []memoEntry[uint32]
	named []memoEntry[string]
}

type memoEntry[K comparable] struct {
	key  K
	data []byte
	err  error
}

func newShared(ev event.Event) *Shared { return &Shared{Event: ev} }

// Memo returns the bytes remembered under key, computing them with build
// the first time. Concurrent callers for the same key wait for one build.
func (s *Shared) Memo(key uint32, build func() ([]byte, error)) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return memo(&s.memo, key, build)
}

// MemoNamed is Memo under a string key, for what depends on more than a
// format and a type (an object converted to one served version).
func (s *Shared) MemoNamed(key string, build func() ([]byte, error)) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return memo(&s.named, key, build)
}

// memo looks key up in entries, adding what build makes when it is not
// there; the caller holds the lock.
func memo[K comparable](entries *[]memoEntry[K], key K, build func() ([]byte, error)) ([]byte, error) {
	for _, e := range *entries {
		if e.key == key {
			return e.data, e.err
		}
	}
	data, err := build()
	*entries = append(*entries, memoEntry[K]{key: key, data: data, err: err})
	return data, err
}
