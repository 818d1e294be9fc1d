package testenv

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
)

// TestDebianGitImage is slow the first time on a machine (debootstrap of
// the base, then apt-get install git): a minute or two. Later runs reuse
// the image.
func TestDebianGitImage(t *testing.T) {
	t.Parallel()
	cli := Docker(t)
	label := "org.hutchsandbox.test=" + Name(t)
	CleanupContainers(t, cli, label)
	ref := DebianGitImage(t, cli, debianBase(t))
	if ref != DebianGitRef {
		t.Errorf("DebianGitImage = %q, want %q", ref, DebianGitRef)
	}
	// A second call finds the image and does not build.
	called := false
	if again := DebianGitImage(t, cli, func(context.Context, io.Writer) (string, error) { called = true; return "", nil }); again != ref || called {
		t.Errorf("second DebianGitImage = %q (base called: %v), want %q without a build", again, called, ref)
	}
	out, errOut, code := RunContainer(t, cli, ref, label, "sh", "-c",
		`git --version && bash -c 'echo bash $BASH_VERSINFO' && ls --version | head -1 && test -s /etc/ssl/certs/ca-certificates.crt && echo certs`)
	if code != 0 {
		t.Fatalf("tools in %s: exit %d, stdout %q, stderr %q", ref, code, out, errOut)
	}
	for _, want := range []string{"git version 2.", "bash 5", "ls (GNU coreutils)", "certs"} {
		if !strings.Contains(out, want) {
			t.Errorf("tools in %s: stdout %q lacks %q", ref, out, want)
		}
	}
}

// TestDebianClientsImage is slow the first time on a machine, as
// TestDebianGitImage is.
func TestDebianClientsImage(t *testing.T) {
	t.Parallel()
	cli := Docker(t)
	label := "org.hutchsandbox.test=" + Name(t)
	CleanupContainers(t, cli, label)
	ref := DebianClientsImage(t, cli, debianBase(t))
	if ref != DebianClientsRef {
		t.Errorf("DebianClientsImage = %q, want %q", ref, DebianClientsRef)
	}
	// Each tool runs: dig -v and nc -h print to stderr, and a tool that
	// is missing or cannot load its libraries exits non-zero.
	out, errOut, code := RunContainer(t, cli, ref, label, "sh", "-c",
		`set -e; curl --version; git --version; python3 -c 'import ssl; print(ssl.OPENSSL_VERSION)'; node -e 'require("https"); console.log("node", process.version)'; nc -h; dig -v; ip -V`)
	if code != 0 {
		t.Fatalf("tools in %s: exit %d, stdout %q, stderr %q", ref, code, out, errOut)
	}
	all := out + errOut
	for _, want := range []string{"curl 7.", "git version 2.", "OpenSSL 3.", "node v", "OpenBSD netcat", "DiG 9.", "ip utility"} {
		if !strings.Contains(all, want) {
			t.Errorf("tools in %s: output %q lacks %q", ref, all, want)
		}
	}
}

// debianBase resolves the base as the project's image builds do; the
// engine is closed when the test ends.
func debianBase(t *testing.T) DebianBase {
	t.Helper()
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return func(ctx context.Context, w io.Writer) (string, error) {
		return imagebuild.ResolveBase(ctx, eng, imagebuild.DefaultBase, w)
	}
}
