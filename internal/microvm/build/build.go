package build

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
)

// The files of an asset directory, by asset name.
const (
	KernelFile = "vmlinuz"
	InitrdFile = "initrd.img"
	RootfsFile = "rootfs.ext4"
)

// DefaultFree is the free space the root filesystem gets unless told
// otherwise.
const DefaultFree int64 = 1 << 30

// maxFree bounds Free: the image is sparse, but every boot hashes all of
// it, so a typo such as 100T must not go through.
const maxFree int64 = 1 << 40

// DefaultDir is where gondolin:default's guest lives: <state dir>/microvm/default.
func DefaultDir(stateDir string) string { return filepath.Join(stateDir, "microvm", "default") }

// DefaultCacheDir is where downloaded kernel packages are kept between
// builds: <state dir>/microvm/cache.
func DefaultCacheDir(stateDir string) string { return filepath.Join(stateDir, "microvm", "cache") }

// Options says what to build.
type Options struct {
	// Engine is the connected container engine holding From.
	Engine *engine.Engine
	// From is the local Docker image whose filesystem becomes the guest's
	// root filesystem.
	From string
	// Dir is the asset directory to build; an older build there is
	// replaced when the new one is complete.
	Dir string
	// CacheDir keeps downloaded kernel packages; required unless
	// KernelDeb is set.
	CacheDir string
	// KernelDeb, when set, is the kernel package to use instead of
	// resolving and downloading Debian's cloud kernel with apt.
	KernelDeb string
	// Free is the free space of the root filesystem in bytes; 0 means
	// DefaultFree.
	Free int64
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Log receives debug records (commands run and their output); nil
	// discards them.
	Log *slog.Logger
}

// Validate checks the options without touching anything. Errors are of
// class errdefs.ErrInvalid.
func (o Options) Validate() error {
	switch {
	case o.Engine == nil:
		return errdefs.New(errdefs.ErrInvalid, "microVM image build: no container engine given")
	case strings.TrimSpace(o.From) == "":
		return errdefs.New(errdefs.ErrInvalid, "microVM image build: no Docker image to build the root filesystem from")
	case o.Dir == "":
		return errdefs.New(errdefs.ErrInvalid, "microVM image build: no asset directory given")
	case o.CacheDir == "" && o.KernelDeb == "":
		return errdefs.New(errdefs.ErrInvalid, "microVM image build: no kernel cache directory given (needed unless a kernel .deb is)")
	case o.Free < 0:
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("free space %d is negative", o.Free))
	case o.Free > maxFree:
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("free space %s is more than %s", formatSize(o.Free), formatSize(maxFree)))
	}
	return nil
}

// geteuid is os.Geteuid, replaced by tests of the refusal.
var geteuid = os.Geteuid

// CheckHost refuses, before anything is done, a build that cannot succeed
// here: one not running as root (extracting the image as anyone else would
// lose its file owners), or without the tools it runs: GNU tar, mke2fs,
// dpkg-deb, and apt-get and apt-cache unless kernelDeb is set. Errors are
// of class errdefs.ErrFailedPrecondition.
func CheckHost(kernelDeb string) error {
	if geteuid() != 0 {
		return errdefs.New(errdefs.ErrFailedPrecondition,
			"Building the microVM image needs root: the root filesystem must keep the Docker image's file owners, "+
				"and only root can create files owned by others. Run it with sudo (e.g. sudo hutch microvm image build).")
	}
	tools := []struct{ name, pkg string }{
		{"tar", "tar"}, {"mke2fs", "e2fsprogs"}, {"dpkg-deb", "dpkg"},
	}
	if kernelDeb == "" {
		tools = append(tools, struct{ name, pkg string }{"apt-get", "apt"}, struct{ name, pkg string }{"apt-cache", "apt"})
	}
	for _, t := range tools {
		if _, err := lookTool(t.name); err != nil {
			hint := fmt.Sprintf("install it with apt-get install %s", t.pkg)
			if strings.HasPrefix(t.name, "apt") {
				hint = "on a system without apt, download Debian's linux-image-*-cloud-amd64 package elsewhere and pass it with --kernel-deb"
			}
			return errdefs.New(errdefs.ErrFailedPrecondition,
				fmt.Sprintf("Building the microVM image needs %s, which is not installed: %s", t.name, hint))
		}
	}
	tar, _ := lookTool("tar")
	out, err := exec.Command(tar, "--version").Output()
	if err != nil || !bytes.Contains(out, []byte("GNU tar")) {
		return errdefs.New(errdefs.ErrFailedPrecondition,
			fmt.Sprintf("Building the microVM image needs GNU tar (for --xattrs), and %s is not: install it with apt-get install tar", tar))
	}
	return nil
}

