package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExec_GondolinWithoutDaemonSaysItBoots: without a daemon, every
// hutch exec in gondolin:default boots a VM of its own (seconds under
// TCG) where image: reuses its container. exec --help, docs/microvm.md
// and the command's own stderr say so, with the way out.
func TestExec_GondolinWithoutDaemonSaysItBoots(t *testing.T) {
	e := newEnv(t)
	help := e.ok("exec", "--help")
	if !strings.Contains(help, execGondolinHelp) {
		t.Errorf("exec --help lacks the gondolin paragraph %q:\n%s", execGondolinHelp, help)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "microvm.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), microvmNoDaemonDoc) {
		t.Errorf("docs/microvm.md lacks %q", microvmNoDaemonDoc)
	}

	// No guest is built here, so the command fails after the note; what
	// matters is that the note comes first, on stderr, on one line.
	e.extra = map[string]string{"HUTCH_MICROVM_ASSETS": filepath.Join(t.TempDir(), "no-guest")}
	out, errOut, _ := e.run("", "exec", "--sandbox", "gondolin:default", "--conversation", "web/boot-note", "--", "true")
	first, _, _ := strings.Cut(errOut, "\n")
	if first != microvmNoDaemonNote {
		t.Errorf("first stderr line = %q, want %q\nstdout: %s\nstderr: %s", first, microvmNoDaemonNote, out, errOut)
	}
	// Other modes say nothing of the kind.
	e.ok("door", "set", "web/host-note", "shared")
	_, errOut, code := e.run("", "exec", "--sandbox", "host", "--conversation", "web/host-note", "--", "true")
	if code != 0 || strings.Contains(errOut, "microVM") {
		t.Errorf("host exec: exit %d, stderr %q", code, errOut)
	}
}
