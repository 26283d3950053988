package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the drawing goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPlain(t *testing.T) {
	var out syncBuffer
	b := New(&out, "seeding pods", 200)
	for range 200 {
		b.Add(1)
	}
	b.Close()
	b.Close() // twice is fine
	got := out.String()
	if strings.Contains(got, "\r") || strings.Contains(got, "\033") {
		t.Fatalf("plain output has terminal controls: %q", got)
	}
	if !strings.Contains(got, "seeding pods: 200/200 (100%)") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("final line missing: %q", got)
	}
}