// lookTool finds a tool on PATH, or in the sbin directories a user's PATH
// may lack (mke2fs lives in /usr/sbin).
func lookTool(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		c := filepath.Join(dir, name)
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", err
}

// MissingImageError is returned when the engine does not have Options.From.
// Its class is errdefs.ErrFailedPrecondition.
type MissingImageError struct {
	// Ref is the image asked for.
	Ref string
}

func (e *MissingImageError) Error() string {
	return fmt.Sprintf("The image %s does not exist in the container engine", e.Ref)
}

// Unwrap gives the error's class.
func (e *MissingImageError) Unwrap() error { return errdefs.ErrFailedPrecondition }

// builder is one build.
type builder struct {
	opts Options
	// dir is the absolute asset directory.
	dir string
	log *slog.Logger
	out io.Writer
}

// say writes a line of progress, best-effort: a build does not fail
// because its progress could not be shown.
func (b *builder) say(format string, args ...any) {
	_, _ = fmt.Fprintf(b.out, format+"\n", args...)
}

// Build builds the asset directory opts describes and returns its
// manifest. It refuses up front what cannot work (see CheckHost, Validate;
// a missing image is a *MissingImageError); a failure or cancellation
// removes everything the build made, and leaves an older build in
// opts.Dir as it was.
func Build(ctx context.Context, opts Options) (assets.Manifest, error) {
	if opts.Free == 0 {
		opts.Free = DefaultFree
	}
	if err := opts.Validate(); err != nil {
		return assets.Manifest{}, err
	}
	if err := CheckHost(opts.KernelDeb); err != nil {
		return assets.Manifest{}, err
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return assets.Manifest{}, fmt.Errorf("asset directory: %w", err)
	}
	if opts.CacheDir != "" {
		if opts.CacheDir, err = filepath.Abs(opts.CacheDir); err != nil {
			return assets.Manifest{}, fmt.Errorf("kernel cache directory: %w", err)
		}
	}
	b := &builder{opts: opts, dir: filepath.Clean(dir), log: opts.Log, out: opts.Progress}
	return b.build(ctx)
}

