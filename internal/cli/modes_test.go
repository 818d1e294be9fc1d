package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestModes_Golden pins the capability table and what each mode needs.
func TestModes_Golden(t *testing.T) {
	var out, errb bytes.Buffer
	g := &globals{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, logLevel: "warn"}
	cmd := newModesCmd(g)
	cmd.SetArgs([]string{})
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("modes: %v\n%s", err, errb.String())
	}
	golden(t, filepath.Join("testdata", "modes.golden"), out.String())
}
