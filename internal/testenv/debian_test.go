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
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = eng.Close() }()
	base := func(ctx context.Context, w io.Writer) (string, error) {
		return imagebuild.ResolveBase(ctx, eng, imagebuild.DefaultBase, w)
	}
	ref := DebianGitImage(t, cli, base)
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
