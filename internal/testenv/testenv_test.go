package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?-[0-9a-f]{6}$`)

func TestName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sub  string
		base string
	}{
		{"simple", "testname-simple"},
		{"With_Upper/and spaces", "testname-with-upper-and-spaces"},
		{"__", "testname"},
		{strings.Repeat("x", 60), "testname-" + strings.Repeat("x", 31)},
		{"ü-é", "testname"},
	}
	for _, tt := range tests {
		t.Run(tt.sub, func(t *testing.T) {
			t.Parallel()
			a, b := Name(t), Name(t)
			if a == b {
				t.Errorf("two names are equal: %q", a)
			}
			for _, n := range []string{a, b} {
				if !nameRE.MatchString(n) {
					t.Errorf("Name = %q, not a Docker-safe name", n)
				}
				if got := n[:len(n)-7]; got != tt.base {
					t.Errorf("Name = %q, base %q, want %q", n, got, tt.base)
				}
			}
		})
	}
}

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, "1": true, "false": false, "0": false, "yes": true} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI() = %v, want %v", v, got, want)
		}
	}
}

// recorder is a testing.TB that records how a helper ended the test.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	skipped  string
	fatal    string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}
func (r *recorder) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// runHelper runs f on a goroutine of its own, as testing does, so that
// Skipf and Fatalf can end it.
func runHelper(r *recorder, f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestDocker_NoEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/no-docker.sock")
	t.Run("skips_outside_ci", func(t *testing.T) {
		t.Setenv("CI", "")
		r := &recorder{TB: t}
		runHelper(r, func(tb testing.TB) { Docker(tb) })
		if !strings.HasPrefix(r.skipped, "docker engine not reachable: ") || r.fatal != "" {
			t.Errorf("skipped %q, fatal %q; want a skip saying the engine is not reachable", r.skipped, r.fatal)
		}
	})
	t.Run("fails_in_ci", func(t *testing.T) {
		t.Setenv("CI", "true")
		r := &recorder{TB: t}
		runHelper(r, func(tb testing.TB) { Docker(tb) })
		if !strings.HasPrefix(r.fatal, "docker engine not reachable: ") || r.skipped != "" {
			t.Errorf("skipped %q, fatal %q; want a failure saying the engine is not reachable", r.skipped, r.fatal)
		}
	})
}

func TestIsStatic(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The race detector needs cgo, so this test binary is dynamic.
	if static, err := isStatic(self); err != nil || static {
		t.Errorf("isStatic(test binary) = %v, %v; want false (a -race binary is dynamically linked)", static, err)
	}
	if _, err := isStatic("/etc/passwd"); err == nil {
		t.Errorf("isStatic(/etc/passwd) succeeded, want an error")
	}
	if _, err := isStatic(t.TempDir() + "/missing"); !os.IsNotExist(err) {
		t.Errorf("isStatic(missing) error = %v, want not-exist", err)
	}
}

func TestHutchBinary(t *testing.T) {
	t.Parallel()
	p := HutchBinary(t)
	if again := HutchBinary(t); again != p {
		t.Errorf("second HutchBinary = %q, want the first %q", again, p)
	}
	if static, err := isStatic(p); err != nil || !static {
		t.Errorf("isStatic(%s) = %v, %v; want a static binary", p, static, err)
	}
	out, err := exec.Command(p, "--help").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("hutch")) {
		t.Errorf("%s --help: %v\n%s", p, err, out)
	}
	// Another test process of this checkout builds to the same path, and
	// finds the binary up to date: no second link, the same file (a link
	// renames a new one into place; the go command only touches an
	// up-to-date one).
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := buildHutch()
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(again)
	if err != nil {
		t.Fatal(err)
	}
	if again != p || !os.SameFile(before, after) {
		t.Errorf("a second build gave %s, want the first, %s, not linked again", again, p)
	}
}

func TestBusyboxImage(t *testing.T) {
	t.Parallel()
	cli := Docker(t)
	label := "org.hutchsandbox.test=" + Name(t)
	CleanupContainers(t, cli, label)
	ref := BusyboxImage(t, cli)
	if ref != BusyboxRef {
		t.Errorf("BusyboxImage = %q, want %q", ref, BusyboxRef)
	}

	t.Run("config", func(t *testing.T) {
		img, err := cli.ImageInspect(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"/bin/sh"}, img.Config.Cmd); diff != "" {
			t.Errorf("CMD mismatch (-want +got):\n%s", diff)
		}
		if !slices.Contains(img.Config.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") {
			t.Errorf("Env = %q, want the usual PATH", img.Config.Env)
		}
	})
	t.Run("echo", func(t *testing.T) {
		out, errOut, code := RunContainer(t, cli, ref, label, "busybox", "echo", "hi")
		if out != "hi\n" || errOut != "" || code != 0 {
			t.Errorf("busybox echo hi: stdout %q, stderr %q, exit %d; want \"hi\\n\", \"\", 0", out, errOut, code)
		}
	})
	t.Run("layout", func(t *testing.T) {
		out, errOut, code := RunContainer(t, cli, ref, label, "sh", "-c",
			`stat -c '%a %U:%G %n' /tmp /root /usr/local/bin /workspace /bin/busybox; id -un; readlink /bin/sh; cd && pwd`)
		want := "1777 root:root /tmp\n700 root:root /root\n755 root:root /usr/local/bin\n755 root:root /workspace\n755 root:root /bin/busybox\nroot\nbusybox\n/root\n"
		if diff := cmp.Diff(want, out); diff != "" || errOut != "" || code != 0 {
			t.Errorf("layout: exit %d, stderr %q, stdout mismatch (-want +got):\n%s", code, errOut, diff)
		}
	})
	t.Run("no_containers_left", func(t *testing.T) {
		list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", label)})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("%d containers with label %s left", len(list.Items), label)
		}
	})
}

// TestBusyboxImage_ConcurrentBuilds builds a throwaway tag from several
// goroutines at once (the shared tag must not be removed: other test
// processes use it), then removes it.
func TestBusyboxImage_ConcurrentBuilds(t *testing.T) {
	t.Parallel()
	cli := Docker(t)
	ref := Name(t) + ":1"
	t.Cleanup(func() {
		if _, err := cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Errorf("removing %s: %v", ref, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = ensureBusyboxImage(ctx, cli, ref) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("build %d: %v", i, err)
		}
	}
	if ok, err := hasImage(ctx, cli, ref); err != nil || !ok {
		t.Errorf("hasImage(%s) = %v, %v; want true", ref, ok, err)
	}
}

func TestCleanupContainers(t *testing.T) {
	t.Parallel()
	cli := Docker(t)
	ref := BusyboxImage(t, cli)
	label := "org.hutchsandbox.test=" + Name(t)
	ctx := context.Background()
	labels := map[string]string{"org.hutchsandbox.test": strings.TrimPrefix(label, "org.hutchsandbox.test=")}
	inner := t.Run("creates", func(t *testing.T) {
		CleanupContainers(t, cli, label)
		c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:       Name(t),
			Config:     &container.Config{Image: ref, Cmd: []string{"sleep", "300"}, Labels: labels},
			HostConfig: &container.HostConfig{NetworkMode: network.NetworkNone},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		stopped, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:   Name(t),
			Config: &container.Config{Image: ref, Labels: labels},
		})
		if err != nil {
			t.Fatal(err)
		}
		// A snapshot image with the label, committed as image mode commits
		// one (Podman's /commit needs a body, so an empty config is sent).
		if _, err := cli.ContainerCommit(ctx, stopped.ID, client.ContainerCommitOptions{Config: &container.Config{}, Changes: []string{"LABEL " + label}}); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.NetworkCreate(ctx, Name(t), client.NetworkCreateOptions{Labels: labels}); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: Name(t), Labels: labels}); err != nil {
			t.Fatal(err)
		}
	})
	if !inner {
		return
	}
	filters := make(client.Filters).Add("label", label)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil || len(cs.Items) != 0 {
		t.Errorf("containers left: %d, %v", len(cs.Items), err)
	}
	is, err := cli.ImageList(ctx, client.ImageListOptions{All: true, Filters: filters})
	if err != nil || len(is.Items) != 0 {
		t.Errorf("images left: %d, %v", len(is.Items), err)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: filters})
	if err != nil || len(ns.Items) != 0 {
		t.Errorf("networks left: %d, %v", len(ns.Items), err)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: filters})
	if err != nil || len(vs.Items) != 0 {
		t.Errorf("volumes left: %d, %v", len(vs.Items), err)
	}
}

func TestFindStaticBusybox(t *testing.T) {
	t.Parallel()
	missing := t.TempDir() + "/busybox"
	self, err := os.Executable() // dynamic: built with -race
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		candidates []string
		wantErr    string
	}{
		{"missing", []string{missing}, "no busybox found at " + missing + ": install busybox-static (apt-get install -y busybox-static)"},
		{"dynamic", []string{missing, self}, "no static busybox (" + self + " is dynamically linked): install busybox-static (apt-get install -y busybox-static)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := findStaticBusybox(tt.candidates)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("findStaticBusybox error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestListImages_AsksAgain drives listImages against a fake engine that
// fails as Podman does while another client creates an image (a real
// engine cannot be made to fail on demand): a passing failure is asked
// past, one that persists is reported after listAttempts tries.
func TestListImages_AsksAgain(t *testing.T) {
	t.Parallel()
	const podmanErr = `{"cause":"file does not exist","message":"locating item named \"manifest\" for image with ID \"bd5e\" (consider removing the image to resolve the issue): file does not exist","response":500}`
	for _, tc := range []struct {
		name      string
		failures  int
		wantCalls int
		wantErr   bool
	}{
		{"passing", 2, 3, false},
		{"persisting", 100, listAttempts, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/images/json") {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if int(calls.Add(1)) <= tc.failures {
					w.WriteHeader(http.StatusInternalServerError)
					_, _ = io.WriteString(w, podmanErr)
					return
				}
				_, _ = io.WriteString(w, `[{"Id":"sha256:aa"}]`)
			}))
			defer engine.Close()
			cli, err := client.New(client.WithHost("tcp://"+strings.TrimPrefix(engine.URL, "http://")), client.WithAPIVersion("1.44"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cli.Close() }()
			imgs, err := listImages(context.Background(), cli, make(client.Filters).Add("label", "k=v"))
			if got := int(calls.Load()); got != tc.wantCalls {
				t.Errorf("engine asked %d times, want %d", got, tc.wantCalls)
			}
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), `locating item named "manifest"`) {
					t.Errorf("listImages error = %v, want the engine's", err)
				}
				return
			}
			if err != nil || len(imgs.Items) != 1 || imgs.Items[0].ID != "sha256:aa" {
				t.Errorf("listImages = %+v, %v; want the one image", imgs.Items, err)
			}
		})
	}
}

// TestRemoveEndedBuilds: the build directory of a process that has ended
// goes; this process's own, other names and plain files stay.
// A directory at the build directory's predictable name that another
// user could have made, or could write into, is refused, not built into.
func TestBuildDir_RefusesAPlantedDirectory(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	root := "/src/" + Name(t)
	dir, err := buildDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := buildDir(root); err != nil || again != dir {
		t.Fatalf("buildDir again: %q, %v; want %q", again, err, dir)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := buildDir(root); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("buildDir of a world-writable directory: %v; want a refusal", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := buildDir(root); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("buildDir through a symlink: %v; want a refusal", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Root (as in CI) stands in for the other user who made it.
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := buildDir(root); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("buildDir of another user's directory: %v; want a refusal", err)
	}
}

// TestNoOptimize_MatchesKubeUp: the tests' hutch and hack/kube-up's
// Kubernetes share compiled client libraries only while both builds
// pass the same -gcflags; a change to one alone would compile them twice
// on a fresh machine, silently.
func TestNoOptimize_MatchesKubeUp(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "hack", "kube-up"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "\ngcflags=\"" + noOptimize + "\"\n"; !bytes.Contains(script, []byte(want)) {
		t.Errorf("hack/kube-up does not set %s: the tests' hutch builds with -gcflags '%s'", strings.TrimSpace(want), noOptimize)
	}
}