func (b *builder) build(ctx context.Context) (m assets.Manifest, err error) {
	start := time.Now()
	img, err := b.opts.Engine.Client.ImageInspect(ctx, b.opts.From)
	if err != nil {
		if engine.IsNotFound(err) {
			return assets.Manifest{}, &MissingImageError{Ref: b.opts.From}
		}
		return assets.Manifest{}, engine.Classify(err, "inspecting "+b.opts.From)
	}
	// The guest is x86_64 (Debian's amd64 cloud kernel under
	// qemu-system-x86_64); another architecture's files would not run.
	if img.Architecture != "" && img.Architecture != "amd64" {
		return assets.Manifest{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"The image %s is built for %s; the microVM guest runs amd64 (x86_64) images only", b.opts.From, img.Architecture))
	}

	parent := filepath.Dir(b.dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return assets.Manifest{}, fmt.Errorf("creating %s: %w", parent, err)
	}
	// Checked before taking the lock too, so that a refused directory
	// does not get a lock file next to it.
	if err := checkReplaceable(b.dir); err != nil {
		return assets.Manifest{}, err
	}
	unlock, err := lockDir(b.dir)
	if err != nil {
		return assets.Manifest{}, err
	}
	defer unlock()
	if err := checkReplaceable(b.dir); err != nil {
		return assets.Manifest{}, err
	}
	b.sweepLeftovers(ctx)

	staging, err := os.MkdirTemp(parent, filepath.Base(b.dir)+".building-")
	if err != nil {
		return assets.Manifest{}, fmt.Errorf("creating the staging directory: %w", err)
	}
	defer func() {
		if err != nil {
			if rmErr := os.RemoveAll(staging); rmErr != nil {
				b.log.Warn("removing the staging directory", "path", staging, "err", rmErr)
			}
		}
	}()
	if err := os.Chmod(staging, 0o755); err != nil {
		return assets.Manifest{}, err
	}
	work := filepath.Join(staging, ".work")

	// The kernel and its modules.
	kpkg, err := b.kernelDeb(ctx)
	if err != nil {
		return assets.Manifest{}, err
	}
	kt, err := b.extractKernel(ctx, kpkg, filepath.Join(work, "kernel"))
	if err != nil {
		return assets.Manifest{}, err
	}
	kinfo, err := os.Stat(kt.Image)
	if err != nil {
		return assets.Manifest{}, err
	}
	if err := os.Rename(kt.Image, filepath.Join(staging, KernelFile)); err != nil {
		return assets.Manifest{}, fmt.Errorf("placing the kernel: %w", err)
	}
	if err := os.Chmod(filepath.Join(staging, KernelFile), 0o644); err != nil {
		return assets.Manifest{}, err
	}
	mods, err := resolveModules(kt.ModDir, GuestModules, readModinfoELF)
	if err != nil {
		return assets.Manifest{}, fmt.Errorf("kernel %s: %w", kt.Version, err)
	}
	names := make([]string, len(mods))
	for i, m := range mods {
		names[i] = m.Name
	}
	b.say("Kernel: %s, %d modules for the guest (%s)", kt.Version, len(mods), strings.Join(names, ", "))
	initrdSize, err := b.writeInitrdFile(filepath.Join(staging, InitrdFile), kt, mods, kinfo.ModTime())
	if err != nil {
		return assets.Manifest{}, err
	}
	b.say("Initrd: wrote %s (%d modules, %s)", InitrdFile, len(mods), formatSize(initrdSize))
	if err := os.RemoveAll(filepath.Join(work, "kernel")); err != nil {
		return assets.Manifest{}, err
	}

	// The root filesystem.
	tree := filepath.Join(work, "rootfs")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return assets.Manifest{}, err
	}
	b.say("Root filesystem: exporting %s (%s)", b.opts.From, img.ID)
	if err := b.exportTree(ctx, img.ID, tree); err != nil {
		return assets.Manifest{}, err
	}
	added, err := addMountPoints(tree)
	if err != nil {
		return assets.Manifest{}, fmt.Errorf("adding the guest's mount points: %w", err)
	}
	if len(added) > 0 {
		b.say("Root filesystem: added the mount points %s", strings.Join(added, ", "))
	}
	// The engine creates /.dockerenv in every container; the guest is not
	// one, and tools reading the file would be misled.
	if err := os.Remove(filepath.Join(tree, ".dockerenv")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return assets.Manifest{}, err
	}
	if _, err := b.makeExt4(ctx, tree, filepath.Join(staging, RootfsFile), b.opts.Free); err != nil {
		return assets.Manifest{}, err
	}
	if err := os.RemoveAll(work); err != nil {
		return assets.Manifest{}, fmt.Errorf("removing the build's work directory: %w", err)
	}

	// The manifest, last.
	m, err = b.record(staging)
	if err != nil {
		return assets.Manifest{}, err
	}
	m.Source = fmt.Sprintf("%s (%s); kernel %s %s", b.opts.From, img.ID, kpkg.Package, kpkg.Version)
	for _, f := range []string{KernelFile, InitrdFile, RootfsFile} {
		if err := syncPath(filepath.Join(staging, f)); err != nil {
			return assets.Manifest{}, err
		}
	}
	if err := assets.Write(staging, m); err != nil {
		return assets.Manifest{}, err
	}
	if err := syncPath(staging); err != nil {
		return assets.Manifest{}, err
	}
	if err := ctx.Err(); err != nil {
		return assets.Manifest{}, err
	}
	if err := b.install(staging); err != nil {
		return assets.Manifest{}, err
	}
	b.say("Done: the microVM guest is in %s (built in %s).", b.dir, time.Since(start).Round(time.Second))
	return m, nil
}

// writeInitrdFile writes the initrd to path and returns its size.
func (b *builder) writeInitrdFile(path string, kt kernelTree, mods []module, mtime time.Time) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("writing the initrd: %w", err)
	}
	if err := writeInitrd(f, kt.ModDir, kt.Version, mods, mtime); err != nil {
		_ = f.Close()
		return 0, err
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("writing the initrd: %w", err)
	}
	return info.Size(), nil
}

// record hashes the three assets, one line each, and returns their manifest.
func (b *builder) record(dir string) (assets.Manifest, error) {
	var m assets.Manifest
	for _, a := range []struct{ name, file string }{{"kernel", KernelFile}, {"initrd", InitrdFile}, {"rootfs", RootfsFile}} {
		info, err := os.Stat(filepath.Join(dir, a.file))
		if err != nil {
			return assets.Manifest{}, err
		}
		t := time.Now()
		one, err := assets.Record(dir, map[string]string{a.name: a.file})
		if err != nil {
			return assets.Manifest{}, err
		}
		b.say("Hashing: %s (%s, %s): sha256 %s (%s)", a.name, a.file, formatSize(info.Size()),
			one.Assets[0].SHA256[:16], time.Since(t).Round(100*time.Millisecond))
		m.Version, m.Created = one.Version, one.Created
		m.Assets = append(m.Assets, one.Assets...)
	}
	sort.Slice(m.Assets, func(i, j int) bool { return m.Assets[i].Name < m.Assets[j].Name })
	return m, nil
}

