package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"
)

// BusyboxRef is the tiny test image BusyboxImage builds. Bump its tag
// whenever the image's contents change, so a stale image is not reused.
const BusyboxRef = "hutch-test-busybox:1"

// busyboxCandidates are where a static busybox is looked for, in order;
// Debian's busybox-static installs /bin/busybox.
var busyboxCandidates = []string{"/bin/busybox", "/usr/bin/busybox"}

const installBusybox = "install busybox-static (apt-get install -y busybox-static)"

// buildTimeout bounds finding, building and importing the image.
const buildTimeout = 2 * time.Minute

// buildMu keeps the tests of one process from building at the same time;
// the lock file does the same across processes.
var buildMu sync.Mutex

// BusyboxImage returns BusyboxRef, building it first when the engine does
// not have it. The image holds the host's static busybox at /bin/busybox, a
// symlink per applet in /bin, /etc/passwd and /etc/group (root, and nobody
// / nogroup 65534), /tmp (1777), /root (0700), /usr/local/bin and
// /workspace; its CMD is /bin/sh and its PATH the usual one. It is imported
// from an archive made in memory, so no registry is needed. Concurrent
// builds, in this process or another, are safe.
//
// Without a statically linked busybox on the host the test fails, saying
// to install busybox-static.
func BusyboxImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	if err := ensureBusyboxImage(ctx, cli, BusyboxRef); err != nil {
		t.Fatalf("test image %s: %v", BusyboxRef, err)
	}
	return BusyboxRef
}

// ensureBusyboxImage builds ref unless the engine already has it.
func ensureBusyboxImage(ctx context.Context, cli *client.Client, ref string) error {
	if ok, err := hasImage(ctx, cli, ref); err != nil || ok {
		return err
	}
	bb, err := findStaticBusybox(busyboxCandidates)
	if err != nil {
		return err
	}

	buildMu.Lock()
	defer buildMu.Unlock()
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "hutch-testenv-busybox.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	// Another test or process may have built it while we waited.
	if ok, err := hasImage(ctx, cli, ref); err != nil || ok {
		return err
	}

	archive, err := busyboxRootfs(ctx, bb)
	if err != nil {
		return err
	}
	importErr := importImage(ctx, cli, ref, archive)
	// Whatever the import said (a concurrent build from a host that does
	// not share our lock file may have raced us), the image is there or not.
	ok, err := hasImage(ctx, cli, ref)
	switch {
	case err != nil:
		return err
	case ok:
		return nil
	case importErr != nil:
		return fmt.Errorf("importing: %w", importErr)
	}
	return errors.New("imported, but the engine does not list the image")
}

// hasImage reports whether the engine knows ref.
func hasImage(ctx context.Context, cli *client.Client, ref string) (bool, error) {
	_, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("inspecting: %w", err)
}

// importImage imports a rootfs archive as ref and reads the engine's
// progress stream to its end, returning the error it reports, if any.
func importImage(ctx context.Context, cli *client.Client, ref string, archive []byte) error {
	rc, err := cli.ImageImport(ctx,
		client.ImageImportSource{Source: bytes.NewReader(archive), SourceName: "-"},
		ref,
		client.ImageImportOptions{
			Message: "hutch test image (internal/testenv)",
			Changes: []string{
				`CMD ["/bin/sh"]`,
				"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			},
		})
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	return engineStreamError(rc)
}

// lockFile takes an exclusive flock on path, polling so that ctx bounds
// the wait, and returns its release.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("opening the build lock: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the build lock %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// findStaticBusybox returns the first of candidates that is a statically
// linked executable.
func findStaticBusybox(candidates []string) (string, error) {
	var tried []string
	for _, p := range candidates {
		static, err := isStatic(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			tried = append(tried, fmt.Sprintf("%s: %v", p, err))
		case !static:
			tried = append(tried, p+" is dynamically linked")
		default:
			return p, nil
		}
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("no busybox found at %s: %s", strings.Join(candidates, " or "), installBusybox)
	}
	return "", fmt.Errorf("no static busybox (%s): %s", strings.Join(tried, "; "), installBusybox)
}

// isStatic reports whether path is an ELF executable without a program
// interpreter, i.e. one that runs without a dynamic loader or libc.
func isStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, err
		}
		return false, fmt.Errorf("not a readable ELF file: %w", err)
	}
	defer func() { _ = f.Close() }()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return false, fmt.Errorf("ELF type %v is not an executable", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// busyboxRootfs returns the image's root filesystem as a tar archive.
func busyboxRootfs(ctx context.Context, bb string) ([]byte, error) {
	bin, err := os.ReadFile(bb)
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, bb, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", bb, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("%s --list names no applets", bb)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	add := func(h *tar.Header, body []byte) {
		if err != nil {
			return
		}
		h.ModTime, h.Format = mtime, tar.FormatPAX
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err = tw.WriteHeader(h); err == nil && len(body) > 0 {
			_, err = tw.Write(body)
		}
	}
	dir := func(name string, mode int64) {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode}, nil)
	}
	file := func(name string, mode int64, body []byte) {
		add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, body)
	}

	dir("bin", 0o755)
	dir("etc", 0o755)
	dir("root", 0o700)
	dir("tmp", 0o1777)
	dir("usr", 0o755)
	dir("usr/local", 0o755)
	dir("usr/local/bin", 0o755)
	dir("workspace", 0o755)
	file("bin/busybox", 0o755, bin)
	for _, a := range applets {
		add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
	}
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	if err != nil {
		return nil, fmt.Errorf("writing the rootfs archive: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("writing the rootfs archive: %w", err)
	}
	return buf.Bytes(), nil
}
