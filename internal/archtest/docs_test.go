package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// markdownLink is a link target in a Markdown file: [text](target) or a
// path in backquotes that leaves the repository (`../x`).
var (
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	outsidePath  = regexp.MustCompile("`\\.\\./[^`]*`")
)

// TestDocs_LinksStayInTheRepository: every relative link in README.md and
// docs/ names a file of the repository, and none points outside it. A
// clone has only the repository: a link to ../shared/DESIGN.md, as the
// README once had, leads nowhere.
func TestDocs_LinksStayInTheRepository(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, m := range outsidePath.FindAllString(string(data), -1) {
			t.Errorf("%s names %s, outside the repository", rel, m)
		}
		for _, m := range markdownLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			path := filepath.Clean(filepath.Join(filepath.Dir(file), target))
			if !strings.HasPrefix(path, root+string(filepath.Separator)) {
				t.Errorf("%s links to %s, outside the repository", rel, m[1])
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel, m[1])
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no link was checked: the pattern no longer matches the docs")
	}
}
