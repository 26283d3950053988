package dockercluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// docker runs the docker CLI.
type docker struct {
	bin string
}

// run runs docker with args and returns its standard output, trimmed; an
// error carries the command and its standard error.
func (d docker) run(ctx context.Context, args ...string) (string, error) {
	return d.runInput(ctx, nil, args...)
}

// runInput is run with stdin as the command's standard input.
func (d docker) runInput(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, d.bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(redact(args), " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// redact shortens a command line for errors: the arguments of a role
// after the image are long and say little about a failed docker call.
func redact(args []string) []string {
	if len(args) > 12 {
		return append(args[:12:12], "...")
	}
	return args
}

// Available reports why the docker CLI cannot reach an engine; nil when
// it can.
func Available(ctx context.Context, bin string) error {
	if bin == "" {
		bin = "docker"
	}
	if _, err := exec.LookPath(bin); err != nil {
		return fmt.Errorf("no docker CLI: %w", err)
	}
	if _, err := (docker{bin: bin}).run(ctx, "info", "--format", "{{.ServerVersion}}"); err != nil {
		return fmt.Errorf("no docker engine: %w", err)
	}
	return nil
}
