package archtest

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestArchitectureMap checks that ARCHITECTURE.md maps every package of
// the module, and names nothing that is gone. A package is mapped when
// its path relative to the module root is written in backticks in the
// first cell of a table row, alone (`storage/ranges`) or in a group that
// expands to it (`cachenode/internal/{store,window}`). A first cell may
// also name a folder that is not a package of this module (manifests,
// nested modules); it must exist.
func TestArchitectureMap(t *testing.T) {
	m, own := modulePackages(t)
	mapped, err := mappedPaths(filepath.Join(m.Dir, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for rel := range own {
		if !mapped[rel] {
			missing = append(missing, rel)
		}
	}
	sort.Strings(missing)
	for _, rel := range missing {
		t.Errorf("%s is not in ARCHITECTURE.md: add a row to the table of its top-level folder, first cell `%s` (or add it to a `dir/{a,b}` group), saying what it owns", rel, rel)
	}
	for rel := range mapped {
		if _, ok := own[rel]; ok {
			continue
		}
		if fi, err := os.Stat(filepath.Join(m.Dir, filepath.FromSlash(rel))); err != nil || !fi.IsDir() {
			t.Errorf("ARCHITECTURE.md maps `%s`, which is not a folder of the repository: remove or rename its row", rel)
		}
	}
}

var backticked = regexp.MustCompile("`([^`]+)`")

// mappedPaths returns the paths written in backticks in the first cell of
// the table rows of the Markdown file name, groups expanded.
func mappedPaths(name string) (map[string]bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	paths := make(map[string]bool)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cell, _, _ := strings.Cut(line[1:], "|")
		for _, sub := range backticked.FindAllStringSubmatch(cell, -1) {
			for _, p := range expand(sub[1]) {
				paths[strings.TrimSuffix(p, "/")] = true
			}
		}
	}
	return paths, sc.Err()
}

// expand expands the first brace group of s and, recursively, the rest:
// "a/{b,c}" is "a/b" and "a/c".
func expand(s string) []string {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return []string{s}
	}
	end := strings.IndexByte(s[open:], '}')
	if end < 0 {
		return []string{s}
	}
	end += open
	var out []string
	for _, alt := range strings.Split(s[open+1:end], ",") {
		out = append(out, expand(s[:open]+strings.TrimSpace(alt)+s[end+1:])...)
	}
	return out
}

func TestExpand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"storage", []string{"storage"}},
		{"cachenode/internal/{store,window}", []string{"cachenode/internal/store", "cachenode/internal/window"}},
		{"gateway/internal/{a, b}/x", []string{"gateway/internal/a/x", "gateway/internal/b/x"}},
		{"{a,b}/{c,d}", []string{"a/c", "a/d", "b/c", "b/d"}},
		{"broken/{a", []string{"broken/{a"}},
	}
	for _, tt := range tests {
		if got := expand(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
