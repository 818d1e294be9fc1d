package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
	"github.com/hutchsandbox/hutch/internal/microvm/build"
)

// microVMFree is the free space of the test guests' root filesystem: the
// tests write little, and a small image hashes fast.
const microVMFree = 256 << 20

// MicroVMAssets returns a directory of microVM guest assets built by
// `hutch microvm image build` from BusyboxImage and Debian's cloud
// kernel. They are built once per machine and busybox image into the
// user's cache directory (the kernel package is downloaded once too),
// under a lock shared by every test package, and reused while their
// manifest verifies. HUTCH_TEST_MICROVM_ASSETS names a ready directory
// instead. Building needs root (file owners), the Docker engine and apt.
func MicroVMAssets(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("HUTCH_TEST_MICROVM_ASSETS"); d != "" {
		return d
	}
	if os.Geteuid() != 0 {
		if InCI() {
			t.Fatal("building microVM guest assets needs root, and microVM tests must not skip in CI")
		}
		t.Skip("building microVM guest assets needs root (file owners of the image); set HUTCH_TEST_MICROVM_ASSETS to a built directory")
	}
	cli := Docker(t)
	img := BusyboxImage(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	inspect, err := cli.ImageInspect(ctx, img)
	if err != nil {
		t.Fatalf("inspect %s: %v", img, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "hutch-test", "microvm")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockFile(ctx, filepath.Join(root, "build.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	dir := filepath.Join(root, "assets-"+strings.TrimPrefix(inspect.ID, "sha256:")[:16])
	if _, err := assets.Describe(dir); err == nil {
		return dir
	}
	eng, err := engine.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = eng.Close() }()
	start := time.Now()
	var progress strings.Builder
	if _, err := build.Build(ctx, build.Options{
		Engine:   eng,
		From:     img,
		Dir:      dir,
		CacheDir: filepath.Join(root, "cache"),
		Free:     microVMFree,
		Progress: &progress,
	}); err != nil {
		t.Fatalf("build microVM guest assets: %v\n%s", err, progress.String())
	}
	t.Logf("built microVM guest assets in %s (%s)", dir, time.Since(start).Round(time.Millisecond))
	return dir
}
