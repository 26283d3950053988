package e2e

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestDevListenBusy starts kgate dev on an address another process
// listens on: it must fail with an error naming the cause, not crash.
func TestDevListenBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary; skipped under -short")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kgateBin, "dev", "--data-dir", t.TempDir(), "--listen", l.Addr().String())
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kgate dev on a busy address did not exit within %s", startTimeout)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("kgate dev on a busy address: %v, want exit status 1", err)
	}
	if s := out.String(); strings.Contains(s, "panic:") || !strings.Contains(s, "address already in use") {
		t.Errorf("kgate dev on busy %s: want an error saying the address is in use and no panic; output:\n%s", l.Addr(), out.crash())
	}
}
