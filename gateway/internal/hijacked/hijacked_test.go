package hijacked

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestDrain: Drain returns at once when nothing runs or everything ends
// by itself; a request that does not end has its connection closed, and
// one that then ends is not counted as still running; one that ignores
// the close is.
func TestDrain(t *testing.T) {
	var c Conns
	if cut, running := c.Drain(context.Background(), time.Second); cut != 0 || running != 0 {
		t.Fatalf("idle Drain = %d, %d", cut, running)
	}

	// A request that ends once its connection is closed.
	server, client := net.Pipe()
	defer client.Close()
	c.Admit()
	c.Attach(server)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = server.Read(make([]byte, 1)) // fails once Drain closes it
		c.End(server)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the owner's wait is over at once
	if cut, running := c.Drain(ctx, 10*time.Second); cut != 1 || running != 0 {
		t.Errorf("Drain = %d cut, %d running; want 1, 0", cut, running)
	}
	<-done

	// A request that ignores the close still runs after the grace.
	stuck, other := net.Pipe()
	defer other.Close()
	c.Admit()
	c.Attach(stuck)
	if cut, running := c.Drain(ctx, time.Millisecond); cut != 1 || running != 1 {
		t.Errorf("Drain = %d cut, %d running; want 1, 1", cut, running)
	}
	c.End(stuck)
	if cut, running := c.Drain(ctx, time.Millisecond); cut != 0 || running != 0 {
		t.Errorf("after End: Drain = %d, %d", cut, running)
	}
}
