package storagetest

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, a ...any) {
	f.fatal = fmt.Sprintf(format, a...)
	runtime.Goexit()
}

func TestEventually(t *testing.T) {
	f := func(name string, within time.Duration, okAfter int, wantFatal bool) {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := &fatalTB{TB: t}
				calls := 0
				var took time.Duration
				done := make(chan struct{})
				go func() {
					defer close(done)
					took = Eventually(fake, within, "the condition", func() error {
						calls++
						if calls < okAfter {
							return errors.New("not yet")
						}
						return nil
					})
				}()
				<-done
				if got := fake.fatal != ""; got != wantFatal {
					t.Fatalf("failed = %v (%q), want %v", got, fake.fatal, wantFatal)
				}
				if wantFatal {
					if want := "the condition: not so after " + within.String() + ": not yet"; fake.fatal != want {
						t.Errorf("message %q, want %q", fake.fatal, want)
					}
					return
				}
				if calls != okAfter {
					t.Errorf("%d calls, want %d", calls, okAfter)
				}
				// Backoff 1, 2, 4, ... ms up to pollMax between calls.
				var want time.Duration
				for i, wait := 1, pollFirst; i < okAfter; i, wait = i+1, min(2*wait, pollMax) {
					want += wait
				}
				if took != want {
					t.Errorf("took %v on the bubble's clock, want %v", took, want)
				}
			})
		})
	}
	f("at once", time.Second, 1, false)
	f("after a few polls", time.Second, 4, false)
	f("after backing off to the longest wait", 10*time.Second, 12, false)
	f("never", time.Second, 1<<30, true)
}
