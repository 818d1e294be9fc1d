package box_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
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
