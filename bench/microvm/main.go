// Command microvm measures the gondolin:default microVM mode against image
// mode on the same busybox test image, side by side in one run:
//
//	go run ./bench/microvm [-boots 5] [-n 100] [-writes 10] [-assets DIR]
//
// It makes one office per mode (same limits: 1 CPU, 1 GiB, 1024 pids),
// runs a first command in each (the VM's root disk and the container and
// its network are made then; that one-off time is printed, not compared)
// and then measures three comparisons, each as gondolin beside image, the
// paths interleaved round by round:
//
//  1. Boot to first command (-boots rounds). Untimed before each round,
//     Runtime.Stop: for gondolin it powers the VM off (QEMU and virtiofsd
//     end, the root disk stays); for image it stops the container (it and
//     its network stay). Timed: Runtime.Exec of `true` until it returns.
//     For gondolin that is starting virtiofsd and QEMU on the existing
//     root disk, booting the kernel, waiting for the agent, handing it its
//     mounts, and running `true`; for image it is starting the stopped
//     container, waiting for its agent, and running `true`. A diagnostic
//     row does the same after Runtime.Remove instead (root disk deleted /
//     container and network removed), so the timed command also makes
//     the disk overlay / creates the container and its network. Each
//     round checks that the runtime reported a start, so a row can never
//     silently measure a warm command.
//  2. Warm exec (-n rounds, after 5 warm-up rounds): Runtime.Exec of
//     `true` in the running VM and in the running container. A diagnostic
//     row runs `true` on the agent client directly (Runtime.Agent once,
//     then agent.Client.Exec), which leaves out each mode's check that
//     its runtime is up to date (gondolin reads the asset manifest and
//     compares fingerprints; image mode asks the engine twice).
//  3. 16 MiB file write (-writes rounds, after 2 warm-up rounds): 16 MiB
//     of random bytes written into the office through the agent's file
//     API, Runtime.Agent then agent.Client.WriteFile (the agent stages,
//     fsyncs and renames); in the VM the office is a virtiofs share
//     (cache=none), in the container a bind mount. A second row writes
//     16 MiB of zeros by a command, `head -c 16777216 /dev/zero > f` in
//     the office through Runtime.Exec (no fsync). The file is removed on
//     the host, untimed, after each write; one write of each kind is
//     checked on the host first.
//
// Each table shows p50 and p90 (nearest rank) per mode and their ratio
// gondolin/image. These machines are noisy, so the claim is the ratio of
// paths measured in the same run, never a bare time; nothing is asserted.
// The header names the accelerator: without KVM QEMU emulates the guest's
// CPU in software (TCG), which the gondolin rows pay for.
//
// It needs root (virtiofsd, and building guest assets), a Docker engine
// (hack/docker-up starts one when /var/run/docker.sock does not answer),
// qemu-system-x86, qemu-utils and virtiofsd. The image
// hutch-test-busybox:1 is built by `go test -run TestBusyboxImage
// ./internal/testenv` when missing; the guest assets are built from it
// like internal/testenv builds them, into the same user cache directory
// (<cache>/hutch-test/microvm/assets-<image id>), unless -assets names a
// ready directory. The agent is a static hutch built from this module.
// Every VM is closed, every container removed with its network, and the
// temp dirs deleted at the end and on Ctrl-C. Tables go to stdout,
// progress and the runtimes' warnings to stderr.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/bench/benchkit"
	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
	"github.com/hutchsandbox/hutch/internal/microvm/build"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/sandbox/microvm"
)

const (
	// fileSize is the size of the written file: large enough that the
	// share's throughput, not a round trip, decides the time.
	fileSize = 16 << 20
	// assetFree is the free space of the guest's root filesystem when
	// the assets are built here: what internal/testenv gives its guests,
	// so that both build the same directory.
	assetFree = 256 << 20
)

// limits are both offices' limits. Given explicitly because the defaults
// differ in effect: image mode's 0.5 CPU is a quota, while a VM rounds it
// up to a whole vCPU.
var limits = sandbox.Limits{CPUs: 1, MemoryBytes: 1 << 30, Pids: 1024}

var progress = benchkit.Progress("bench/microvm")

