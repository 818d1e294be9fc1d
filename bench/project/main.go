// Command project measures a warm command in the project sandbox against
// the Docker CLI, side by side in one run:
//
//	go run ./bench/project [-n 200]
//
// It builds a static hutch (CGO_ENABLED=0), makes a temporary project
// whose settings name the busybox test image, brings its sandbox up with
// `hutch project up`, then runs, interleaved and n times each, `hutch
// project exec -- true` (a new hutch process each time, the warm path: the
// agent in the container answers on its socket) and `docker exec
// <container> true` (the docker CLI). It prints p50, p90 and p99 of each
// and the ratio of the p50s, whose target is under 0.2. These machines are
// noisy, so the claim is the ratio of paths measured in the same run,
// never a bare time; nothing is asserted.
//
// The image hutch-test-busybox:1 is built by `go test -run
// TestBusyboxImage ./internal/testenv` when the engine lacks it (that
// needs busybox-static on the host). The sandbox, its home volume and the
// temp dirs are removed at the end and on Ctrl-C. Tables go to stdout,
// progress to stderr.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/project"
)

// busyboxRef is the test image internal/testenv builds.
const busyboxRef = "hutch-test-busybox:1"

// target is the ratio of p50s the issue asks for.
const target = 0.2

func main() {
	n := flag.Int("n", 200, "runs per path")
	image := flag.String("image", busyboxRef, "sandbox-image of the project")
	flag.Parse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		progress("interrupted: cleaning up (interrupt again to quit at once, leaving the sandbox behind)")
		cancel()
		<-sig
		os.Exit(130)
	}()
	if err := run(ctx, *n, *image); err != nil {
		fmt.Fprintln(os.Stderr, "bench/project:", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench/project: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// bench is one user of hutch with one project.
type bench struct {
	hutch, docker string
	env           []string // the hutch processes' environment
	project, name string
	tmp, run      string
}

func run(ctx context.Context, n int, image string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		return errors.New("the docker CLI is not on PATH: it is the baseline")
	}
	eng, err := engine.Connect(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	if err := ensureImage(ctx, eng.Client, image, root); err != nil {
		return err
	}
	b, err := setup(ctx, root, image)
	if b != nil {
		defer b.cleanup()
	}
	if err != nil {
		return err
	}
	b.docker = docker

	progress("hutch project up")
	if out, err := b.hutchCmd(ctx, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("hutch project up: %v\n%s", err, out)
	}
	paths := []*series{
		{name: "hutch project exec -- true (new hutch process, warm)", run: func() error {
			return quiet(b.hutchCmd(ctx, "exec", "--", "true"))
		}},
		{name: "docker exec <container> true (docker CLI)", run: func() error {
			return quiet(exec.CommandContext(ctx, b.docker, "exec", b.name, "true"))
		}},
		{name: "diag: hutch --version (process start, no sandbox)", run: func() error {
			return quiet(exec.CommandContext(ctx, b.hutch, "--version"))
		}},
	}
	progress("warm-up: 5 rounds")
	if err := interleave(ctx, 5, paths, true); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for _, p := range paths {
		p.d = nil
	}
	progress("measuring: %d rounds", n)
	if err := interleave(ctx, n, paths, false); err != nil {
		return err
	}
	report(eng, image, n, paths)
	return nil
}

// setup builds hutch and makes the project, its settings and the dirs a
// hutch user has.
func setup(ctx context.Context, root, image string) (*bench, error) {
	tmp, err := os.MkdirTemp("", "hutch-bench-project-")
	if err != nil {
		return nil, err
	}
	b := &bench{tmp: tmp}
	// Unix socket paths are short: the run dir gets a short name of its own.
	if b.run, err = os.MkdirTemp("", "hbp-"); err != nil {
		return b, err
	}
	home, config, state := filepath.Join(tmp, "home"), filepath.Join(tmp, "config"), filepath.Join(tmp, "state")
	proj := filepath.Join(tmp, "bench-project")
	for _, d := range []string{home, config, state, filepath.Join(proj, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return b, err
		}
	}
	if b.project, err = filepath.EvalSymlinks(proj); err != nil {
		return b, err
	}
	b.name = project.ContainerName(b.project)
	settings := fmt.Sprintf("{%q: true, %q: %q}\n", project.KeyEnabled, project.KeyImage, image)
	if err := os.WriteFile(filepath.Join(config, "settings.json"), []byte(settings), 0o644); err != nil {
		return b, err
	}
	progress("building a static hutch (CGO_ENABLED=0 go build ./cmd/hutch)")
	b.hutch = filepath.Join(tmp, "hutch")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", b.hutch, "./cmd/hutch")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return b, fmt.Errorf("CGO_ENABLED=0 go build ./cmd/hutch: %v\n%s", err, out)
	}
	b.env = append(os.Environ(), "HOME="+home, "HUTCH_CONFIG_DIR="+config, "HUTCH_STATE_DIR="+state, "HUTCH_RUN_DIR="+b.run)
	return b, nil
}

// hutchCmd is `hutch project -C <project> args...` as the bench's user.
func (b *bench) hutchCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, b.hutch, append([]string{"project", "-C", b.project}, args...)...)
	cmd.Env = b.env
	return cmd
}