// lockDir takes <dir>.lock, so that two builds into one directory do not
// race; a second build is refused with errdefs.ErrConflict.
func lockDir(dir string) (func(), error) {
	path := dir + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the build lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Another microVM image build into %s is running (it holds %s); wait for it to finish", dir, path))
		}
		return nil, fmt.Errorf("taking the build lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// checkReplaceable refuses a target that is not a previous build: since a
// build replaces the whole directory, pointing --dir at, say, a home
// directory must not delete it. An empty directory is fine.
func checkReplaceable(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"%s is a symlink; a build replaces the directory itself, so pass the directory it points to", dir))
	case !fi.IsDir():
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s exists and is not a directory", dir))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(dir, assets.ManifestName)); err == nil {
		return nil
	}
	return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
		"%s is not empty and holds no microVM build (no %s); a build replaces the whole directory, so it refuses this one: choose another directory or empty it",
		dir, assets.ManifestName))
}

// sweepLeftovers removes what a killed build into the same directory left:
// staging and set-aside directories and the export container. It runs
// under the build lock, so none of them belongs to a running build.
// Failures are logged: they cost disk space, not correctness.
func (b *builder) sweepLeftovers(ctx context.Context) {
	for _, pattern := range []string{".building-*", ".old-*"} {
		matches, _ := filepath.Glob(b.dir + pattern)
		for _, m := range matches {
			b.say("Removing %s, left by an interrupted build", m)
			if err := os.RemoveAll(m); err != nil {
				b.log.Warn("removing a leftover build directory", "path", m, "err", err)
			}
		}
	}
	if err := b.sweepContainers(ctx); err != nil {
		b.log.Warn("removing leftover export containers", "err", err)
	}
}

// install puts the finished staging directory in place of b.dir. Where the
// file system can, the two are exchanged in one step (renameat2
// RENAME_EXCHANGE), so a reader never sees the directory missing;
// elsewhere the old build is renamed aside first. The old build is then
// removed.
func (b *builder) install(staging string) error {
	old := ""
	if _, err := os.Lstat(b.dir); err == nil {
		err := unix.Renameat2(unix.AT_FDCWD, staging, unix.AT_FDCWD, b.dir, unix.RENAME_EXCHANGE)
		if err == nil {
			old = staging
		} else if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("replacing %s: %w", b.dir, err)
		}
	}
	if old == "" {
		var err error
		if old, err = renameInto(staging, b.dir); err != nil {
			return err
		}
	}
	// The build is in place now; a failed flush of the parent directory
	// only weakens durability across a crash, so it is logged.
	if err := syncPath(filepath.Dir(b.dir)); err != nil {
		b.log.Warn("flushing the asset directory's parent", "err", err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			b.log.Warn("removing the previous build", "path", old, "err", err)
		}
	}
	return nil
}

// renameInto renames staging to dir, renaming an existing dir aside to
// <dir>.old-<random> first (and back, if the second rename fails). It
// returns the set-aside path, "" when there was nothing to set aside.
func renameInto(staging, dir string) (string, error) {
	old := ""
	if _, err := os.Lstat(dir); err == nil {
		old = dir + ".old-" + randomHex()
		if err := os.Rename(dir, old); err != nil {
			return "", fmt.Errorf("setting the previous build aside: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.Rename(staging, dir); err != nil {
		if old != "" {
			_ = os.Rename(old, dir)
		}
		return "", fmt.Errorf("putting the new build in place: %w", err)
	}
	return old, nil
}

// syncPath flushes a file or directory to disk.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	return nil
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// run runs a tool and returns its standard output; its standard error goes
// to the debug log and, on failure, into the error.
func (b *builder) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	return b.runStdin(ctx, nil, dir, name, args...)
}

// runStdin is run with stdin as the tool's standard input.
func (b *builder) runStdin(ctx context.Context, stdin io.Reader, dir, name string, args ...string) ([]byte, error) {
	path, err := lookTool(name)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s is not installed", name))
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Stdin = stdin
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &limitedBuffer{buf: &stderr, max: 64 << 10}
	line := name + " " + strings.Join(args, " ")
	t := time.Now()
	err = cmd.Run()
	b.log.Debug("ran", "cmd", line, "took", time.Since(t), "err", err, "stderr", stderr.String())
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", name, ctx.Err())
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		if len(msg) > 2000 {
			msg = "..." + msg[len(msg)-2000:]
		}
		return nil, fmt.Errorf("%s failed: %w: %s", line, err, msg)
	}
	return stdout.Bytes(), nil
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}