func main() {
	boots := flag.Int("boots", 5, "boot rounds (each boots the VM and starts the container)")
	n := flag.Int("n", 100, "warm exec rounds")
	writes := flag.Int("writes", 10, "16 MiB write rounds")
	assetDir := flag.String("assets", "", "ready guest asset directory (default: built from the busybox test image into the user cache dir, as internal/testenv does)")
	flag.Parse()
	if *boots < 1 || *n < 1 || *writes < 1 {
		fmt.Fprintln(os.Stderr, "bench/microvm: -boots, -n and -writes must be at least 1")
		os.Exit(2)
	}
	ctx, cancel := benchkit.Interruptible(progress, "interrupted: cleaning up (interrupt again to quit at once, leaving VMs and containers behind)")
	defer cancel()
	if err := run(ctx, opts{boots: *boots, n: *n, writes: *writes, assets: *assetDir}); err != nil {
		fmt.Fprintln(os.Stderr, "bench/microvm:", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

type opts struct {
	boots, n, writes int
	assets           string
}

// mode is one side of every comparison: a runtime, its office, and how
// many starts it has reported (the boot rows check that one happened).
type mode struct {
	name   string
	rt     sandbox.Runtime
	life   sandbox.Lifecycle
	agent  func(context.Context, sandbox.Spec) (*agent.Client, error)
	spec   sandbox.Spec
	starts atomic.Int64
	first  time.Duration // the office's first command, the one that made it
}

func (m *mode) event(e string) {
	if e == "started" {
		m.starts.Add(1)
	}
}

func run(ctx context.Context, o opts) error {
	if os.Geteuid() != 0 {
		return errors.New("run it as root: the microVM mode starts virtiofsd, which needs root")
	}
	eng, err := engine.Connect(ctx)
	if err != nil {
		return fmt.Errorf("no container engine answers (hack/docker-up starts Docker): %w", err)
	}
	defer eng.Close()
	if err := benchkit.EnsureImage(ctx, eng.Client, benchkit.BusyboxRef, progress); err != nil {
		return err
	}
	assetDir := o.assets
	if assetDir == "" {
		if assetDir, err = ensureAssets(ctx, eng); err != nil {
			return err
		}
	}
	manifest, err := assets.Load(assetDir)
	if err != nil {
		return fmt.Errorf("guest assets in %s: %w", assetDir, err)
	}

	tmp, err := os.MkdirTemp("", "hutch-bench-microvm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Unix socket paths are limited to 107 bytes: the run dirs live
	// directly in the temp dir, under a short name.
	runDir, err := os.MkdirTemp("", "hbm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(runDir)

	progress("building a static hutch (CGO_ENABLED=0 go build ./cmd/hutch), the agent of both modes")
	bin, err := benchkit.BuildHutch(ctx, tmp)
	if err != nil {
		return err
	}
	agentBin, err := agentbin.Locate(bin)
	if err != nil {
		return err
	}
	// The runtimes' warnings (a VM that died, a slow stop) go beside the
	// progress lines: the report must not hide what went wrong.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ws := filepath.Join(tmp, "workspace")

	vm := &mode{name: "gondolin"}
	vmRt, err := microvm.New(microvm.Config{
		StateDir: filepath.Join(tmp, "state-vm"), RunDir: filepath.Join(runDir, "v"),
		AssetDir: assetDir, Agent: agentBin, Log: log, Event: vm.event,
	})
	if err != nil {
		return err
	}
	defer func() {
		progress("cleanup: closing the microVM runtime (powers the VM off)")
		if err := vmRt.Close(); err != nil {
			progress("cleanup: microVM runtime Close: %v", err)
		}
	}()
	vm.rt, vm.life, vm.agent = vmRt, vmRt, vmRt.Agent

	img := &mode{name: "image"}
	imgRt, err := image.New(image.Config{
		Engine: eng, Image: benchkit.BusyboxRef,
		StateDir: filepath.Join(tmp, "state-image"), RunDir: filepath.Join(runDir, "i"),
		Agent: agentBin, Log: log, Event: img.event,
	})
	if err != nil {
		return err
	}
	img.rt, img.life, img.agent = imgRt, imgRt, imgRt.Agent

	tag := benchkit.RandomHex(4)
	if vm.spec, err = officeSpec(ws, "bench-microvm-vm-"+tag); err != nil {
		return err
	}
	if img.spec, err = officeSpec(ws, "bench-microvm-image-"+tag); err != nil {
		return err
	}
	// Removed whatever happened: the container, its network and any
	// snapshot; the deferred Close above ends the VM (whose disk goes
	// with tmp).
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ccancel()
		progress("cleanup: removing the image-mode container and its network")
		if err := imgRt.Remove(cctx, img.spec.OfficeKey); err != nil {
			progress("cleanup: image Remove: %v", err)
		}
	}()
	modes := []*mode{vm, img}

	for _, m := range modes {
		progress("%s: first command (makes the office's runtime)", m.name)
		t0 := time.Now()
		if err := execTrue(ctx, m); err != nil {
			return fmt.Errorf("%s: first command: %w", m.name, err)
		}
		m.first = time.Since(t0)
		progress("%s: first command took %s", m.name, benchkit.Ms(m.first))
	}

	bootTbl, err := measureBoots(ctx, o.boots, vm, img)
	if err != nil {
		return err
	}
	execTbl, err := measureExec(ctx, o.n, vm, img)
	if err != nil {
		return err
	}
	writeTbl, err := measureWrites(ctx, o.writes, vm, img)
	if err != nil {
		return err
	}

	benchkit.Header{Bench: "bench/microvm", Engine: eng, Detail: true}.Print(os.Stdout)
	fmt.Printf("accelerator: %s · guest: %s · agent sha256 %s\n", vmRt.Accel(), manifest.Source, agentBin.SHA256[:16])
	fmt.Printf("both offices: %g CPU, %d MiB, %d pids; image %s; percentiles nearest-rank; ratio = gondolin / image\n",
		limits.CPUs, limits.MemoryBytes>>20, limits.Pids, benchkit.BusyboxRef)
	fmt.Printf("first command of a new office (once each, not compared): gondolin %s (assets hashed, initrd staged, root disk made, VM booted) · image %s (agent staged earlier; network and container created, started)\n",
		benchkit.Ms(vm.first), benchkit.Ms(img.first))
	bootTbl.print(os.Stdout)
	execTbl.print(os.Stdout)
	writeTbl.print(os.Stdout)
	return nil
}

// officeSpec makes an office directory in ws for a conversation and the
// spec the runtimes get for it: the office alone is projected, read-write.
func officeSpec(ws, conv string) (sandbox.Spec, error) {
	addr, err := office.NewAddress("web", conv)
	if err != nil {
		return sandbox.Spec{}, err
	}
	key := string(addr.Key())
	dir := filepath.Join(ws, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{
		OfficeKey: key, Platform: "web", ConversationID: conv,
		OfficeDir: dir, OfficeRuntimePath: "/workspace/" + key,
		Mounts: []sandbox.Mount{{HostPath: dir, RuntimePath: "/workspace/" + key}},
		Limits: limits,
	}, nil
}

var trueReq = sandbox.ExecRequest{Argv: []string{"true"}}

func execTrue(ctx context.Context, m *mode) error {
	return check(m.rt.Exec(ctx, m.spec, trueReq))
}

// check turns a command that did not exit 0 into an error.
func check(res sandbox.ExecResult, err error) error {
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("exit %d %s", res.ExitCode, res.Message())
	}
	return nil
}

// pair is one row of a table: the same operation in both modes.
type pair struct {
	name    string
	vm, img *benchkit.Series
}

// table is one comparison.
type table struct {
	title  string
	rows   []pair
	legend []string
}

// series returns the table's series for Interleave, gondolin and image
// alternating, so that every round rotates through both modes.
func (t *table) series() []*benchkit.Series {
	var out []*benchkit.Series
	for _, r := range t.rows {
		out = append(out, r.vm, r.img)
	}
	return out
}

func (t *table) print(w io.Writer) {
	fmt.Fprintf(w, "\n%s\n", t.title)
	tw := benchkit.Table(w)
	fmt.Fprintln(tw, "operation\tgondolin p50\tgondolin p90\timage p50\timage p90\tratio p50\tratio p90\truns g+i\tfailed g+i")
	var errs []string
	for _, r := range t.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%d+%d\t%d+%d\n", r.name,
			benchkit.Ms(r.vm.P50()), benchkit.Ms(r.vm.Pct(90)), benchkit.Ms(r.img.P50()), benchkit.Ms(r.img.Pct(90)),
			benchkit.Ratio(r.vm.P50(), r.img.P50()), benchkit.Ratio(r.vm.Pct(90), r.img.Pct(90)),
			len(r.vm.Times), len(r.img.Times), r.vm.Fail, r.img.Fail)
		for _, s := range []*benchkit.Series{r.vm, r.img} {
			if s.Err != nil {
				errs = append(errs, fmt.Sprintf("  first failure of %s: %v", s.Name, s.Err))
			}
		}
	}
	tw.Flush()
	for _, l := range t.legend {
		fmt.Fprintln(w, "  "+l)
	}
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
}

// booted wraps a boot measurement: before marks the runtime's start
// count (after the untimed stop), and the timed run fails unless the
// runtime reported a start, so that a stop that did nothing cannot pass a
// warm command off as a boot.
func booted(ctx context.Context, m *mode, name string, stop func() error) *benchkit.Series {
	var mark int64
	return &benchkit.Series{
		Name: m.name + " " + name,
		Before: func() error {
			if err := stop(); err != nil {
				return fmt.Errorf("untimed stop: %w", err)
			}
			mark = m.starts.Load()
			return nil
		},
		Run: func() error {
			if err := execTrue(ctx, m); err != nil {
				return err
			}
			if m.starts.Load() == mark {
				return errors.New("the runtime reported no start: nothing was booted")
			}
			return nil
		},
	}
}

func measureBoots(ctx context.Context, rounds int, vm, img *mode) (*table, error) {
	stop := func(m *mode) func() error { return func() error { return m.life.Stop(ctx, m.spec.OfficeKey) } }
	remove := func(m *mode) func() error { return func() error { return m.life.Remove(ctx, m.spec.OfficeKey) } }
	t := &table{
		title: fmt.Sprintf("1. Boot to first command: Runtime.Exec `true` with nothing running, %d rounds interleaved", rounds),
		rows: []pair{
			{name: "stopped → first `true`", vm: booted(ctx, vm, "boot", stop(vm)), img: booted(ctx, img, "start", stop(img))},
			{name: "diag: removed → first `true`", vm: booted(ctx, vm, "new disk + boot", remove(vm)), img: booted(ctx, img, "create + start", remove(img))},
		},
		legend: []string{
			"stopped: gondolin: Stop powered the VM off (root disk kept); timed: virtiofsd + QEMU start, kernel boot, agent answers, mounts set up, `true`.",
			"         image: Stop stopped the container; timed: container start, agent answers, `true`.",
			"removed: gondolin: Remove deleted the root disk; timed: as stopped, plus a new qcow2 overlay.",
			"         image: Remove deleted container and network; timed: network + container created, started, agent answers, `true`.",
		},
	}
	progress("boot to first command: %d rounds", rounds)
	err := benchkit.Interleave(ctx, benchkit.Rounds{N: rounds, Label: "boot to first command", Progress: progress, KeepGoing: true}, t.series())
	return t, err
}

func measureExec(ctx context.Context, rounds int, vm, img *mode) (*table, error) {
	t := &table{
		title: fmt.Sprintf("2. Warm exec: `true` in a running VM / container, %d rounds interleaved after 5 warm-up rounds", rounds),
		legend: []string{
			"Runtime.Exec: what a service call does (gondolin: reads the asset manifest, compares the fingerprint; image: two engine GETs), then the agent runs `true`.",
			"diag agent client: agent.Client.Exec on the client Runtime.Agent returned once: the agent's own round trip.",
		},
	}
	row := pair{name: "Runtime.Exec `true`"}
	diag := pair{name: "diag: agent client Exec `true`"}
	for _, m := range []*mode{vm, img} {
		// Both are running: the boot rounds ended with a command in each.
		cl, err := m.agent(ctx, m.spec)
		if err != nil {
			return nil, fmt.Errorf("%s: Runtime.Agent: %w", m.name, err)
		}
		req := trueReq
		req.Dir = m.spec.OfficeRuntimePath
		s := &benchkit.Series{Name: m.name + " Runtime.Exec", Run: func() error { return execTrue(ctx, m) }}
		d := &benchkit.Series{Name: m.name + " agent client Exec", Run: func() error { return check(cl.Exec(ctx, req)) }}
		if m == vm {
			row.vm, diag.vm = s, d
		} else {
			row.img, diag.img = s, d
		}
	}
	t.rows = []pair{row, diag}
	progress("warm exec: warm-up, 5 rounds")
	if err := benchkit.WarmUp(ctx, benchkit.Rounds{N: 5}, t.series()); err != nil {
		return nil, fmt.Errorf("warm exec warm-up: %w", err)
	}
	progress("warm exec: %d rounds", rounds)
	err := benchkit.Interleave(ctx, benchkit.Rounds{N: rounds, Label: "warm exec", Progress: progress, KeepGoing: true}, t.series())
	return t, err
}

func measureWrites(ctx context.Context, rounds int, vm, img *mode) (*table, error) {
	// Random bytes, so that nothing on the way can make the write cheap
	// (a sparse file, a compressing layer).
	data := make([]byte, fileSize)
	if _, err := rand.Read(data); err != nil {
		return nil, err
	}
	const apiName, cmdName = "bench-api.bin", "bench-cmd.bin"
	cmd := sandbox.ExecRequest{Argv: []string{fmt.Sprintf("head -c %d /dev/zero > %s", fileSize, cmdName)}}
	t := &table{
		title: fmt.Sprintf("3. 16 MiB file write into the office, %d rounds interleaved after 2 warm-up rounds", rounds),
		legend: []string{
			"agent file API: Runtime.Agent + agent.Client.WriteFile of 16 MiB random bytes (staged, fsynced, renamed by the agent).",
			"command: Runtime.Exec `head -c 16777216 /dev/zero > " + cmdName + "` in the office (no fsync).",
			"gondolin's office is a virtiofs share (virtiofsd, cache=none); image's a bind mount. The file is removed on the host after each run, untimed.",
		},
	}
	api := pair{name: "agent file API WriteFile"}
	byCmd := pair{name: "command `head -c … > f`"}
	for _, m := range []*mode{vm, img} {
		apiHost, cmdHost := filepath.Join(m.spec.OfficeDir, apiName), filepath.Join(m.spec.OfficeDir, cmdName)
		a := &benchkit.Series{
			Name: m.name + " WriteFile",
			Run: func() error {
				cl, err := m.agent(ctx, m.spec)
				if err != nil {
					return err
				}
				return cl.WriteFile(ctx, path.Join(m.spec.OfficeRuntimePath, apiName), bytes.NewReader(data), 0o644)
			},
			After: func() { os.Remove(apiHost) },
		}
		c := &benchkit.Series{
			Name:  m.name + " head -c",
			Run:   func() error { return check(m.rt.Exec(ctx, m.spec, cmd)) },
			After: func() { os.Remove(cmdHost) },
		}
		// One of each, checked on the host: the rows must measure writes
		// that land in the office, whole.
		if err := a.Run(); err != nil {
			return nil, fmt.Errorf("%s: WriteFile: %w", m.name, err)
		}
		if got, err := os.ReadFile(apiHost); err != nil || !bytes.Equal(got, data) {
			return nil, fmt.Errorf("%s: the file written through the agent is not in the office on the host as written (%d bytes, %v)", m.name, len(got), err)
		}
		a.After()
		if err := c.Run(); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", m.name, cmd.Argv[0], err)
		}
		if fi, err := os.Stat(cmdHost); err != nil || fi.Size() != fileSize {
			return nil, fmt.Errorf("%s: the file written by the command is not in the office on the host with %d bytes (%v)", m.name, fileSize, err)
		}
		c.After()
		if m == vm {
			api.vm, byCmd.vm = a, c
		} else {
			api.img, byCmd.img = a, c
		}
	}
	t.rows = []pair{api, byCmd}
	progress("16 MiB writes: warm-up, 2 rounds")
	if err := benchkit.WarmUp(ctx, benchkit.Rounds{N: 2}, t.series()); err != nil {
		return nil, fmt.Errorf("16 MiB write warm-up: %w", err)
	}
	progress("16 MiB writes: %d rounds", rounds)
	err := benchkit.Interleave(ctx, benchkit.Rounds{N: rounds, Label: "16 MiB writes", Progress: progress, KeepGoing: true}, t.series())
	return t, err
}

// ensureAssets returns the guest assets built from the busybox test image
// where internal/testenv keeps them (so that the tests and this bench
// share one build), building them first when they are missing or do not
// verify. The build lock is the one testenv takes.
func ensureAssets(ctx context.Context, eng *engine.Engine) (string, error) {
	inspect, err := eng.Client.ImageInspect(ctx, benchkit.BusyboxRef)
	if err != nil {
		return "", fmt.Errorf("inspect %s: %w", benchkit.BusyboxRef, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "hutch-test", "microvm")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	unlock, err := lockFile(ctx, filepath.Join(root, "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	dir := filepath.Join(root, "assets-"+strings.TrimPrefix(inspect.ID, "sha256:")[:16])
	progress("checking the guest assets in %s", dir)
	if _, err := assets.Describe(dir); err == nil {
		return dir, nil
	}
	progress("building the guest assets from %s into %s (downloads Debian's cloud kernel once)", benchkit.BusyboxRef, dir)
	start := time.Now()
	if _, err := build.Build(ctx, build.Options{
		Engine: eng, From: benchkit.BusyboxRef, Dir: dir,
		CacheDir: filepath.Join(root, "cache"), Free: assetFree,
		Progress: progressWriter{},
	}); err != nil {
		return "", fmt.Errorf("build microVM guest assets: %w", err)
	}
	progress("built the guest assets in %s", time.Since(start).Round(time.Millisecond))
	return dir, nil
}

// progressWriter turns the builder's progress lines into the bench's.
type progressWriter struct{}

func (progressWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l != "" {
			progress("  build: %s", l)
		}
	}
	return len(p), nil
}

// lockFile takes an exclusive flock on path, polling so that ctx can end
// the wait: the same lock internal/testenv takes around its build.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open the build lock: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the build lock %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
