package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// module is the kgate module as `go list -m` describes it.
type module struct {
	Path string // github.com/kgate/kgate
	Dir  string // its root directory
}

// goPackage is the part of `go list -json` the checks read.
type goPackage struct {
	ImportPath string
	Name       string
	Dir        string
	Doc        string   // synopsis of the package comment of the non-test files
	ForTest    string   // set on the test variant of a package
	Imports    []string // of the variant: test variants include test imports
	GoFiles    []string
	Module     *module
	Error      *struct{ Err string }
}

// rel returns the package's path relative to the module root: "gateway",
// "storage/ranges".
func (p *goPackage) rel(m module) string {
	if p.ImportPath == m.Path {
		return "."
	}
	return strings.TrimPrefix(p.ImportPath, m.Path+"/")
}

// ours reports whether the package belongs to the kgate module (nested
// modules such as cmd/kubectl are other modules).
func (p *goPackage) ours(m module) bool {
	return p.Module != nil && p.Module.Path == m.Path
}

// goList runs the go command in dir and returns its standard output.
func goList(dir string, args ...string) ([]byte, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, errors.New("cannot find the go command on PATH: the rules are checked with `go list`")
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = dir
	// The module alone, as `make test` builds it, even inside a go.work.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New("go list " + strings.Join(args, " ") + ": " + err.Error() + ": " + stderr.String())
	}
	return out, nil
}

// loadModule returns the module this test is part of.
var loadModule = sync.OnceValues(func() (module, error) {
	out, err := goList(".", "-m", "-json")
	if err != nil {
		return module{}, err
	}
	var m module
	if err := json.Unmarshal(out, &m); err != nil {
		return module{}, err
	}
	return m, nil
})

// loadGraph returns every package of the module, their test variants and
// everything they import, transitively (`go list -deps -test ./...`).
var loadGraph = sync.OnceValues(func() ([]*goPackage, error) {
	m, err := loadModule()
	if err != nil {
		return nil, err
	}
	out, err := goList(m.Dir, "-e", "-deps", "-test",
		"-json=ImportPath,Name,Dir,Doc,ForTest,Imports,GoFiles,Module,Error", "./...")
	if err != nil {
		return nil, err
	}
	var pkgs []*goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(goPackage)
		if err := dec.Decode(p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
})

// load returns the module and its package graph, or stops the test.
func load(t *testing.T) (module, []*goPackage) {
	t.Helper()
	m, err := loadModule()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := loadGraph()
	if err != nil {
		t.Fatal(err)
	}
	return m, pkgs
}

// modulePackages returns the module's own packages (not their test
// variants, not the generated test mains), by path relative to the root.
func modulePackages(t *testing.T) (module, map[string]*goPackage) {
	t.Helper()
	m, pkgs := load(t)
	own := make(map[string]*goPackage)
	for _, p := range pkgs {
		if !p.ours(m) || p.ForTest != "" || strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		if p.Error != nil {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		own[p.rel(m)] = p
	}
	if len(own) == 0 {
		t.Fatal("go list found no package of the module")
	}
	return m, own
}
