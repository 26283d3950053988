package storagetest

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// leakSettle is how long CheckGoroutines waits for goroutines to end.
const leakSettle = 10 * time.Second

// CheckGoroutines fails t if, when t's cleanups have run, goroutines exist
// that did not exist when CheckGoroutines was called. Call it first in the
// test, so that its cleanup runs after every other one (cleanups run
// last-in first-out). Goroutines get leakSettle to end.
func CheckGoroutines(t testing.TB) {
	t.Helper()
	checkGoroutines(t, leakSettle)
}

func checkGoroutines(t testing.TB, settle time.Duration) {
	t.Helper()
	before := map[string]bool{}
	for _, g := range goroutines() {
		before[g.id] = true
	}
	t.Cleanup(func() {
		var leaked []goroutine
		deadline := time.Now().Add(settle)
		for {
			leaked = leaked[:0]
			for _, g := range goroutines() {
				if !before[g.id] && !ignored(g.stack) {
					leaked = append(leaked, g)
				}
			}
			if len(leaked) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, g := range leaked {
			t.Errorf("leaked goroutine:\n%s", g.stack)
		}
	})
}

// ignored reports whether a goroutine is one that libraries start once per
// process and keep by design.
func ignored(stack string) bool {
	return strings.Contains(stack, "os/signal.signal_recv") ||
		strings.Contains(stack, "k8s.io/klog/v2.(*flushDaemon).run")
}

type goroutine struct {
	id    string
	stack string
}

func goroutines() []goroutine {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for _, s := range bytes.Split(buf, []byte("\n\n")) {
		rest, ok := bytes.CutPrefix(s, []byte("goroutine "))
		if !ok {
			continue
		}
		id, _, _ := bytes.Cut(rest, []byte(" "))
		out = append(out, goroutine{id: string(id), stack: string(s)})
	}
	return out
}
