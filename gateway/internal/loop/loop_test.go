package loop

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rounds := 0
		l := Start(time.Second, func(context.Context) { rounds++ })
		<-time.After(3500 * time.Millisecond) // fake time in the bubble
		synctest.Wait()
		l.Stop()
		if rounds != 3 {
			t.Fatalf("%d rounds in 3.5 intervals, want 3", rounds)
		}
		var off *Loop
		off.Stop()
	})
}
