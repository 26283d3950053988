package stream

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestStreamChunks(t *testing.T) {
	server, client := net.Pipe()
	done := make(chan error, 1)
	go func() {
		s, err := Start(server, time.Second, Header{"Content-Type", "application/json"})
		if err != nil {
			done <- err
			return
		}
		if err := s.Write([]byte(`{"a":1}` + "\n")); err != nil {
			done <- err
			return
		}
		if err := s.WriteFrames([]byte(`{"b":`), []byte("2}\n")); err != nil {
			done <- err
			return
		}
		done <- s.Close()
	}()
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Fatalf("body %q", body)
	}
	client.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStreamNoticesClientGone(t *testing.T) {
	server, client := net.Pipe()
	go io.Copy(io.Discard, client)
	s, err := Start(server, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	client.Close()
	select {
	case <-s.Gone():
	case <-time.After(5 * time.Second):
		t.Fatal("stream did not notice the client closing")
	}
	if err := s.Write([]byte("x")); err != ErrGone {
		t.Fatalf("write after gone: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStreamWriteDeadline(t *testing.T) {
	server, client := net.Pipe() // nobody reads client: writes block
	defer client.Close()
	s, err := startNoFlush(server, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(make([]byte, 1<<16)); err == nil {
		t.Fatal("write to a stuck reader succeeded")
	}
	<-s.Gone()
	s.Close()
}

// startNoFlush builds a stream without writing headers, for a peer that
// never reads.
func startNoFlush(conn net.Conn, timeout time.Duration) (*Stream, error) {
	s := &Stream{conn: conn, bw: bufio.NewWriterSize(conn, 1024), writeTimeout: timeout,
		gone: make(chan struct{}), readerDone: make(chan struct{})}
	go s.watchReader()
	return s, nil
}
