package guard

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestWaitContext(t *testing.T) {
	read := func(t *testing.T, c net.Conn, want string) {
		t.Helper()
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("read %q, %v; want %q", buf[:n], err, want)
		}
	}
	t.Run("client gone while waiting", func(t *testing.T) {
		server, client := net.Pipe()
		tc := &trackedConn{Conn: server}
		w := &waitContext{base: context.Background(), conn: tc}
		done := w.Done()
		w.watch()
		// A pipelined request read while waiting is kept for the server.
		if _, err := client.Write([]byte("pipelined")); err != nil {
			t.Fatal(err)
		}
		client.Close()
		<-done
		if err := context.Cause(w); !errors.Is(err, errClientGone) {
			t.Fatalf("cause %v", err)
		}
		w.stop()
		read(t, tc, "pipelined")
		if _, err := tc.Read(make([]byte, 8)); err != io.EOF {
			t.Fatalf("after the read-ahead: %v, want EOF", err)
		}
	})
	t.Run("stopped with the client there", func(t *testing.T) {
		server, client := net.Pipe()
		defer client.Close()
		tc := &trackedConn{Conn: server}
		w := &waitContext{base: context.Background(), conn: tc}
		w.watch()
		w.stop()
		if err := context.Cause(w); !errors.Is(err, context.Canceled) {
			t.Fatalf("cause %v", err)
		}
		// No read deadline is left behind.
		go client.Write([]byte("next"))
		read(t, tc, "next")
	})
	t.Run("never waited", func(t *testing.T) {
		server, client := net.Pipe()
		defer client.Close()
		tc := &trackedConn{Conn: server}
		w := &waitContext{base: context.Background(), conn: tc}
		w.stop()
		if w.stopFn != nil || w.ctx != nil {
			t.Fatal("a context nobody waited on was made")
		}
		go client.Write([]byte("next"))
		read(t, tc, "next")
	})
	t.Run("deadline", func(t *testing.T) {
		w := &waitContext{base: context.Background(), deadline: time.Now().Add(time.Millisecond)}
		<-w.Done()
		if !errors.Is(w.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v", w.Err())
		}
		w.stop()
	})
	t.Run("shutdown", func(t *testing.T) {
		base, cancel := context.WithCancel(context.Background())
		w := &waitContext{base: base} // no tracked connection
		cancel()
		<-w.Done()
		w.stop()
	})
}
