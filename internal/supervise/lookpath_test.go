package supervise

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestLookPath(t *testing.T) {
	t.Parallel()
	// dir is the command's working directory; this test process runs
	// elsewhere, so a relative entry resolved against our own directory
	// would find nothing.
	dir := t.TempDir()
	mkdir := func(rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := func(rel string, mode os.FileMode) string {
		p := filepath.Join(dir, rel)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bin, other := mkdir("bin"), mkdir("other")
	mkdir("rel")
	prog := file("bin/prog", 0o755)
	relProg := file("rel/relprog", 0o755)
	here := file("hereprog", 0o755)
	file("bin/plain", 0o644)
	file("other/plain", 0o755) // a later entry does not excuse an earlier refusal
	mkdir("bin/adir")
	file("noexec", 0o644)

	for _, tt := range []struct {
		name, prog, path string
		want             string
		wantErr          string
	}{
		{"absolute_path_entry", "prog", bin, prog, ""},
		{"relative_entry_against_dir", "relprog", "rel", relProg, ""},
		{"dot_entry_is_dir", "hereprog", ".", here, ""},
		{"empty_entry_is_dir", "hereprog", bin + "::", here, ""},
		{"first_match_wins", "plain", other + ":" + bin, filepath.Join(other, "plain"), ""},
		{"slash_relative_to_dir", "./rel/relprog", "", relProg, ""},
		{"slash_absolute", prog, "", prog, ""},
		{"slash_ignores_path", "bin/prog", "/nonexistent", prog, ""},
		{"not_found", "hutch-no-such-program", bin, "", "Program not found: hutch-no-such-program"},
		{"slash_not_found", "./missing", bin, "", "Program not found: ./missing"},
		{"empty_prog", "", bin, "", "Program not found: "},
		{"not_executable_in_path", "plain", bin, "", "Program is not executable: plain"},
		{"directory_in_path", "adir", bin, "", "Program is not executable: adir"},
		{"slash_not_executable", "./noexec", "", "", "Program is not executable: ./noexec"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{"HOME=/nowhere"}
			if tt.path != "" {
				env = append(env, "PATH=/first/is/shadowed", "PATH="+tt.path)
			}
			got, err := LookPath(tt.prog, dir, env)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("LookPath(%q) = %q, %v; want error %q of class ErrInvalid", tt.prog, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("LookPath(%q) = %q, %v; want %q", tt.prog, got, err, tt.want)
			}
		})
	}
}

func TestLookPath_WithoutPathSearchesTheDefault(t *testing.T) {
	t.Parallel()
	got, err := LookPath("sh", t.TempDir(), []string{"HOME=/nowhere"})
	if err != nil || filepath.Base(got) != "sh" || !filepath.IsAbs(got) {
		t.Errorf("LookPath(sh) without PATH = %q, %v; want a sh from %s", got, err, DefaultPath)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"PATH=/usr/bin:/bin"}
	got, err := Resolve([]string{"echo $HOME"}, dir, env)
	want := Command{Path: "/bin/sh", Args: []string{"sh", "-c", "echo $HOME"}, Prog: "sh", Dir: dir, Env: env}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("Resolve(shell string) = %+v, %v; want %+v", got, err, want)
	}
	got, err = Resolve([]string{"sh", "-c", "true"}, dir, env)
	if err != nil || filepath.Base(got.Path) != "sh" || got.Prog != "sh" || !cmp.Equal(got.Args, []string{"sh", "-c", "true"}) {
		t.Errorf("Resolve(argv) = %+v, %v", got, err)
	}
	if _, err := Resolve([]string{"hutch-no-such-program", "x"}, dir, env); err == nil || err.Error() != "Program not found: hutch-no-such-program" {
		t.Errorf("Resolve(missing program) error = %v", err)
	}
}

func TestOverlayEnv(t *testing.T) {
	t.Parallel()
	base := []string{"A=1", "B=2", "A=3", "C=4"}
	got := OverlayEnv(base, map[string]string{"C": "5", "Z": "6", "D": "7"})
	want := []string{"A=3", "B=2", "C=5", "D=7", "Z=6"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OverlayEnv mismatch (-want +got):\n%s", diff)
	}
	if v, ok := lookupEnv(base, "A"); !ok || v != "3" {
		t.Errorf("lookupEnv(A) = %q, %v; want the last, 3", v, ok)
	}
}

func TestWorkDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := WorkDir(dir); err != nil || got != dir {
		t.Errorf("WorkDir(dir) = %q, %v", got, err)
	}
	for _, tt := range []struct{ dir, want string }{
		{filepath.Join(dir, "missing"), "Working directory does not exist: " + filepath.Join(dir, "missing")},
		{file, "Working directory is not a directory: " + file},
	} {
		if _, err := WorkDir(tt.dir); err == nil || err.Error() != tt.want || !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("WorkDir(%q) error = %v, want %q", tt.dir, err, tt.want)
		}
	}
}
