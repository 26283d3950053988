package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const (
	kubectlTimeout = 45 * time.Second // a whole kubectl run
	requestTimeout = "20s"            // kubectl's --request-timeout
)

// kubectl runs the kubectl under test against one kubeconfig.
type kubectl struct {
	kubeconfig string
	cacheDir   string // kubectl's discovery and HTTP cache, per test
}

// result is one finished kubectl run.
type result struct {
	args           []string
	stdout, stderr string
	err            error // nil on exit status 0
}

func (r result) String() string {
	return fmt.Sprintf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.err, r.stdout, r.stderr)
}

// args is every argument of a run: the connection flags, then a.
func (k *kubectl) args(a []string) []string {
	return append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir, "--request-timeout", requestTimeout}, a...)
}

func (k *kubectl) command(ctx context.Context, a []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, kubectlBin, k.args(a)...)
	// Only the flags say where the cluster is.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.WaitDelay = time.Second
	return cmd
}

func (k *kubectl) run(a ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := k.command(ctx, a)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("no exit within %s: %w", kubectlTimeout, err)
	}
	return result{args: a, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// ok runs kubectl, expects exit status 0 and nothing on stderr, and
// returns stdout.
func (k *kubectl) ok(t *testing.T, a ...string) string {
	t.Helper()
	r := k.run(a...)
	if r.err != nil {
		t.Fatalf("%s", r)
	}
	if r.stderr != "" {
		t.Errorf("kubectl %s: unexpected stderr: %q", strings.Join(a, " "), r.stderr)
	}
	return r.stdout
}

// fails runs kubectl and expects a non-zero exit status.
func (k *kubectl) fails(t *testing.T, a ...string) result {
	t.Helper()
	r := k.run(a...)
	if r.err == nil {
		t.Fatalf("kubectl %s succeeded, want an error; stdout:\n%s", strings.Join(a, " "), r.stdout)
	}
	var exit *exec.ExitError
	if !errors.As(r.err, &exit) {
		t.Fatalf("%s", r)
	}
	return r
}

// json runs kubectl with -o json and decodes stdout into v.
func (k *kubectl) json(t *testing.T, v any, a ...string) {
	t.Helper()
	out := k.ok(t, append(a, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kubectl %s -o json: cannot decode %T: %v\n%s", strings.Join(a, " "), v, err, out)
	}
}

// background is a kubectl left running (a watch); its stdout arrives on
// out, as lines or as JSON values.
type background struct {
	args   []string
	cmd    *exec.Cmd
	out    chan string
	stderr syncBuffer
	done   chan struct{} // closed once stdout is drained and cmd exited
	err    error         // cmd.Wait's result, set before done is closed
}

// start runs kubectl in the background until the test ends. With
// jsonStream, each value of the stdout stream is one item of out;
// otherwise each line is.
func (k *kubectl) start(t *testing.T, jsonStream bool, a ...string) *background {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	b := &background{args: a, cmd: k.command(ctx, a), out: make(chan string, 1000), done: make(chan struct{})}
	b.cmd.Stderr = &b.stderr
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("cannot start kubectl %s: %v", strings.Join(a, " "), err)
	}
	go func() {
		defer close(b.done)
		defer cancel()
		defer close(b.out)
		if jsonStream {
			dec := json.NewDecoder(stdout)
			for {
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					break
				}
				b.out <- string(v)
			}
		} else {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				b.out <- sc.Text()
			}
		}
		b.err = b.cmd.Wait()
	}()
	t.Cleanup(b.stop)
	return b
}

// next is the next item of stdout; it fails the test when none comes
// within timeout or kubectl exited.
func (b *background) next(t *testing.T, timeout time.Duration, what string) string {
	t.Helper()
	select {
	case s, ok := <-b.out:
		if !ok {
			<-b.done
			t.Fatalf("waiting for %s: kubectl %s exited (%v); stderr: %q", what, strings.Join(b.args, " "), b.err, b.stderr.String())
		}
		return s
	case <-time.After(timeout):
		t.Fatalf("waiting for %s: kubectl %s printed nothing within %s; stderr: %q", what, strings.Join(b.args, " "), timeout, b.stderr.String())
	}
	return ""
}

// stop ends the kubectl run and waits for it.
func (b *background) stop() {
	b.cmd.Process.Kill()
	for range b.out {
	}
	<-b.done
}