// quiet runs cmd with its output kept for the error only.
func quiet(cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// cleanup removes the sandbox and its home volume, then the temp dirs.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if b.hutch != "" {
		progress("cleanup: hutch project down --volumes")
		if out, err := b.hutchCmd(ctx, "down", "--volumes").CombinedOutput(); err != nil {
			progress("cleanup: hutch project down --volumes: %v: %s", err, out)
		}
	}
	os.RemoveAll(b.run)
	os.RemoveAll(b.tmp)
}

// ensureImage builds the busybox test image through its test when the
// engine does not have it.
func ensureImage(ctx context.Context, cli *client.Client, ref, root string) error {
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return nil
	} else if !engine.IsNotFound(err) {
		return err
	}
	if ref != busyboxRef {
		return fmt.Errorf("image %s is not present in the engine; build or load it first", ref)
	}
	progress("image %s missing: go test -run TestBusyboxImage ./internal/testenv", ref)
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^TestBusyboxImage$", "./internal/testenv")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s with go test ./internal/testenv: %w", ref, err)
	}
	_, err := cli.ImageInspect(ctx, ref)
	return err
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the bench inside the hutch module (no go.mod above the working directory)")
		}
		dir = parent
	}
}

// series is one measured path.
type series struct {
	name string
	run  func() error
	d    []time.Duration
}

// interleave runs every path n times, round-robin, rotating which goes
// first each round so that drift and ordering effects hit all alike. Any
// failure ends the run: a failed command is no measurement.
func interleave(ctx context.Context, n int, paths []*series, quietly bool) error {
	step := max(n/10, 1)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		for j := range paths {
			p := paths[(i+j)%len(paths)]
			t0 := time.Now()
			if err := p.run(); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			p.d = append(p.d, time.Since(t0))
		}
		if !quietly && ((i+1)%step == 0 || i+1 == n) {
			progress("%d/%d rounds", i+1, n)
		}
	}
	return nil
}

// pct is the nearest-rank p-th percentile (0 < p <= 100).
func (s *series) pct(p float64) time.Duration {
	if len(s.d) == 0 {
		return 0
	}
	d := slices.Clone(s.d)
	slices.Sort(d)
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f ms", float64(d)/1e6)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

func report(eng *engine.Engine, image string, n int, paths []*series) {
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Printf("hutch bench/project · %s · nproc %d · Linux %s · engine %s %s, API %s · %s · %s\n",
		host, runtime.NumCPU(), strings.TrimSpace(string(kernel)), eng.Flavor, eng.ServerVersion, eng.APIVersion,
		runtime.Version(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Printf("command: go run ./bench/project %s\n", strings.Join(os.Args[1:], " "))
	fmt.Printf("\nWarm command in the project sandbox (image %s), %d runs per path, interleaved; percentiles nearest-rank\n", image, n)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tp50\tp90\tp99\t÷docker p50")
	docker := paths[1]
	for _, p := range paths {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3f\n", p.name, ms(p.pct(50)), ms(p.pct(90)), ms(p.pct(99)), ratio(p.pct(50), docker.pct(50)))
	}
	tw.Flush()
	hutch := paths[0]
	r := ratio(hutch.pct(50), docker.pct(50))
	verdict := "met"
	if !(r < target) {
		verdict = "NOT met"
	}
	fmt.Printf("hutch p50 / docker exec p50 = %.3f (target < %.1f: %s) · p90 ratio %.3f\n", r, target, verdict, ratio(hutch.pct(90), docker.pct(90)))
}
