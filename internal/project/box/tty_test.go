package box_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/project"
)

// TestShell_TTY runs `hutch project shell` and `hutch project exec` under
// a real pseudo-terminal (util-linux script allocates one): the command
// sees a TTY, input typed reaches it, and its exit code comes back.
func TestShell_TTY(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		if inCI() {
			t.Fatal("script (util-linux) is needed for the TTY test")
		}
		t.Skip("no script(1) to make a pseudo-terminal")
	}
	f := newFixture(t, nil)
	f.mustHutch(t, "up")
	for _, tc := range []struct {
		name, cmd, input, want string
		code                   int
	}{
		{"shell", f.bin + " project -C " + f.project + " shell", "echo tty=$(tty); exit 3\n", "tty=/dev/pts/", 3},
		{"exec", f.bin + " project -C " + f.project + " exec -- sh -c 'read line; echo got=$line; test -t 0 && exit 4'", "hello\n", "got=hello", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, script, "-qec", tc.cmd, "/dev/null")
			cmd.Env = f.env()
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Typed ahead: the terminal holds it until the command reads.
			if _, err := in.Write([]byte(tc.input)); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Errorf("exit %d, want %d; output lacks %q:\n%s", code, tc.code, tc.want, out.String())
			}
		})
	}
}

// TestUp_OffersToEnable: on a terminal, up on a project whose sandbox is
// off asks whether to turn it on; no leaves everything as it was, yes
// writes sandbox-enabled and brings the sandbox up.
func TestUp_OffersToEnable(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		if inCI() {
			t.Fatal("script (util-linux) is needed for the TTY test")
		}
		t.Skip("no script(1) to make a pseudo-terminal")
	}
	f := newFixture(t, map[string]any{project.KeyEnabled: false})
	settings := filepath.Join(f.config, "settings.json")
	ask := "The sandbox is off for " + f.project + ". Turn it on (sandbox-enabled for this project in " + settings + ")? [y/N] "
	up := func(answer string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, "-qec", f.bin+" project -C "+f.project+" up", "/dev/null")
		cmd.Env = f.env()
		cmd.Stdin = strings.NewReader(answer)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		return out.String(), 0
	}
	out, code := up("n\n")
	if code == 0 || !strings.Contains(out, ask) || !strings.Contains(out, "hutch: The sandbox is off for "+f.project+". Run `hutch project -C "+f.project+" enable`") {
		t.Errorf("answered no: exit %d, output:\n%s", code, out)
	}
	if exists, _ := f.running(t, f.name); exists {
		t.Error("answered no, and the sandbox was created")
	}
	out, code = up("y\n")
	if code != 0 || !strings.Contains(out, ask) || !strings.Contains(out, "The sandbox is on for "+f.project) || !strings.Contains(out, "Sandbox "+f.name+" is up for "+f.project) {
		t.Errorf("answered yes: exit %d, output:\n%s", code, out)
	}
	if _, running := f.running(t, f.name); !running {
		t.Error("answered yes, and the sandbox is not running")
	}
}
