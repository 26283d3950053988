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
	memo  []memoEntry
	named []namedEntry
}

type namedEntry struct {
	key  string
	data []byte
	err  error
}

type memoEntry struct {
	key  uint32
	data []byte
	err  error
}

func newShared(ev event.Event) *Shared { return &Shared{Event: ev} }

// Memo returns the bytes remembered under key, computing them with build
// the first time. Concurrent callers for the same key wait for one build.
func (s *Shared) Memo(key uint32, build func() ([]byte, error)) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.memo {
		if s.memo[i].key == key {
			return s.memo[i].data, s.memo[i].err
		}
	}
	data, err := build()
	s.memo = append(s.memo, memoEntry{key: key, data: data, err: err})
	return data, err
}

// MemoNamed is Memo under a string key, for what depends on more than a
// format and a type (an object converted to one served version).
func (s *Shared) MemoNamed(key string, build func() ([]byte, error)) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.named {
		if s.named[i].key == key {
			return s.named[i].data, s.named[i].err
		}
	}
	data, err := build()
	s.named = append(s.named, namedEntry{key: key, data: data, err: err})
	return data, err
}
