package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	startTimeout = 60 * time.Second // until kgate dev prints its kubeconfig
	readyTimeout = 15 * time.Second // then until /readyz answers ok
	stopTimeout  = 10 * time.Second // SIGTERM to exit
)

// server is a `kgate dev` process on a fixed data directory and address,
// stopped and started again in place. The log of every run is kept.
type server struct {
	dataDir string
	args    []string // more kgate dev flags
	addr    string   // 127.0.0.1:port, fixed by the first start
	log     syncBuffer
	runs    int

	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has exited
	waitErr error         // cmd.Wait's result, set before exited is closed

	// What the current run printed on stdout once ready.
	servingURL, kubeconfig, tryLine string
}

// startServer starts kgate dev on a free loopback port; the test's cleanup
// kills it if it still runs and dumps its log if the test failed.
func startServer(t *testing.T, dataDir string, args ...string) *server {
	t.Helper()
	s := &server{dataDir: dataDir, args: args}
	t.Cleanup(func() {
		if s.running() {
			s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			keepLog(t, "kgate-dev", &s.log)
		}
	})
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if s.addr, err = freeAddr(); err != nil {
			t.Fatal(err)
		}
		if err = s.start(); err == nil {
			return s
		}
		// Another process may take the port between freeAddr and kgate's
		// listen; only that is worth another port.
		if !portTaken(s.addr) {
			break
		}
	}
	t.Fatalf("cannot start kgate dev: %v", err)
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("cannot find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// portTaken tells whether another process listens on addr.
func portTaken(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return true
	}
	l.Close()
	return false
}

var (
	servingRE    = regexp.MustCompile(`(?m)^kgate is serving on (\S+)\n`)
	kubeconfigRE = regexp.MustCompile(`(?m)^  kubeconfig: (\S+)\n`)
	tryRE        = regexp.MustCompile(`(?m)^  try: +(.+)\n`)
)

// start runs kgate dev and returns once it printed its kubeconfig and
// /readyz answers "ok".
func (s *server) start() error {
	s.runs++
	fmt.Fprintf(&s.log, "==== e2e: kgate dev run %d on %s ====\n", s.runs, s.addr)
	var stdout syncBuffer
	cmd := exec.Command(kgateBin, append([]string{"dev", "--data-dir", s.dataDir, "--listen", s.addr}, s.args...)...)
	cmd.Stdout = io.MultiWriter(&stdout, &s.log)
	cmd.Stderr = &s.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot run %s: %w", kgateBin, err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited, s.waitErr = cmd, exited, nil
	go func() {
		s.waitErr = cmd.Wait()
		close(exited)
	}()

	deadline := time.Now().Add(startTimeout)
	for {
		out := stdout.String()
		if m := tryRE.FindStringSubmatch(out); m != nil {
			s.tryLine = m[1]
			if m := servingRE.FindStringSubmatch(out); m != nil {
				s.servingURL = m[1]
			}
			if m := kubeconfigRE.FindStringSubmatch(out); m != nil {
				s.kubeconfig = m[1]
			}
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("kgate dev exited before it was ready (%v):\n%s", s.waitErr, s.log.crash())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			<-exited
			return fmt.Errorf("kgate dev printed no kubeconfig within %s; stdout: %q", startTimeout, out)
		}
	}
	if s.kubeconfig == "" {
		return fmt.Errorf("kgate dev printed no kubeconfig path; stdout: %q", stdout.String())
	}
	return s.waitReady()
}

// waitReady polls /readyz with the admin credentials of the printed
// kubeconfig until it answers 200 "ok".
func (s *server) waitReady() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		return fmt.Errorf("cannot load the kubeconfig kgate printed: %w", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(readyTimeout)
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == "ok" {
				cancel()
				return nil
			}
			last = fmt.Sprintf("%s: %q", resp.Status, body)
		} else {
			last = err.Error()
		}
		cancel()
		if !s.running() {
			return fmt.Errorf("kgate dev exited while waiting for /readyz (%v):\n%s", s.waitErr, s.log.crash())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/readyz not ok within %s; last answer: %s", readyTimeout, last)
		}
		select { // an exit is seen at once, on the next round
		case <-s.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *server) running() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and expects a clean exit (status 0) within
// stopTimeout; it kills the process otherwise.
func (s *server) stop() error {
	if !s.running() {
		return fmt.Errorf("kgate dev had already exited (%v)", s.waitErr)
	}
	t0 := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("cannot send SIGTERM: %w", err)
	}
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("kgate dev did not exit within %s of SIGTERM; killed it", stopTimeout)
	}
	if s.waitErr != nil {
		return fmt.Errorf("kgate dev exited uncleanly %s after SIGTERM: %v\n%s", time.Since(t0).Round(time.Millisecond), s.waitErr, s.log.crash())
	}
	return nil
}

// checkAlive fails the step if kgate dev died during it, and starts it
// again on the same data directory so that the next steps can run.
func (s *server) checkAlive(t *testing.T) {
	t.Helper()
	if s.running() {
		return
	}
	t.Errorf("kgate dev exited during this step (%v):\n%s", s.waitErr, s.log.crash())
	if err := s.start(); err != nil {
		t.Fatalf("cannot start kgate dev again for the next steps: %v", err)
	}
	t.Logf("started kgate dev again (run %d) so that the next steps can run", s.runs)
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// keepLog writes a failed test's log of what to a file (in
// $KGATE_E2E_LOGDIR, or a kgate-e2e-logs folder in the temporary
// directory) and names it with its last lines. Printing the whole log
// would push the test's own failure messages out of a CI excerpt.
func keepLog(t *testing.T, what string, b *syncBuffer) {
	dir := os.Getenv("KGATE_E2E_LOGDIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kgate-e2e-logs")
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-" + what + ".log"
	path := filepath.Join(dir, name)
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(b.String()), 0o644)
	}
	if err != nil {
		t.Logf("%s log (cannot keep it: %v), last 300 lines:\n%s", what, err, b.tail(300))
		return
	}
	t.Logf("%s log kept in %s; its last lines:\n%s", what, path, b.tail(8))
}

// tail is the last n lines.
func (b *syncBuffer) tail(n int) string {
	lines := strings.SplitAfter(b.String(), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// crash is the last panic or fatal error in the log with its first stack
// lines, or the log's tail when there is none.
func (b *syncBuffer) crash() string {
	s := b.String()
	i := max(strings.LastIndex(s, "\npanic: "), strings.LastIndex(s, "\nfatal error: "))
	if i < 0 {
		return b.tail(20)
	}
	lines := strings.SplitAfter(s[i+1:], "\n")
	return strings.Join(lines[:min(len(lines), 24)], "")
}
