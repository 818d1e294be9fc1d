package archtest

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// list runs `go list` over the module: the go tool is what builds it, so
// it is always there when tests run.
func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestEveryPackageHasOneDoc(t *testing.T) {
	for _, p := range list(t, "./...") {
		var docs []string
		for _, f := range p.GoFiles {
			file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if file.Doc != nil {
				docs = append(docs, f)
			}
		}
		if len(docs) != 1 {
			t.Errorf("%s has %d package comments (%v), want exactly 1", p.ImportPath, len(docs), docs)
		}
	}
}

// pure are the policy packages: data in, plans out.
var pure = []string{
	"github.com/hutchsandbox/hutch/internal/projection",
	"github.com/hutchsandbox/hutch/internal/sandbox",
	"github.com/hutchsandbox/hutch/internal/errdefs",
	"github.com/hutchsandbox/hutch/internal/migrate",
	"github.com/hutchsandbox/hutch/internal/devcontainer",
	"github.com/hutchsandbox/hutch/internal/jsonc",
	"github.com/hutchsandbox/hutch/internal/project",
	"github.com/hutchsandbox/hutch/internal/netpolicy",
}

// Direct imports a pure package must not have (fmt itself imports os, so
// os is checked on direct imports only), and packages it must not reach
// even indirectly. io/fs is allowed: it declares file types and
// interfaces (sandbox's file contract names fs.FileMode) and does no I/O
// itself, importing neither os nor syscall; os, which opens files, is
// what stays out.
var (
	bannedDirect     = []string{"os", "os/exec", "net", "net/http", "syscall"}
	bannedTransitive = []string{"os/exec", "net", "net/http", "github.com/moby/moby/client"}
)

func TestPurePackagesHaveNoEffects(t *testing.T) {
	pkgs := list(t, pure...)
	if len(pkgs) != len(pure) {
		t.Fatalf("go list found %d of the %d pure packages", len(pkgs), len(pure))
	}
	for _, p := range pkgs {
		if len(p.Imports) == 0 {
			t.Errorf("go list reports no imports for %s; the check would be vacuous", p.ImportPath)
		}
		for _, imp := range p.Imports {
			for _, banned := range bannedDirect {
				if imp == banned {
					t.Errorf("%s imports %s; pure policy packages must not", p.ImportPath, banned)
				}
			}
		}
		for _, dep := range p.Deps {
			for _, banned := range bannedTransitive {
				if dep == banned {
					t.Errorf("%s depends on %s; pure policy packages must not", p.ImportPath, banned)
				}
			}
		}
	}
}

// heavyInit are packages whose init registers, allocates or compiles
// enough to slow every hutch process down, each CLI call included: the
// generated Kubernetes clientset's scheme registers every API group (12
// ms and 0.7 MB per process here); kube mode speaks REST with a scheme of
// its own few types instead (internal/sandbox/kube's API).
var heavyInit = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/kubernetes/scheme",
}

func TestHutchLinksNoHeavyInit(t *testing.T) {
	pkgs := list(t, "github.com/hutchsandbox/hutch/cmd/hutch")
	if len(pkgs) != 1 || len(pkgs[0].Deps) == 0 {
		t.Fatalf("go list gave %d packages for cmd/hutch, or no deps; the check would be vacuous", len(pkgs))
	}
	seen := map[string]bool{}
	for _, dep := range pkgs[0].Deps {
		seen[dep] = true
	}
	if !seen["github.com/hutchsandbox/hutch/internal/sandbox/kube"] {
		t.Fatal("cmd/hutch no longer links kube mode; this check then says nothing")
	}
	for _, heavy := range heavyInit {
		if seen[heavy] {
			t.Errorf("cmd/hutch depends on %s, whose package init every hutch process pays for", heavy)
		}
	}
}
