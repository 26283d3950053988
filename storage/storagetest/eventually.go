package storagetest

import (
	"errors"
	"testing"
	"time"
)

// Poll intervals of Eventually: the first retry comes soon, later ones
// back off so that a long wait costs little.
const (
	pollFirst = time.Millisecond
	pollMax   = 50 * time.Millisecond
)

// Eventually calls check until it returns nil and returns how long that
// took; if check still fails after within, it fails tb with what and
// check's last error. It is for conditions nothing announces (another
// server's answer, gossip between members): a test that can wait on an
// event (a channel, a WaitFor or Ready method, a watch) waits on that
// instead. It works in t.Cleanup functions too (t.Context has ended
// there). Inside a testing/synctest bubble it waits on the bubble's clock.
func Eventually(tb testing.TB, within time.Duration, what string, check func() error) time.Duration {
	tb.Helper()
	start := time.Now()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	wait := pollFirst
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		next := time.NewTimer(wait)
		select {
		case <-deadline.C:
			next.Stop()
			tb.Fatalf("%s: not so after %v: %v", what, within, err)
			return 0
		case <-next.C:
		}
		wait = min(2*wait, pollMax)
	}
}

// errNotYet is what Holds reports while its condition is false.
var errNotYet = errors.New("the condition is false")

// Holds adapts a condition that gives no reason to Eventually.
func Holds(cond func() bool) func() error {
	return func() error {
		if !cond() {
			return errNotYet
		}
		return nil
	}
}
