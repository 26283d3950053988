package storagetest

import (
	"fmt"
	"testing"
	"time"
)

// fakeTB records what CheckGoroutines reports.
type fakeTB struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, a ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, a...))
}

func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestCheckGoroutines(t *testing.T) {
	f := func(name string, leak bool) {
		t.Run(name, func(t *testing.T) {
			fake := &fakeTB{TB: t}
			checkGoroutines(fake, 200*time.Millisecond)
			stop, ended := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(ended)
				<-stop
			}()
			if !leak {
				fake.Cleanup(func() { close(stop) })
			}
			fake.runCleanups()
			if leak {
				close(stop)
			}
			<-ended
			if got := len(fake.errors) > 0; got != leak {
				t.Errorf("leak reported %v, want %v: %v", got, leak, fake.errors)
			}
		})
	}
	f("goroutine stopped in cleanup", false)
	f("goroutine left running", true)
}
