package archtest

import (
	"path"
	"sort"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package of the module has a package
// doc comment in a non-test file, written as Go's documentation
// convention wants it: "Package name ..." or, for a main package,
// "Command name ...".
func TestPackageDocs(t *testing.T) {
	_, own := modulePackages(t)
	var rels []string
	for rel := range own {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	for _, rel := range rels {
		p := own[rel]
		want := "Package " + p.Name + " "
		if p.Name == "main" {
			want = "Command " + path.Base(p.ImportPath) + " "
		}
		switch {
		case p.Doc == "":
			t.Errorf("%s has no package doc comment: add a doc.go (or a comment above `package %s` in its main file) saying %q", rel, p.Name, want+"...")
		case !strings.HasPrefix(p.Doc+" ", want):
			t.Errorf("%s: its package doc comment should begin %q, not %q", rel, want, p.Doc)
		}
	}
}
