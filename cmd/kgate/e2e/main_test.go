package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Binaries the tests drive, set by TestMain.
var (
	kgateBin   string
	kubectlBin string
	binDir     string // where TestMain builds binaries; removed when the tests end
)

// kubectlLDFlags are the -X flags of cmd/kubectl/README.md: without them
// kubectl reports v0.0.0-master and its version-skew checks complain.
const kubectlLDFlags = "-s -w" +
	" -X k8s.io/component-base/version.gitMajor=1" +
	" -X k8s.io/component-base/version.gitMinor=37" +
	" -X k8s.io/component-base/version.gitVersion=v1.37.2" +
	" -X k8s.io/component-base/version.gitCommit=" +
	" -X k8s.io/component-base/version.gitTreeState=clean" +
	" -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test skips itself visibly; nothing to build.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "kgate-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinaries sets kgateBin and kubectlBin from KGATE_BIN and
// KUBECTL_BIN, building into dir whichever is not set.
func buildBinaries(dir string) error {
	kgateBin, kubectlBin = os.Getenv("KGATE_BIN"), os.Getenv("KUBECTL_BIN")
	if kgateBin != "" && kubectlBin != "" {
		return nil
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var kgateErr, kubectlErr error
	if kgateBin == "" {
		kgateBin = filepath.Join(dir, "kgate")
		wg.Go(func() {
			kgateErr = goBuild(root, nil, "-o", kgateBin, "./cmd/kgate")
		})
	}
	if kubectlBin == "" {
		kubectlBin = filepath.Join(dir, "kubectl")
		wg.Go(func() {
			// cmd/kubectl is its own module; the command is the one of
			// cmd/kubectl/README.md.
			kubectlErr = goBuild(filepath.Join(root, "cmd", "kubectl"), []string{"CGO_ENABLED=0"},
				"-trimpath", "-ldflags", kubectlLDFlags, "-o", kubectlBin, ".")
		})
	}
	wg.Wait()
	if kgateErr != nil {
		return fmt.Errorf("cannot build kgate: %w", kgateErr)
	}
	if kubectlErr != nil {
		return fmt.Errorf("cannot build kubectl: %w", kubectlErr)
	}
	return nil
}

// moduleRoot is the directory of kgate's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("cannot find the module root: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("cannot find the module root: not in a module")
	}
	return filepath.Dir(gomod), nil
}

func goBuild(dir string, env []string, args ...string) error {
	t0 := time.Now()
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", strings.Join(args, " "), dir, err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: go build %s (in %s) took %s\n", args[len(args)-1], dir, time.Since(t0).Round(time.Millisecond))
	return nil
}
