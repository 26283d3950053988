// Package stream writes a long-lived HTTP/1.1 chunked response on a
// connection hijacked from fasthttp, for watches: fasthttp cannot tell a
// handler that its client went away, so the stream keeps a reader on the
// connection to notice a close within a millisecond, and bounds every write
// with a deadline so a stuck reader cannot pin a goroutine.
package stream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Stream is one chunked response. Write methods must be called from one
// goroutine.
type Stream struct {
	conn         net.Conn
	bw           *bufio.Writer
	writeTimeout time.Duration
	deadlineSet  time.Time // when the write deadline was last moved
	hex          [16]byte  // a chunk's size line: a local array would escape to bufio's writer
	gone         chan struct{}
	goneOnce     sync.Once
	readerDone   chan struct{}
	closed       bool
}

// Header is one response header line.
type Header struct{ Name, Value string }

// Start writes the status line and headers of a 200 chunked response and
// starts watching conn for the client going away.
func Start(conn net.Conn, writeTimeout time.Duration, headers ...Header) (*Stream, error) {
	s := &Stream{
		conn:         conn,
		bw:           bufio.NewWriterSize(conn, 32<<10),
		writeTimeout: writeTimeout,
		gone:         make(chan struct{}),
		readerDone:   make(chan struct{}),
	}
	s.bw.WriteString("HTTP/1.1 200 OK\r\n")
	for _, h := range headers {
		s.bw.WriteString(h.Name)
		s.bw.WriteString(": ")
		s.bw.WriteString(h.Value)
		s.bw.WriteString("\r\n")
	}
	// A watch response is the last on its connection: saying so keeps
	// clients from sending their next request on it.
	s.bw.WriteString("Transfer-Encoding: chunked\r\nConnection: close\r\nCache-Control: no-cache, private\r\nDate: ")
	s.bw.WriteString(time.Now().UTC().Format(http1Date))
	s.bw.WriteString("\r\n\r\n")
	s.setDeadline()
	if err := s.flush(); err != nil {
		return nil, err
	}
	go s.watchReader()
	return s, nil
}

const http1Date = "Mon, 02 Jan 2006 15:04:05 GMT"

// watchReader blocks on Read: a watch client sends nothing after its
// request, so any return means it closed (or broke) the connection.
func (s *Stream) watchReader() {
	defer close(s.readerDone)
	var buf [512]byte
	for {
		if _, err := s.conn.Read(buf[:]); err != nil {
			s.markGone()
			return
		}
	}
}

func (s *Stream) markGone() { s.goneOnce.Do(func() { close(s.gone) }) }

// Gone is closed when the client went away or a write failed.
func (s *Stream) Gone() <-chan struct{} { return s.gone }

// ErrGone is returned by writes after the client went away.
var ErrGone = errors.New("stream: client gone")

// Write sends p as one chunk and flushes it.
func (s *Stream) Write(p []byte) error {
	return s.WriteFrames(p)
}

// WriteFrames sends the frames as one chunk and flushes.
func (s *Stream) WriteFrames(frames ...[]byte) error {
	select {
	case <-s.gone:
		return ErrGone
	default:
	}
	n := 0
	for _, f := range frames {
		n += len(f)
	}
	if n == 0 {
		return nil
	}
	// bufio flushes on its own when a frame exceeds its buffer: the
	// deadline must be in place before the first byte.
	s.setDeadline()
	s.bw.Write(strconv.AppendInt(s.hex[:0], int64(n), 16))
	s.bw.WriteString("\r\n")
	for _, f := range frames {
		s.bw.Write(f)
	}
	s.bw.WriteString("\r\n")
	if err := s.flush(); err != nil {
		return err
	}
	return nil
}

// setDeadline bounds the writes that follow by the write timeout. The
// deadline is moved at most every writeTimeout/16: a busy watch does not
// pay for it on every event, and a write still fails within the timeout
// (less at most a sixteenth of it).
func (s *Stream) setDeadline() {
	if s.writeTimeout <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(s.deadlineSet) < s.writeTimeout/16 {
		return
	}
	s.deadlineSet = now
	_ = s.conn.SetWriteDeadline(now.Add(s.writeTimeout))
}

// flush writes what is buffered; the caller set the deadline.
func (s *Stream) flush() error {
	if err := s.bw.Flush(); err != nil {
		s.markGone()
		return fmt.Errorf("cannot write to watch client: %w", err)
	}
	return nil
}

// Close ends the chunked body and closes the connection (a watch response
// is the last on its connection), then waits for the reader to stop.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	select {
	case <-s.gone:
	default:
		s.bw.WriteString("0\r\n\r\n")
		s.setDeadline()
		err = s.flush()
	}
	// fasthttp closes a hijacked connection only after the handler
	// returns (its Close is a no-op until then): wake the reader with a
	// deadline so this returns, then let fasthttp close.
	_ = s.conn.SetReadDeadline(time.Now())
	if cerr := s.conn.Close(); err == nil && cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		err = cerr
	}
	<-s.readerDone
	s.markGone()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}
