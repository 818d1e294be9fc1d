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
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/bench/benchkit"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
	"github.com/hutchsandbox/hutch/internal/microvm/build"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/microvm"
)

// assetFree is the free space of the guest's root filesystem when the
// assets are built here: what internal/testenv gives its guests, so that
// both build the same directory.
const assetFree = 256 << 20

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
	benchkit.Main("bench/microvm", "interrupted: cleaning up (interrupt again to quit at once, leaving VMs and containers behind)", func(ctx context.Context) error {
		return run(ctx, opts{boots: *boots, n: *n, writes: *writes, assets: *assetDir})
	})
}

type opts struct {
	boots, n, writes int
	assets           string
}

func run(ctx context.Context, o opts) error {
	if os.Geteuid() != 0 {
		return errors.New("run it as root: the microVM mode starts virtiofsd, which needs root")
	}
	eng, err := benchkit.BusyboxEngine(ctx, progress)
	if err != nil {
		return err
	}
	defer func() { _ = eng.Close() }()
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

	sc, err := benchkit.NewScratch(ctx, "microvm", progress)
	if err != nil {
		return err
	}
	defer sc.Close()

	vm := &benchkit.Mode{Name: "gondolin", StartEvents: []string{"started"}}
	vmRt, err := microvm.New(microvm.Config{
		StateDir: filepath.Join(sc.Dir, "state-vm"), RunDir: filepath.Join(sc.RunDir, "v"),
		AssetDir: assetDir, Agent: sc.Agent, Log: sc.Log, Event: vm.Event,
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
	vm.Runtime = vmRt
	vm.Stop = func(ctx context.Context) error { return vmRt.Stop(ctx, vm.Spec.OfficeKey) }
	vm.Remove = func(ctx context.Context) error { return vmRt.Remove(ctx, vm.Spec.OfficeKey) }

	tag := benchkit.RandomHex(4)
	if vm.Spec, err = sc.Office("bench-microvm-vm-"+tag, limits); err != nil {
		return err
	}
	img, removeImg, err := sc.ImageMode(eng, "bench-microvm-image-"+tag, limits)
	if err != nil {
		return err
	}
	// Removed whatever happened: the container, its network and any
	// snapshot; the deferred Close above ends the VM (whose disk goes
	// with the scratch dir).
	defer removeImg()

	v := benchkit.Versus{Subject: vm, Base: img, Progress: progress}
	if err := v.FirstCommands(ctx); err != nil {
		return err
	}
	bootTbl, err := measureBoots(ctx, o.boots, v)
	if err != nil {
		return err
	}
	execTbl, err := v.Exec(ctx, o.n, "2. Warm exec: `true` in a running VM / container", []string{
		"Runtime.Exec: what a service call does (gondolin: reads the asset manifest, compares the fingerprint; image: two engine GETs), then the agent runs `true`.",
		"diag agent client: agent.Client.Exec on the client Runtime.Agent returned once: the agent's own round trip.",
	})
	if err != nil {
		return err
	}
	writeTbl, err := v.Writes(ctx, o.writes, "3. 16 MiB file write into the office", "command `head -c … > f`", []string{
		"agent file API: Runtime.Agent + agent.Client.WriteFile of 16 MiB random bytes (staged, fsynced, renamed by the agent).",
		"command: Runtime.Exec `" + benchkit.WriteCommand + "` in the office (no fsync).",
		"gondolin's office is a virtiofs share (virtiofsd, cache=none); image's a bind mount. The file is removed on the host after each run, untimed.",
	})
	if err != nil {
		return err
	}

	benchkit.Header{Bench: "bench/microvm", Engine: eng, Detail: true}.Print(os.Stdout)
	fmt.Printf("accelerator: %s · guest: %s · agent sha256 %s\n", vmRt.Accel(), manifest.Source, sc.Agent.SHA256[:16])
	fmt.Printf("both offices: %g CPU, %d MiB, %d pids; image %s; percentiles nearest-rank; ratio = gondolin / image\n",
		limits.CPUs, limits.MemoryBytes>>20, limits.Pids, benchkit.BusyboxRef)
	fmt.Printf("first command of a new office (once each, not compared): gondolin %s (assets hashed, initrd staged, root disk made, VM booted) · image %s (agent staged earlier; network and container created, started)\n",
		benchkit.Ms(vm.First), benchkit.Ms(img.First))
	bootTbl.Print(os.Stdout)
	execTbl.Print(os.Stdout)
	writeTbl.Print(os.Stdout)
	return nil
}

func measureBoots(ctx context.Context, rounds int, v benchkit.Versus) (*benchkit.Comparison, error) {
	booted := func(m *benchkit.Mode, name string, down func(context.Context) error) *benchkit.Series {
		return m.ColdStart(ctx, name, down, "booted")
	}
	vm, img := v.Subject, v.Base
	c := v.Comparison("1. Boot to first command: Runtime.Exec `true` with nothing running", rounds, 0, []string{
		"stopped: gondolin: Stop powered the VM off (root disk kept); timed: virtiofsd + QEMU start, kernel boot, agent answers, mounts set up, `true`.",
		"         image: Stop stopped the container; timed: container start, agent answers, `true`.",
		"removed: gondolin: Remove deleted the root disk; timed: as stopped, plus a new qcow2 overlay.",
		"         image: Remove deleted container and network; timed: network + container created, started, agent answers, `true`.",
	})
	c.Rows = []benchkit.Row{
		{Name: "stopped → first `true`", Subject: booted(vm, "boot", vm.Stop), Base: booted(img, "start", img.Stop)},
		{Name: "diag: removed → first `true`", Subject: booted(vm, "new disk + boot", vm.Remove), Base: booted(img, "create + start", img.Remove)},
	}
	return c, v.Measure(ctx, c, "boot to first command")
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
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the build lock %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
