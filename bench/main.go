// Command bench measures hutch's image mode against what a caller would
// otherwise use, side by side in one run, and prints tables of medians,
// tail percentiles and ratios. These machines are noisy, so the claim is
// always a ratio of paths measured interleaved in the same run, never a
// bare wall time.
//
// It measures, against the local Docker engine and the busybox test image:
//
//  1. Warm exec of `true`: image.Runtime.Exec on a warm container (hutch's
//     in-process path, provisioning check included) vs the raw Engine API
//     exec (ExecCreate + ExecAttach + read to EOF + ExecInspect) vs the
//     `docker exec` CLI, interleaved round-robin. Two diagnostic rows say
//     where hutch's time goes: the agent client alone (no provisioning
//     check) and the engine round trips that check makes. Target: hutch's
//     median at most 1/10 of the raw API's.
//  2. Cold start: the first command of a new conversation (network,
//     container, agent, `true`) vs raw API create + start + exec of the
//     same image with a sleeping pid 1 (and, for reference, the same with a
//     network of its own), alternating. Target: ratio at most 1.2.
//  3. Files: 4 KiB and 16 MiB reads and writes through a daemon's API
//     (POST /v1/files/write and /read, raw bytes) vs CopyToContainer /
//     CopyFromContainer (tar, what docker cp calls); diagnostic rows make
//     the same calls in-process. Targets: at most 0.2 for 4 KiB, 0.5 for
//     16 MiB.
//  4. Concurrency: many conversations at once, each running `echo $i`
//     several times through one image.Runtime, containers created on
//     demand: failures (must be 0), cold and warm latency percentiles.
//  5. Memory: the agent's RSS inside idle containers (/proc/1/status, read
//     through an exec), this process's RSS, Go heap and goroutines
//     before and after making many idle managed containers, and what
//     they cost the whole system (MemTotal - MemAvailable) against as
//     many plain `sleep` containers, with and without a network each.
//  6. API overhead: warm exec of `true` through a daemon (daemon.Run in
//     this process, image mode, its own state dir) by the client package over
//     its unix socket vs image.Runtime.Exec in-process, interleaved; a
//     diagnostic row runs service.Exec on the daemon's own service (policy,
//     registry and vault, no HTTP). Target: API p50 / in-process p50 at
//     most 1.3.
//  7. Offices at scale: warm exec through the API of a daemon whose
//     registry holds one office vs one whose registry holds -offices
//     (10,000), interleaved, and GET /v1/offices of each. Targets: the
//     exec ratio at most 1.1; the listing of 10,000 under 10 ms.
//  8. CLI: a warm `hutch exec` as a user runs it, a new hutch process each
//     time, without a daemon (image mode in the process) and through a
//     daemon, vs `docker exec` (the docker CLI), interleaved; a diagnostic
//     row times `hutch --version`, the process start alone. Targets: at
//     most 0.4 of docker exec without a daemon, 0.25 through one.
//
// Run it from the module root:
//
//	go run ./bench                 # full run: several minutes
//	go run ./bench -quick          # smoke run: about a minute
//	go run ./bench -warm 500 -idle 40 -cpuprofile warm.pprof
//	go run ./bench -only 'offices at scale' -api 300
//
// Flags set counts (-warm, -cold, -small, -large, -convs, -cmds, -idle, -api,
// -offices); -quick lowers every count not given explicitly. The agent is a static
// hutch built with CGO_ENABLED=0 (or -agent PATH); the image
// hutch-test-busybox:1 is built by `go test -run TestBusyboxImage
// ./internal/testenv` when missing. Everything it makes carries the label
// hutch.state-dir=<a temp state dir> and is removed at the end and on
// Ctrl-C. Tables go to stdout, progress to stderr.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/bench/benchkit"
	hclient "github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/settings"
)

type config struct {
	warm, cold, small, large, convs, cmds, idle, api, parallel, offices int
	quick                                                               bool
	image, agent, cpuprofile, only                                      string
}

func main() { os.Exit(run()) }

func run() int {
	var c config
	flag.IntVar(&c.warm, "warm", 200, "warm exec runs per path")
	flag.IntVar(&c.cold, "cold", 20, "cold starts per path")
	flag.IntVar(&c.small, "small", 50, "4 KiB reads and writes per path")
	flag.IntVar(&c.large, "large", 10, "16 MiB reads and writes per path")
	flag.IntVar(&c.convs, "convs", 40, "conversations at once in the concurrency phase")
	flag.IntVar(&c.cmds, "cmds", 25, "commands per conversation in the concurrency phase")
	flag.IntVar(&c.idle, "idle", 100, "idle managed containers in the memory phase")
	flag.IntVar(&c.api, "api", 200, "warm exec runs per path through the daemon's API and in-process")
	flag.IntVar(&c.offices, "offices", 10000, "offices registered in the scale phase's second daemon")
	flag.IntVar(&c.parallel, "parallel", 4, "containers created or removed at once in setup and cleanup")
	flag.BoolVar(&c.quick, "quick", false, "smoke run: lower every count not set explicitly")
	flag.StringVar(&c.only, "only", "", "run only these phases, comma-separated (e.g. \"warm exec,offices at scale\"); default: every phase")
	flag.StringVar(&c.image, "image", benchkit.BusyboxRef, "image of every container")
	flag.StringVar(&c.agent, "agent", "", "static hutch binary to use as the agent (default: build one)")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of an extra hutch-only warm exec loop to this file")
	flag.Parse()
	if c.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, p := range map[string]*int{"warm": &c.warm, "cold": &c.cold, "small": &c.small, "large": &c.large, "convs": &c.convs, "cmds": &c.cmds, "idle": &c.idle, "api": &c.api} {
			if !set[name] {
				*p = map[string]int{"warm": 20, "cold": 2, "small": 10, "large": 2, "convs": 8, "cmds": 5, "idle": 10, "api": 20}[name]
			}
		}
	}

	type phase struct {
		name string
		f    func(*bench, context.Context) error
	}
	phases := []phase{
		{"warm exec", (*bench).warmExec},
		{"cold start", (*bench).coldStart},
		{"pool burst", (*bench).poolBurst},
		{"trace", (*bench).trace},
		{"files", (*bench).files},
		{"concurrency", (*bench).concurrency},
		{"memory", (*bench).memory},
		{"API overhead", (*bench).apiOverhead},
		{"offices at scale", (*bench).scale},
		{"CLI", (*bench).cli},
	}
	if c.only != "" {
		var chosen []phase
		for _, name := range strings.Split(c.only, ",") {
			i := slices.IndexFunc(phases, func(p phase) bool { return p.name == strings.TrimSpace(name) })
			if i < 0 {
				var names []string
				for _, p := range phases {
					names = append(names, strconv.Quote(p.name))
				}
				fmt.Fprintf(os.Stderr, "bench: -only: no phase is named %q; the phases are %s\n", strings.TrimSpace(name), strings.Join(names, ", "))
				return 2
			}
			chosen = append(chosen, phases[i])
		}
		phases = chosen
	}

	ctx, cancel := benchkit.Interruptible(progress, "interrupted: cleaning up (interrupt again to quit at once, leaving containers behind)")
	defer cancel()
	// A closed stdout (| head) must not kill the run before its cleanup:
	// with SIGPIPE caught, writes fail with EPIPE instead.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	b, err := setup(ctx, c)
	if b != nil {
		defer b.cleanup()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	b.header()
	failed := false
	for _, p := range phases {
		if ctx.Err() != nil {
			break
		}
		progress("phase: %s", p.name)
		if err := p.f(b, ctx); err != nil {
			if ctx.Err() != nil {
				benchkit.Printf(b.out, "\n%s: interrupted\n", p.name)
				break
			}
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", p.name, err)
			benchkit.Printf(b.out, "\n%s: FAILED: %v\n", p.name, err)
			failed = true
		}
	}
	if ctx.Err() == nil && c.cpuprofile != "" {
		if err := b.profileWarm(ctx, c.cpuprofile); err != nil {
			fmt.Fprintln(os.Stderr, "bench: profile:", err)
			failed = true
		}
	}
	b.summary()
	if ctx.Err() != nil {
		return 130
	}
	if failed {
		return 1
	}
	return 0
}

// bench holds one hutch installation (its own state, run and workspace
// dirs) and the raw engine client the baselines use.
type bench struct {
	c      config
	out    io.Writer
	eng    *engine.Engine // hutch's engine connection
	raw    *client.Client // the baselines' own client
	agent  agentbin.Binary
	state  string
	runDir string
	ws     string
	// daemonStates are the state dirs of the daemons the API phases
	// started; cleanup removes what carries their labels too.
	daemonStates []string
	tmp          string // removed at the end; holds state, ws, the agent build
	rt           *image.Runtime
	docker       string // docker CLI, "" when missing
	targets      []target
	log          *slog.Logger
	// pooled counts the runtimes b.rt handed out from the warm pool.
	pooled atomic.Int64
}

type target struct {
	what  string
	value float64
	limit float64
	less  bool // value must be <= limit (else ==)
}

var progress = benchkit.Progress("bench")

func setup(ctx context.Context, c config) (*bench, error) {
	eng, err := engine.Connect(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := client.New(client.FromEnv)
	if err != nil {
		return nil, err
	}
	if _, err := raw.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return nil, err
	}
	if err := benchkit.EnsureImage(ctx, raw, c.image, progress); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "hutch-bench-")
	if err != nil {
		return nil, err
	}
	// Unix socket paths are short: the run dir gets a short name of its own.
	runDir, err := os.MkdirTemp("", "hb-")
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	b := &bench{c: c, out: os.Stdout, eng: eng, raw: raw, tmp: tmp, runDir: runDir,
		state: filepath.Join(tmp, "state"), ws: filepath.Join(tmp, "ws"),
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for _, d := range []string{b.state, b.ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return b, err
		}
	}
	bin := c.agent
	if bin == "" {
		progress("building a static hutch (CGO_ENABLED=0 go build ./cmd/hutch)")
		if bin, err = benchkit.BuildHutch(ctx, tmp); err != nil {
			return b, err
		}
	}
	if b.agent, err = agentbin.Locate(bin); err != nil {
		return b, err
	}
	if b.rt, err = b.newRuntime(); err != nil {
		return b, err
	}
	if p, err := exec.LookPath("docker"); err == nil {
		b.docker = p
	}
	return b, nil
}

func (b *bench) newRuntime() (*image.Runtime, error) {
	return image.New(image.Config{Engine: b.eng, Image: b.c.image, StateDir: b.state, RunDir: b.runDir, Agent: b.agent, Log: b.log,
		Event: func(e string) {
			if e == "pooled" {
				b.pooled.Add(1)
			}
		}})
}

// cleanup removes everything labelled with this run's state dir:
// containers, networks, snapshot images; then the temp dirs.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, state := range append([]string{b.state}, b.daemonStates...) {
		b.cleanupState(ctx, state)
	}
	// The warm pool's mounts go before the run dir: never remove through
	// one into an office.
	if b.rt != nil {
		if err := b.rt.SweepPool(ctx); err != nil {
			progress("warm pool: %v", err)
		}
	}
	_ = os.RemoveAll(b.runDir)
	_ = os.RemoveAll(b.tmp)
	_ = b.raw.Close()
	_ = b.eng.Close()
}

// cleanupState removes the containers, networks and snapshot images
// labelled with one state dir.
func (b *bench) cleanupState(ctx context.Context, state string) {
	filters := make(client.Filters).Add("label", engine.LabelStateDir+"="+state)
	for attempt := 0; attempt < 5; attempt++ {
		list, err := b.raw.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
		if err != nil {
			progress("cleanup: list containers: %v", err)
			break
		}
		if len(list.Items) == 0 {
			break
		}
		progress("cleanup: removing %d containers", len(list.Items))
		parallel(len(list.Items), b.c.parallel, func(i int) {
			_, err := b.raw.ContainerRemove(ctx, list.Items[i].ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !engine.IsNotFound(err) && !engine.IsConflict(err) {
				progress("cleanup: remove container %s: %v", list.Items[i].ID[:12], err)
			}
		})
	}
	if nets, err := b.raw.NetworkList(ctx, client.NetworkListOptions{Filters: filters}); err == nil {
		if len(nets.Items) > 0 {
			progress("cleanup: removing %d networks", len(nets.Items))
		}
		for _, n := range nets.Items {
			if _, err := b.raw.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !engine.IsNotFound(err) {
				progress("cleanup: remove network %s: %v", n.Name, err)
			}
		}
	}
	// Snapshot images inherit the container's labels on commit.
	if imgs, err := b.raw.ImageList(ctx, client.ImageListOptions{All: true, Filters: filters}); err == nil {
		for _, im := range imgs.Items {
			if _, err := b.raw.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !engine.IsNotFound(err) {
				progress("cleanup: remove image %s: %v", im.ID, err)
			}
		}
	}
}

// parallel runs f(0..n-1) with at most k at once.
func parallel(n, k int, f func(i int)) {
	sem := make(chan struct{}, max(k, 1))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

func (b *bench) header() {
	benchkit.Header{Bench: "bench", Engine: b.eng, Detail: true}.Print(b.out)
	benchkit.Printf(b.out, "image %s · agent %s (sha256 %s…) · percentiles nearest-rank · ratios are of medians unless named\n",
		b.c.image, b.agent.Path, b.agent.SHA256[:12])
}

// ---- measurement helpers ----

// interleave measures ops in n rounds. A failed run is recorded and the
// rounds go on: the tables show failures as a column.
func interleave(ctx context.Context, n int, label string, ops []*benchkit.Series) error {
	return benchkit.Interleave(ctx, benchkit.Rounds{N: n, Label: label, Progress: progress, KeepGoing: true}, ops)
}

// warmUp runs every op a few times unrecorded and fails on any error.
func warmUp(ctx context.Context, n int, label string, ops []*benchkit.Series) error {
	return benchkit.WarmUp(ctx, benchkit.Rounds{N: n, Label: label + " warm-up", Progress: progress, KeepGoing: true}, ops)
}

func (b *bench) addTarget(what string, value, limit float64) {
	b.targets = append(b.targets, target{what: what, value: value, limit: limit, less: true})
}

// office makes an office directory and the spec of its conversation.
func (b *bench) office(id string) (sandbox.Spec, error) {
	addr, err := office.NewAddress("web", id)
	if err != nil {
		return sandbox.Spec{}, err
	}
	key := string(addr.Key())
	dir := filepath.Join(b.ws, key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{
		OfficeKey:         key,
		Platform:          "web",
		ConversationID:    id,
		OfficeDir:         dir,
		OfficeRuntimePath: "/workspace/" + key,
		Mounts:            []sandbox.Mount{{HostPath: dir, RuntimePath: "/workspace/" + key}},
	}, nil
}

// hutchRun runs a shell command through the runtime and checks it exited 0.
func hutchRun(ctx context.Context, rt *image.Runtime, spec sandbox.Spec, cmd string, env map[string]string, stdout io.Writer) error {
	var stderr bytes.Buffer
	res, err := rt.Exec(ctx, spec, sandbox.ExecRequest{Argv: []string{cmd}, Env: env, Stdout: stdout, Stderr: &stderr, Timeout: 5 * time.Minute, OutputLimit: 1 << 20})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%q exited %d %s: %s", cmd, res.ExitCode, res.Message(), strings.TrimSpace(stderr.String()))
	}
	return nil
}

// rawExec runs argv in a container the way a caller of the Engine API
// would: create, attach (which starts it), read both streams to EOF,
// inspect for the exit code.
func rawExec(ctx context.Context, cli *client.Client, id string, argv ...string) error {
	cr, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{AttachStdout: true, AttachStderr: true, Cmd: argv})
	if err != nil {
		return err
	}
	at, err := cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	if err != nil {
		return err
	}
	_, err = stdcopy.StdCopy(io.Discard, io.Discard, at.Reader)
	at.Close()
	if err != nil {
		return err
	}
	for {
		ins, err := cli.ExecInspect(ctx, cr.ID, client.ExecInspectOptions{})
		if err != nil {
			return err
		}
		if !ins.Running {
			if ins.ExitCode != 0 {
				return fmt.Errorf("exit %d", ins.ExitCode)
			}
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

// dockerExecTrue runs `docker exec <id> true`, a docker CLI process.
func (b *bench) dockerExecTrue(ctx context.Context, id string) func() error {
	return func() error {
		out, err := exec.CommandContext(ctx, b.docker, "exec", id, "true").CombinedOutput()
		if err != nil {
			return fmt.Errorf("docker exec: %v: %s", err, out)
		}
		return nil
	}
}

func (b *bench) containerID(ctx context.Context, key string) (string, error) {
	res, err := b.raw.ContainerInspect(ctx, image.ContainerName(key), client.ContainerInspectOptions{})
	if err != nil {
		return "", err
	}
	return res.Container.ID, nil
}

// ---- 1. warm exec ----

func (b *bench) warmExec(ctx context.Context) error {
	spec, err := b.office("bench-warm")
	if err != nil {
		return err
	}
	if err := hutchRun(ctx, b.rt, spec, "true", nil, nil); err != nil {
		return fmt.Errorf("first command: %w", err)
	}
	id, err := b.containerID(ctx, spec.OfficeKey)
	if err != nil {
		return err
	}
	cl, err := b.rt.Agent(ctx, spec)
	if err != nil {
		return err
	}
	ops := []*benchkit.Series{
		{Name: "hutch: image.Runtime.Exec (sh -c true)",
			Run: func() error { return hutchRun(ctx, b.rt, spec, "true", nil, nil) }},
		{Name: "raw Engine API: ExecCreate+Attach+Inspect (true)",
			Run: func() error { return rawExec(ctx, b.raw, id, "true") }},
		{Name: "docker exec CLI (true)", Run: b.dockerExecTrue(ctx, id)},
		{Name: "diag: agent.Client.Exec alone, no provisioning check",
			Run: func() error {
				res, err := cl.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}, Dir: spec.OfficeRuntimePath})
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("exit %d", res.ExitCode)
				}
				return err
			}},
		{Name: "diag: agent.Client.Ping alone (HTTP/2 round trip, no fork)",
			Run: func() error { _, err := cl.Ping(ctx); return err }},
		{Name: "diag: the 3 engine GETs of hutch's check, alone",
			Run: func() error { return ensureGets(ctx, b.eng.Client, b.c.image, spec.OfficeKey) }},
	}
	if b.docker == "" {
		ops = slices.Delete(ops, 2, 3)
	}
	if err := warmUp(ctx, 5, "warm exec", ops); err != nil {
		return err
	}
	if err := interleave(ctx, b.c.warm, "warm exec", ops); err != nil {
		return err
	}
	raw := ops[1]
	benchkit.Printf(b.out, "\n1. Warm exec, %d runs per path, interleaved round-robin, all in the same warm hutch container\n", b.c.warm)
	tw := benchkit.Table(b.out)
	benchkit.Println(tw, "path\tok\tfail\tp50\tp90\tp99\t÷raw p50\t÷raw p90")
	for _, s := range ops {
		benchkit.Printf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%.3f\t%.3f\n", s.Name, len(s.Times), s.Fail, benchkit.Ms(s.P50()), benchkit.Ms(s.Pct(90)), benchkit.Ms(s.Pct(99)),
			benchkit.Ratio(s.P50(), raw.P50()), benchkit.Ratio(s.Pct(90), raw.Pct(90)))
	}
	_ = tw.Flush()
	h := ops[0]
	benchkit.Printf(b.out, "hutch/raw API = %.3f (target ≤ 0.10)", benchkit.Ratio(h.P50(), raw.P50()))
	if b.docker != "" {
		benchkit.Printf(b.out, " · hutch/docker CLI = %.3f", benchkit.Ratio(h.P50(), ops[2].P50()))
	}
	benchkit.Println(b.out)
	b.reportFailures(ops)
	b.addTarget("warm exec: hutch p50 / raw API p50", benchkit.Ratio(h.P50(), raw.P50()), 0.10)
	return nil
}

// ensureGets makes the engine calls image.Runtime's per-command check
// makes on a warm container: inspect the image, the container, and the
// (absent) snapshot tag.
func ensureGets(ctx context.Context, cli *client.Client, ref, key string) error {
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return err
	}
	if _, err := cli.ContainerInspect(ctx, image.ContainerName(key), client.ContainerInspectOptions{}); err != nil {
		return err
	}
	if _, err := cli.ImageInspect(ctx, image.SnapshotRef(key)); !engine.IsNotFound(err) {
		return fmt.Errorf("snapshot inspect: %v", err)
	}
	return nil
}

func (b *bench) reportFailures(rows []*benchkit.Series) {
	for _, s := range rows {
		if s.Fail > 0 {
			benchkit.Printf(b.out, "  %s: %d failures, first: %v\n", s.Name, s.Fail, s.Err)
		}
	}
}

// profileWarm writes a CPU profile of a hutch-only warm exec loop.
func (b *bench) profileWarm(ctx context.Context, path string) error {
	spec, err := b.office("bench-warm")
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // on the way out of an error; the end closes it and checks
	n := max(b.c.warm, 200)
	progress("profile: %d hutch warm execs into %s", n, path)
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := hutchRun(ctx, b.rt, spec, "true", nil, nil); err != nil {
			pprof.StopCPUProfile()
			return err
		}
	}
	el := time.Since(t0)
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		return err
	}
	benchkit.Printf(b.out, "\nprofile: %d hutch warm execs, mean %s each, CPU profile in %s\n", n, benchkit.Ms(el/time.Duration(n)), path)
	return nil
}

// ---- 2. cold start ----

func (b *bench) coldStart(ctx context.Context) error {
	var n [6]int
	var cleanups []func()
	var pre, pooled sandbox.Spec
	poolOK := b.rt.PoolUnusable() == ""
	pooledBefore := b.pooled.Load()
	after := func() {
		for _, f := range cleanups {
			f()
		}
		cleanups = nil
	}
	ops := []*benchkit.Series{
		{Name: "hutch: first command of a new conversation", After: after,
			Run: func() error { n[0]++; return b.coldHutch(ctx, n[0], &cleanups) }},
		{Name: "raw API: create+start+exec (true), default bridge", After: after,
			Run: func() error { n[1]++; return b.coldRaw(ctx, n[1], false, &cleanups) }},
		{Name: "ref: raw API, own network: network create+create+start+exec", After: after,
			Run: func() error { n[2]++; return b.coldRaw(ctx, n[2], true, &cleanups) }},
		{Name: "diag: hutch first command, its network made beforehand", After: after,
			Before: func() (err error) { n[3]++; pre, err = b.preNetwork(ctx, n[3], &cleanups); return err },
			Run:    func() error { return hutchRun(ctx, b.rt, pre, "true", nil, nil) }},
	}
	if poolOK {
		ops = append(ops, &benchkit.Series{Name: "hutch: first command from the warm pool (1 ready, filled untimed)", After: after,
			Before: func() (err error) { n[4]++; pooled, err = b.poolOffice(ctx, n[4], false, &cleanups); return err },
			Run:    func() error { return hutchRun(ctx, b.rt, pooled, "true", nil, nil) }},
			&benchkit.Series{Name: "hutch: first command from the warm pool, its member paused (idle pool)", After: after,
				Before: func() (err error) { n[5]++; pooled, err = b.poolOffice(ctx, 1000+n[5], true, &cleanups); return err },
				Run:    func() error { return hutchRun(ctx, b.rt, pooled, "true", nil, nil) }})
	}
	if err := warmUp(ctx, 1, "cold start", ops); err != nil {
		return err
	}
	if err := interleave(ctx, b.c.cold, "cold start", ops); err != nil {
		return err
	}
	raw := ops[1]
	benchkit.Printf(b.out, "\n2. Cold start, %d per path, alternating; each container and network removed after its run, untimed\n", b.c.cold)
	tw := benchkit.Table(b.out)
	benchkit.Println(tw, "path\tok\tfail\tp50\tp90\tmax\t÷raw p50")
	for _, s := range ops {
		benchkit.Printf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%.3f\n", s.Name, len(s.Times), s.Fail, benchkit.Ms(s.P50()), benchkit.Ms(s.Pct(90)), benchkit.Ms(s.Pct(100)), benchkit.Ratio(s.P50(), raw.P50()))
	}
	_ = tw.Flush()
	benchkit.Printf(b.out, "hutch/raw API = %.3f (target ≤ 1.2) · hutch/raw API with its own network = %.3f\n",
		benchkit.Ratio(ops[0].P50(), raw.P50()), benchkit.Ratio(ops[0].P50(), ops[2].P50()))
	b.reportFailures(ops)
	b.addTarget("cold start: hutch p50 / raw API p50", benchkit.Ratio(ops[0].P50(), raw.P50()), 1.2)
	if !poolOK {
		benchkit.Printf(b.out, "warm pool: not measured: %s\n", b.rt.PoolUnusable())
		return nil
	}
	pool, paused := ops[4], ops[5]
	served := b.pooled.Load() - pooledBefore
	want := len(pool.Times) + len(paused.Times) + 2
	benchkit.Printf(b.out, "warm pool: first command p50 %s = %.3f of the like-for-like Docker path (own network; target ≤ 0.1); from a paused member %s = %.3f · served from the pool: %d of %d (the warm-ups' included)\n",
		benchkit.Ms(pool.P50()), benchkit.Ratio(pool.P50(), ops[2].P50()), benchkit.Ms(paused.P50()), benchkit.Ratio(paused.P50(), ops[2].P50()), served, want)
	b.addTarget("warm pool: first command p50 / raw API with its own network p50", benchkit.Ratio(pool.P50(), ops[2].P50()), 0.1)
	b.addTarget("warm pool: first command p50, ms (the fastest cloud publishes ~90)", float64(pool.P50().Microseconds())/1000, 90)
	b.addTarget("warm pool, member paused: first command p50 / raw API with its own network p50", benchkit.Ratio(paused.P50(), ops[2].P50()), 0.1)
	b.targets = append(b.targets, target{what: "warm pool: first commands not served from the pool", value: float64(want - int(served)), limit: 0})
	return b.rt.DrainPool(ctx)
}

// poolOffice fills the warm pool to one ready runtime (untimed; paused
// when pause) and returns the spec of a new conversation, whose runtime
// the cleanup it registers removes.
func (b *bench) poolOffice(ctx context.Context, i int, pause bool, cleanups *[]func()) (sandbox.Spec, error) {
	spec, err := b.office(fmt.Sprintf("bench-pool-%d", i))
	if err != nil {
		return spec, err
	}
	*cleanups = append(*cleanups, func() {
		if err := b.rt.Remove(context.WithoutCancel(ctx), spec.OfficeKey); err != nil {
			progress("remove %s: %v", spec.OfficeKey, err)
		}
	})
	if err := b.rt.FillPool(ctx, 1); err != nil || !pause {
		return spec, err
	}
	return spec, b.rt.PauseReady(ctx)
}

// coldHutch runs the first command of a new conversation; its runtime is
// removed by the cleanup it registers.
func (b *bench) coldHutch(ctx context.Context, i int, cleanups *[]func()) error {
	spec, err := b.office(fmt.Sprintf("bench-cold-%d", i))
	if err != nil {
		return err
	}
	*cleanups = append(*cleanups, func() {
		if err := b.rt.Remove(context.WithoutCancel(ctx), spec.OfficeKey); err != nil {
			progress("remove %s: %v", spec.OfficeKey, err)
		}
	})
	return hutchRun(ctx, b.rt, spec, "true", nil, nil)
}

// preNetwork makes, untimed, the network hutch would make for a new
// conversation (same name and labels, a subnet outside hutch's pool), so
// that a first command can be timed without the network's creation.
func (b *bench) preNetwork(ctx context.Context, i int, cleanups *[]func()) (sandbox.Spec, error) {
	spec, err := b.office(fmt.Sprintf("bench-prenet-%d", i))
	if err != nil {
		return spec, err
	}
	*cleanups = append(*cleanups, func() {
		if err := b.rt.Remove(context.WithoutCancel(ctx), spec.OfficeKey); err != nil && !strings.Contains(err.Error(), "No runtime") {
			progress("remove %s: %v", spec.OfficeKey, err)
		}
	})
	sub := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 215, byte(i >> 5), byte(i << 3)}), 29)
	_, err = b.raw.NetworkCreate(ctx, image.NetworkName(spec.OfficeKey), client.NetworkCreateOptions{Driver: "bridge",
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: sub, Gateway: sub.Addr().Next()}}},
		Labels: map[string]string{engine.LabelManaged: "true", engine.LabelMode: string(sandbox.KindImage),
			engine.LabelOffice: spec.OfficeKey, engine.LabelStateDir: b.state}})
	return spec, err
}

// coldRaw creates, starts and execs `true` in a plain container of the
// same image with a sleeping pid 1, optionally on a bridge network of its
// own (as hutch makes one per conversation).
func (b *bench) coldRaw(ctx context.Context, i int, ownNet bool, cleanups *[]func()) error {
	labels := map[string]string{engine.LabelStateDir: b.state}
	name := fmt.Sprintf("hutch-bench-raw-%d-%s", i, benchkit.RandomHex(3))
	var id string
	*cleanups = append(*cleanups, func() {
		c := context.WithoutCancel(ctx)
		if id != "" {
			if _, err := b.raw.ContainerRemove(c, id, client.ContainerRemoveOptions{Force: true}); err != nil {
				progress("remove %s: %v", name, err)
			}
		}
		if ownNet {
			if _, err := b.raw.NetworkRemove(c, name, client.NetworkRemoveOptions{}); err != nil && !engine.IsNotFound(err) {
				progress("remove network %s: %v", name, err)
			}
		}
	})
	netMode := container.NetworkMode("bridge")
	if ownNet {
		sub := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 214, byte(i >> 5), byte(i << 3)}), 29)
		if _, err := b.raw.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels,
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: sub, Gateway: sub.Addr().Next()}}}}); err != nil {
			return err
		}
		netMode = container.NetworkMode(name)
	}
	res, err := b.raw.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name,
		Config:     &container.Config{Image: b.c.image, Cmd: []string{"sleep", "2147483647"}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: netMode}})
	if err != nil {
		return err
	}
	id = res.ID
	if _, err := b.raw.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return err
	}
	return rawExec(ctx, b.raw, id, "true")
}

// ---- 2a. a burst of first commands ----

// poolBurst starts 20 new conversations at once, each with one command,
// with no warm pool and with a pool of 2 that refills while the burst
// runs (as a daemon keeps it), alternating.
func (b *bench) poolBurst(ctx context.Context) error {
	if why := b.rt.PoolUnusable(); why != "" {
		benchkit.Printf(b.out, "\n2a. Burst of first commands: not measured: %s\n", why)
		return nil
	}
	const burst, poolSize = 20, 2
	rounds := max(1, b.c.cold/10)
	cold := &benchkit.Series{Name: "no pool: every runtime started cold"}
	pooled := &benchkit.Series{Name: fmt.Sprintf("pool of %d (the default), refilled during the burst", poolSize)}
	sized := &benchkit.Series{Name: fmt.Sprintf("pool of %d (the burst's size), refilled during the burst", burst)}
	size := map[*benchkit.Series]int{cold: 0, pooled: poolSize, sized: burst}
	served := map[*benchkit.Series]int64{}
	for r := range rounds {
		for _, s := range []*benchkit.Series{cold, pooled, sized} {
			n := size[s]
			progress("pool burst: round %d/%d, %s", r+1, rounds, s.Name)
			specs := make([]sandbox.Spec, burst)
			for i := range specs {
				var err error
				if specs[i], err = b.office(fmt.Sprintf("bench-burst-%d-%d-%d", r, n, i)); err != nil {
					return err
				}
			}
			stopFill := func() {}
			servedBefore := b.pooled.Load()
			if n > 0 {
				if err := b.rt.FillPool(ctx, n); err != nil {
					return err
				}
				fctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); b.rt.KeepPool(fctx, func() int { return n }, time.Second) }()
				stopFill = func() { cancel(); <-done }
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range specs {
				wg.Go(func() {
					<-start
					t0 := time.Now()
					err := hutchRun(ctx, b.rt, specs[i], "true", nil, nil)
					mu.Lock()
					s.Record(time.Since(t0), err)
					mu.Unlock()
				})
			}
			close(start)
			wg.Wait()
			served[s] += b.pooled.Load() - servedBefore
			stopFill()
			b.removeAll(b.rt, specs, "pool burst")
			if err := b.rt.DrainPool(ctx); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	benchkit.Printf(b.out, "\n2a. Burst: %d first commands of new conversations at once, %d round(s) per path, alternating; the pool filled untimed before each burst; runtimes removed after it, untimed\n", burst, rounds)
	tw := benchkit.Table(b.out)
	benchkit.Println(tw, "path\tok\tfail\tfrom the pool\tp50\tp90\tp99\tmax\t÷no pool p50\t÷no pool p99")
	for _, s := range []*benchkit.Series{cold, pooled, sized} {
		benchkit.Printf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.3f\t%.3f\n", s.Name, len(s.Times), s.Fail, served[s], benchkit.Ms(s.P50()), benchkit.Ms(s.Pct(90)), benchkit.Ms(s.Pct(99)), benchkit.Ms(s.Pct(100)),
			benchkit.Ratio(s.P50(), cold.P50()), benchkit.Ratio(s.Pct(99), cold.Pct(99)))
	}
	_ = tw.Flush()
	b.reportFailures([]*benchkit.Series{cold, pooled, sized})
	b.targets = append(b.targets, target{what: "pool burst: failed first commands", value: float64(cold.Fail + pooled.Fail + sized.Fail), limit: 0})
	return nil
}

// ---- 2b. trace ----

// engineTrace records the Engine API requests of a traced client: when
// each was sent and when its response headers arrived.
type engineTrace struct {
	mu    sync.Mutex
	on    bool
	t0    time.Time
	calls []engineCall
}

type engineCall struct {
	what       string
	start, dur time.Duration
	status     int
}

const traceHeader = "X-Hutch-Bench-Sent"

func (t *engineTrace) begin() {
	t.mu.Lock()
	t.on, t.t0, t.calls = true, time.Now(), nil
	t.mu.Unlock()
}

func (t *engineTrace) end() []engineCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on = false
	return t.calls
}

var (
	hexID      = regexp.MustCompile(`[0-9a-f]{64}`)
	apiVersion = regexp.MustCompile(`^/v[0-9.]+`)
)

func (t *engineTrace) response(resp *http.Response) {
	now := time.Now()
	req := resp.Request
	if req == nil {
		return
	}
	sent, err := strconv.ParseInt(req.Header.Get(traceHeader), 10, 64)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on {
		return
	}
	path := hexID.ReplaceAllString(apiVersion.ReplaceAllString(req.URL.Path, ""), "<id>")
	t.calls = append(t.calls, engineCall{what: req.Method + " " + path, start: time.Unix(0, sent).Sub(t.t0), dur: now.Sub(time.Unix(0, sent)), status: resp.StatusCode})
}

// tracedRuntime is an image.Runtime over the same installation whose
// engine client records every request.
func (b *bench) tracedRuntime(ctx context.Context) (*image.Runtime, *engineTrace, error) {
	tr := &engineTrace{}
	cli, err := client.New(client.FromEnv,
		client.WithHTTPRequestHook(func(r *http.Request) error {
			r.Header.Set(traceHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
			return nil
		}),
		client.WithHTTPResponseHook(tr.response))
	if err != nil {
		return nil, nil, err
	}
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = cli.Close()
		return nil, nil, err
	}
	eng := *b.eng
	eng.Client = cli
	rt, err := image.New(image.Config{Engine: &eng, Image: b.c.image, StateDir: b.state, RunDir: b.runDir, Agent: b.agent, Log: b.log})
	if err != nil {
		_ = cli.Close()
	}
	return rt, tr, err
}

// trace shows where one hutch cold start and one warm exec spend their
// time: each Engine API call (until its response headers), and what is
// left after the last one (waiting for the agent, running the command).
func (b *bench) trace(ctx context.Context) error {
	rt, tr, err := b.tracedRuntime(ctx)
	if err != nil {
		return err
	}
	spec, err := b.office("bench-trace")
	if err != nil {
		return err
	}
	defer func() {
		if err := rt.Remove(context.WithoutCancel(ctx), spec.OfficeKey); err != nil {
			progress("remove %s: %v", spec.OfficeKey, err)
		}
	}()
	benchkit.Printf(b.out, "\n2b. Where one traced hutch cold start and one warm exec go (Engine API calls until response headers; office key shown as <key>)\n")
	show := func(title string, f func() error) error {
		tr.begin()
		t0 := time.Now()
		err := f()
		total := time.Since(t0)
		calls := tr.end()
		if err != nil {
			return err
		}
		tw := benchkit.Table(b.out)
		benchkit.Printf(tw, "%s: %s total\tat\ttook\tstatus\n", title, benchkit.Ms(total))
		var last, inCalls time.Duration
		for _, c := range calls {
			benchkit.Printf(tw, "  %s\t+%s\t%s\t%d\n", strings.ReplaceAll(c.what, spec.OfficeKey, "<key>"), benchkit.Ms(c.start), benchkit.Ms(c.dur), c.status)
			last = max(last, c.start+c.dur)
			inCalls += c.dur
		}
		benchkit.Printf(tw, "  engine calls, summed\t\t%s\t\n", benchkit.Ms(inCalls))
		benchkit.Printf(tw, "  after the last engine call (agent start, ping, exec)\t+%s\t%s\t\n", benchkit.Ms(last), benchkit.Ms(total-last))
		return tw.Flush()
	}
	if err := show("cold start", func() error { return hutchRun(ctx, rt, spec, "true", nil, nil) }); err != nil {
		return err
	}
	for i := 0; i < 5; i++ {
		if err := hutchRun(ctx, rt, spec, "true", nil, nil); err != nil {
			return err
		}
	}
	return show("warm exec", func() error { return hutchRun(ctx, rt, spec, "true", nil, nil) })
}

// ---- 3. files ----

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func (b *bench) files(ctx context.Context) error {
	spec, err := b.office("bench-warm")
	if err != nil {
		return err
	}
	if err := hutchRun(ctx, b.rt, spec, "true", nil, nil); err != nil {
		return err
	}
	id, err := b.containerID(ctx, spec.OfficeKey)
	if err != nil {
		return err
	}
	cl, err := b.rt.Agent(ctx, spec)
	if err != nil {
		return err
	}
	// The headline rows go through a daemon's API, as a caller's files
	// do; the in-process rows stay as diagnostics of where time goes.
	d, conv, done, err := b.warmDaemon(ctx, "files", "bench-files")
	if err != nil {
		return err
	}
	defer done()
	var buf bytes.Buffer
	tw := benchkit.Table(&buf)
	benchkit.Println(tw, "size\top\tpath\tok\tfail\tp50\tp90\tp99\t÷raw p50")
	var notes []string
	for _, sz := range []struct {
		label, tag string
		size, n    int
	}{{"4 KiB", "4k", 4 << 10, b.c.small}, {"16 MiB", "16m", 16 << 20, b.c.large}} {
		data := make([]byte, sz.size)
		_, _ = rand.Read(data)
		hpath := spec.OfficeRuntimePath + "/hb-hutch-" + sz.tag
		rname := "hb-raw-" + sz.tag
		tarball, err := tarOf(rname, data)
		if err != nil {
			return err
		}
		readRaw := func(into io.Writer) error {
			res, err := b.raw.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: spec.OfficeRuntimePath + "/" + rname})
			if err != nil {
				return err
			}
			defer func() { _ = res.Content.Close() }()
			tr := tar.NewReader(res.Content)
			if _, err := tr.Next(); err != nil {
				return err
			}
			cw := &countWriter{}
			//nolint:gosec // G110: the archive holds the one file this bench wrote, of a size it chose
			if _, err := io.Copy(io.MultiWriter(cw, into), tr); err != nil {
				return err
			}
			if cw.n != int64(sz.size) {
				return fmt.Errorf("read %d bytes, want %d", cw.n, sz.size)
			}
			return nil
		}
		readHutch := func(c func() (fileClient, error), into io.Writer) error {
			cl, err := c()
			if err != nil {
				return err
			}
			cw := &countWriter{}
			if err := cl.ReadFile(ctx, hpath, io.MultiWriter(cw, into)); err != nil {
				return err
			}
			if cw.n != int64(sz.size) {
				return fmt.Errorf("read %d bytes, want %d", cw.n, sz.size)
			}
			return nil
		}
		viaRuntime := func() (fileClient, error) { return b.rt.Agent(ctx, spec) }
		direct := func() (fileClient, error) { return cl, nil }
		apath := "hb-api-" + sz.tag // in the office, as the API allows
		readAPI := func(into io.Writer) error {
			cw := &countWriter{}
			if err := d.cl.ReadFile(ctx, conv, apath, io.MultiWriter(cw, into)); err != nil {
				return err
			}
			if cw.n != int64(sz.size) {
				return fmt.Errorf("read %d bytes, want %d", cw.n, sz.size)
			}
			return nil
		}
		ops := []*benchkit.Series{
			{Name: "hutch API: POST /v1/files/write", Run: func() error {
				wa, err := d.cl.WriteFile(ctx, conv, apath, bytes.NewReader(data), 0o644)
				if err == nil && wa.Bytes != int64(sz.size) {
					err = fmt.Errorf("wrote %d bytes, want %d", wa.Bytes, sz.size)
				}
				return err
			}},
			{Name: "diag: image.Runtime.Agent + WriteFile, in-process", Run: func() error {
				c, err := viaRuntime()
				if err != nil {
					return err
				}
				return c.WriteFile(ctx, hpath, bytes.NewReader(data), 0o644)
			}},
			{Name: "diag: agent.Client.WriteFile alone", Run: func() error {
				return cl.WriteFile(ctx, hpath, bytes.NewReader(data), 0o644)
			}},
			{Name: "raw API: CopyToContainer (tar)", Run: func() error {
				_, err := b.raw.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: spec.OfficeRuntimePath, Content: bytes.NewReader(tarball)})
				return err
			}},
			{Name: "hutch API: POST /v1/files/read", Run: func() error { return readAPI(io.Discard) }},
			{Name: "diag: image.Runtime.Agent + ReadFile, in-process", Run: func() error { return readHutch(viaRuntime, io.Discard) }},
			{Name: "diag: agent.Client.ReadFile alone", Run: func() error { return readHutch(direct, io.Discard) }},
			{Name: "raw API: CopyFromContainer (tar)", Run: func() error { return readRaw(io.Discard) }},
		}
		if err := warmUp(ctx, min(3, sz.n), "files "+sz.label, ops); err != nil {
			return err
		}
		// Both ways hold the bytes written.
		want := sha256.Sum256(data)
		for _, read := range []func(io.Writer) error{readAPI, func(w io.Writer) error { return readHutch(direct, w) }, readRaw} {
			h := sha256.New()
			if err := read(h); err != nil {
				return err
			}
			if !bytes.Equal(h.Sum(nil), want[:]) {
				return fmt.Errorf("%s: content read back differs from what was written", sz.label)
			}
		}
		if err := interleave(ctx, sz.n, "files "+sz.label, ops); err != nil {
			return err
		}
		for i, s := range ops {
			base := ops[3]
			opName := "write"
			if i >= 4 {
				base, opName = ops[7], "read"
			}
			benchkit.Printf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%.3f\n", sz.label, opName, s.Name, len(s.Times), s.Fail,
				benchkit.Ms(s.P50()), benchkit.Ms(s.Pct(90)), benchkit.Ms(s.Pct(99)), benchkit.Ratio(s.P50(), base.P50()))
		}
		b.reportFailures(ops)
		limit := 0.5
		if sz.tag == "4k" {
			limit = 0.2
		}
		write, read := benchkit.Ratio(ops[0].P50(), ops[3].P50()), benchkit.Ratio(ops[4].P50(), ops[7].P50())
		b.addTarget("files "+sz.label+" write: hutch API p50 / CopyToContainer p50", write, limit)
		b.addTarget("files "+sz.label+" read: hutch API p50 / CopyFromContainer p50", read, limit)
		notes = append(notes, fmt.Sprintf("%s: hutch API/raw API write = %.3f, read = %.3f (target ≤ %.1f)", sz.label, write, read, limit))
	}
	_ = tw.Flush()
	benchkit.Printf(b.out, "\n3. Files, interleaved round-robin per size, in the offices of warm containers (bind mounts of host directories): the API rows in a daemon's (this process, image mode), the others in the bench's; each ratio is to the raw API row of its direction\n")
	_, _ = b.out.Write(buf.Bytes())
	for _, n := range notes {
		benchkit.Println(b.out, n)
	}
	return nil
}

// fileClient is the agent client's file half.
type fileClient interface {
	ReadFile(ctx context.Context, path string, w io.Writer) error
	WriteFile(ctx context.Context, path string, r io.Reader, mode os.FileMode) error
}

func tarOf(name string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Now(), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ---- 4. concurrency ----

func (b *bench) concurrency(ctx context.Context) error {
	specs := make([]sandbox.Spec, b.c.convs)
	for i := range specs {
		var err error
		if specs[i], err = b.office(fmt.Sprintf("bench-conc-%d", i)); err != nil {
			return err
		}
	}
	defer b.removeAll(b.rt, specs, "concurrency")
	var (
		mu              sync.Mutex
		cold, warm, all = &benchkit.Series{Name: "first command (container created)"}, &benchkit.Series{Name: "later commands (warm)"}, &benchkit.Series{Name: "all commands"}
		done            int
		total           = b.c.convs * b.c.cmds
		wg              sync.WaitGroup
		start           = make(chan struct{})
		stopProgress    = make(chan struct{})
		progressStopped = make(chan struct{})
	)
	for c := range specs {
		wg.Go(func() {
			<-start
			for j := 0; j < b.c.cmds; j++ {
				var out bytes.Buffer
				t0 := time.Now()
				err := hutchRun(ctx, b.rt, specs[c], "echo $i", map[string]string{"i": strconv.Itoa(j)}, &out)
				d := time.Since(t0)
				if err == nil && out.String() != strconv.Itoa(j)+"\n" {
					err = fmt.Errorf("conversation %d command %d printed %q", c, j, out.String())
				}
				mu.Lock()
				if j == 0 {
					cold.Record(d, err)
				} else {
					warm.Record(d, err)
				}
				all.Record(d, err)
				done++
				mu.Unlock()
			}
		})
	}
	go func() {
		defer close(progressStopped)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				mu.Lock()
				progress("concurrency: %d/%d commands, %d failed", done, total, all.Fail)
				mu.Unlock()
			}
		}
	}()
	t0 := time.Now()
	close(start)
	wg.Wait()
	wall := time.Since(t0)
	close(stopProgress)
	<-progressStopped
	if err := ctx.Err(); err != nil {
		return err
	}
	benchkit.Printf(b.out, "\n4. Concurrency: %d conversations at once × %d commands (`echo $i`, i per command in env), one image.Runtime, containers created on demand\n", b.c.convs, b.c.cmds)
	tw := benchkit.Table(b.out)
	benchkit.Println(tw, "commands\tok\tfail\tp50\tp90\tp99\tmax")
	for _, s := range []*benchkit.Series{cold, warm, all} {
		benchkit.Printf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", s.Name, len(s.Times), s.Fail, benchkit.Ms(s.P50()), benchkit.Ms(s.Pct(90)), benchkit.Ms(s.Pct(99)), benchkit.Ms(s.Pct(100)))
	}
	_ = tw.Flush()
	benchkit.Printf(b.out, "failures %d of %d (target 0) · wall time %s · %.1f commands/s\n", all.Fail, total, benchkit.Ms(wall), float64(total)/wall.Seconds())
	b.reportFailures([]*benchkit.Series{all})
	b.targets = append(b.targets, target{what: "concurrency: failed commands", value: float64(all.Fail), limit: 0, less: false})
	return nil
}

// removeAll removes the runtimes of specs, a few at once.
func (b *bench) removeAll(rt *image.Runtime, specs []sandbox.Spec, label string) {
	ctx := context.Background()
	var mu sync.Mutex
	done := 0
	progress("%s: removing %d runtimes", label, len(specs))
	parallel(len(specs), b.c.parallel, func(i int) {
		if err := rt.Remove(ctx, specs[i].OfficeKey); err != nil && !strings.Contains(err.Error(), "No runtime") {
			progress("remove %s: %v", specs[i].OfficeKey, err)
		}
		mu.Lock()
		done++
		if done%20 == 0 {
			progress("%s: removed %d/%d", label, done, len(specs))
		}
		mu.Unlock()
	})
}

// ---- 5. memory ----

type selfMem struct {
	rss, rssAnon int64 // bytes
	heap         uint64
	goroutines   int
}

func measureSelf() selfMem {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	st, _ := os.ReadFile("/proc/self/status")
	kv := statusKB(string(st))
	return selfMem{rss: kv["VmRSS"] << 10, rssAnon: kv["RssAnon"] << 10, heap: m.HeapAlloc, goroutines: runtime.NumGoroutine()}
}

// statusKB parses the "kB" lines of a /proc/<pid>/status.
func statusKB(s string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				out[k] = n
			}
		}
	}
	return out
}

func (b *bench) memory(ctx context.Context) error {
	// A runtime of its own, so the sessions of earlier phases do not count.
	rt, err := b.newRuntime()
	if err != nil {
		return err
	}
	specs := make([]sandbox.Spec, b.c.idle)
	for i := range specs {
		if specs[i], err = b.office(fmt.Sprintf("bench-idle-%d", i)); err != nil {
			return err
		}
	}
	removed := false
	defer func() {
		if !removed {
			b.removeAll(rt, specs, "memory")
		}
	}()
	sysBefore := systemUsed()
	before := measureSelf()
	var (
		mu       sync.Mutex
		done     int
		firstErr error
	)
	progress("memory: creating %d idle managed containers, %d at once", len(specs), b.c.parallel)
	parallel(len(specs), b.c.parallel, func(i int) {
		if ctx.Err() != nil {
			return
		}
		err := hutchRun(ctx, rt, specs[i], "true", nil, nil)
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("conversation %d: %w", i, err)
		}
		done++
		if done%10 == 0 {
			progress("memory: %d/%d containers up", done, len(specs))
		}
	})
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let the agents settle into idle
	sysAfter := systemUsed()
	after := measureSelf()

	var vmRSS, anon, file []int64
	for _, spec := range specs {
		var out bytes.Buffer
		if err := hutchRun(ctx, rt, spec, "cat /proc/1/status", nil, &out); err != nil {
			return err
		}
		kv := statusKB(out.String())
		vmRSS, anon, file = append(vmRSS, kv["VmRSS"]), append(anon, kv["RssAnon"]), append(file, kv["RssFile"])
	}
	med := func(v []int64) int64 { v = slices.Clone(v); slices.Sort(v); return v[(len(v)-1)/2] }
	mx := func(v []int64) int64 { return slices.Max(v) }
	n := int64(len(specs))
	mib := func(v int64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) }
	kib := func(v int64) string { return fmt.Sprintf("%.0f KiB", float64(v)/(1<<10)) }

	benchkit.Printf(b.out, "\n5. Memory with %d idle managed containers made through one image.Runtime (each ran `true`, then idle)\n", len(specs))
	tw := benchkit.Table(b.out)
	benchkit.Println(tw, "agent (pid 1 in each container, /proc/1/status via exec)\tp50\tmax")
	benchkit.Printf(tw, "VmRSS\t%s\t%s\n", kib(med(vmRSS)<<10), kib(mx(vmRSS)<<10))
	benchkit.Printf(tw, "RssAnon (private to the container)\t%s\t%s\n", kib(med(anon)<<10), kib(mx(anon)<<10))
	benchkit.Printf(tw, "RssFile (the shared, bind-mounted binary)\t%s\t%s\n", kib(med(file)<<10), kib(mx(file)<<10))
	_ = tw.Flush()
	tw = benchkit.Table(b.out)
	benchkit.Println(tw, "this process (hutch in-process)\tbefore\tafter\tper container")
	benchkit.Printf(tw, "VmRSS\t%s\t%s\t%s\n", mib(before.rss), mib(after.rss), kib((after.rss-before.rss)/n))
	benchkit.Printf(tw, "RssAnon\t%s\t%s\t%s\n", mib(before.rssAnon), mib(after.rssAnon), kib((after.rssAnon-before.rssAnon)/n))
	benchkit.Printf(tw, "Go heap in use (after GC)\t%s\t%s\t%s\n", mib(int64(before.heap)), mib(int64(after.heap)), kib((int64(after.heap)-int64(before.heap))/n))
	benchkit.Printf(tw, "goroutines\t%d\t%d\t%.1f\n", before.goroutines, after.goroutines, float64(after.goroutines-before.goroutines)/float64(n))
	_ = tw.Flush()

	// The same runtimes paused, as an idle stop could leave them before
	// stopping them: does a freezer save memory?
	progress("memory: pausing the %d containers", len(specs))
	for _, spec := range specs {
		if _, err := b.raw.ContainerPause(ctx, image.ContainerName(spec.OfficeKey), client.ContainerPauseOptions{}); err != nil {
			return err
		}
	}
	time.Sleep(2 * time.Second)
	sysPaused := systemUsed()

	// System-wide: what a runtime costs the machine (agent, shim, cgroup,
	// network, kernel), against plain containers of the same image made
	// the same way, one after the other.
	perHutch := sysAfter - sysBefore
	b.removeAll(rt, specs, "memory")
	removed = true
	perPlain, err := b.plainMemory(ctx, len(specs), false)
	if err != nil {
		return err
	}
	perNet, err := b.plainMemory(ctx, len(specs), true)
	if err != nil {
		return err
	}
	tw = benchkit.Table(b.out)
	benchkit.Printf(tw, "system-wide (MemTotal - MemAvailable), %d idle containers\tper container\t÷plain\n", n)
	benchkit.Printf(tw, "hutch runtime (agent as pid 1, network of its own)\t%s\t%.2f\n", kib(perHutch/n), float64(perHutch)/float64(perPlain))
	benchkit.Printf(tw, "the same hutch runtimes, paused\t%s\t%.2f\n", kib((sysPaused-sysBefore)/n), float64(sysPaused-sysBefore)/float64(perPlain))
	benchkit.Printf(tw, "plain container (sleep as pid 1, default bridge)\t%s\t1.00\n", kib(perPlain/n))
	benchkit.Printf(tw, "plain container on a bridge network of its own\t%s\t%.2f\n", kib(perNet/n), float64(perNet)/float64(perPlain))
	_ = tw.Flush()
	benchkit.Printf(b.out, "the agent's file pages (RssFile) are the one bind-mounted binary, shared by every runtime; what each runtime's agent holds alone is its RssAnon\n")
	b.addTarget("memory: agent memory private to each runtime (RssAnon p50), MiB", float64(med(anon))/1024, 4)
	return nil
}

// plainMemory makes n idle plain containers of the bench's image (each
// ran `true`, as hutch's did), optionally each on a network of its own,
// and returns how much more memory the system uses with them, in bytes.
func (b *bench) plainMemory(ctx context.Context, n int, ownNet bool) (int64, error) {
	var cleanups []func()
	defer func() {
		progress("memory: removing %d plain containers", n)
		parallel(len(cleanups), b.c.parallel, func(i int) { cleanups[i]() })
	}()
	before := systemUsed()
	var (
		mu       sync.Mutex
		firstErr error
	)
	progress("memory: creating %d plain containers (own network: %v)", n, ownNet)
	parallel(n, b.c.parallel, func(i int) {
		var mine []func()
		err := b.coldRaw(ctx, 1000+i, ownNet, &mine)
		mu.Lock()
		defer mu.Unlock()
		cleanups = append(cleanups, mine...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	})
	if firstErr != nil {
		return 0, firstErr
	}
	time.Sleep(2 * time.Second) // as for hutch's: settle into idle
	return systemUsed() - before, nil
}

// systemUsed is the memory the system uses, in bytes: MemTotal less
// MemAvailable, which counts page cache that can be dropped as free.
func systemUsed() int64 {
	data, _ := os.ReadFile("/proc/meminfo")
	kv := statusKB(string(data))
	return (kv["MemTotal"] - kv["MemAvailable"]) << 10
}

// ---- 6. API overhead ----

// apiDaemon is a daemon (daemon.Run in this process, image mode) on a
// state dir of its own, and a client of its unix socket.
type apiDaemon struct {
	cl   *hclient.Client
	svc  *service.Service
	mode sandbox.Mode
	stop func() // stops the daemon and waits for it
}

// startDaemon starts a daemon on the state dir and workspace named name
// under the run's temp dir. prepare, when set, runs on the fresh state
// dir before the daemon starts.
func (b *bench) startDaemon(ctx context.Context, name string, prepare func(state string) error) (*apiDaemon, error) {
	state := filepath.Join(b.tmp, name+"-state")
	b.daemonStates = append(b.daemonStates, state)
	runDir, err := os.MkdirTemp("", "hd-")
	if err != nil {
		return nil, err
	}
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: state, Workspace: filepath.Join(b.tmp, name+"-ws"),
		Getenv: func(k string) string {
			if k == "HUTCH_RUN_DIR" {
				return runDir
			}
			return ""
		}})
	if err == nil {
		err = os.MkdirAll(state, 0o700)
	}
	if err == nil {
		// The API phases time commands, not a pool filling beside them:
		// their daemons keep none (phase 2 measures the pool).
		err = settings.SetRuntime(settings.GlobalPath(state), "sandbox.pool", "0")
	}
	if err == nil && prepare != nil {
		err = prepare(state)
	}
	if err != nil {
		_ = os.RemoveAll(runDir)
		return nil, err
	}
	svc := service.New(layout, b.log)
	svc.SetAgentBinary(b.agent.Path)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: b.c.image}
	dctx, stop := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(dctx, daemon.Options{Service: svc, Mode: mode, Grace: 10 * time.Second, Log: b.log,
			Ready: func(sock string) { ready <- sock }})
	}()
	var sock string
	select {
	case sock = <-ready:
	case err := <-done:
		stop()
		_ = os.RemoveAll(runDir)
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return &apiDaemon{cl: &hclient.Client{Socket: sock}, svc: svc, mode: mode, stop: func() {
		stop()
		if err := <-done; err != nil {
			progress("%s: daemon: %v", name, err)
		}
		_ = os.RemoveAll(runDir)
	}}, nil
}

// warmDaemon starts a daemon (startDaemon) and runs a first command of
// the web conversation id through it, so its runtime is warm. done
// removes that runtime and stops the daemon.
func (b *bench) warmDaemon(ctx context.Context, name, id string) (*apiDaemon, api.Conversation, func(), error) {
	d, err := b.startDaemon(ctx, name, nil)
	if err != nil {
		return nil, api.Conversation{}, nil, err
	}
	conv := api.Conversation{Platform: "web", ConversationID: id}
	done := func() {
		d.remove(conv)
		d.stop()
	}
	if err := d.execTrue(ctx, conv); err != nil {
		done()
		return nil, api.Conversation{}, nil, fmt.Errorf("first command through the daemon: %w", err)
	}
	return d, conv, done, nil
}

// execTrue runs `true` in conv through d's API.
func (d *apiDaemon) execTrue(ctx context.Context, conv api.Conversation) error {
	res, err := d.cl.Exec(ctx, api.ExecRequest{Conversation: conv, Command: "true"}, nil, nil, nil)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d %s", res.ExitCode, res.Message)
	}
	return err
}

// remove removes conv's runtime; the phases defer it.
func (d *apiDaemon) remove(conv api.Conversation) {
	if err := d.cl.Call(context.Background(), "/v1/sandbox/remove", api.LimitsRequest{Conversation: conv}, nil); err != nil {
		progress("remove %s: %v", conv.ConversationID, err)
	}
}

// apiOverhead starts a daemon in this process (image mode on the bench's
// image and agent, a state dir of its own so its reconcile leaves the
// other phases' containers alone) and measures warm exec of `true` through
// its API against image.Runtime.Exec in-process, interleaved.
func (b *bench) apiOverhead(ctx context.Context) error {
	d, conv, done, err := b.warmDaemon(ctx, "api", "bench-api")
	if err != nil {
		return err
	}
	defer done()
	svc, mode := d.svc, d.mode
	addr, err := office.NewAddress(conv.Platform, conv.ConversationID)
	if err != nil {
		return err
	}
	apiRun := func() error { return d.execTrue(ctx, conv) }
	spec, err := b.office("bench-api-inproc")
	if err != nil {
		return err
	}
	if err := hutchRun(ctx, b.rt, spec, "true", nil, nil); err != nil {
		return fmt.Errorf("first command in-process: %w", err)
	}
	ops := []*benchkit.Series{
		{Name: "hutch API: client.Exec over the unix socket (sh -c true)", Run: apiRun},
		{Name: "in-process: image.Runtime.Exec (sh -c true)",
			Run: func() error { return hutchRun(ctx, b.rt, spec, "true", nil, nil) }},
		{Name: "diag: service.Exec on the daemon's service, no HTTP",
			Run: func() error {
				res, err := svc.Exec(ctx, service.ExecOptions{Address: addr, Mode: mode, Argv: []string{"true"}, OutputLimit: 1 << 20,
					Stdout: io.Discard, Stderr: io.Discard})
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("exit %d", res.ExitCode)
				}
				return err
			}},
	}
	if err := warmUp(ctx, 5, "API overhead", ops); err != nil {
		return err
	}
	if err := interleave(ctx, b.c.api, "API overhead", ops); err != nil {
		return err
	}
	base := ops[1]
	benchkit.Printf(b.out, "\n6. API overhead: warm exec, %d runs per path, interleaved round-robin, daemon in this process (image mode)\n", b.c.api)
	tw := benchkit.Table(b.out)
	benchkit.Println(tw, "path\tok\tfail\tp50\tp90\tp99\t÷in-process p50\t÷in-process p90")
	for _, s := range ops {
		benchkit.Printf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%.3f\t%.3f\n", s.Name, len(s.Times), s.Fail, benchkit.Ms(s.P50()), benchkit.Ms(s.Pct(90)), benchkit.Ms(s.Pct(99)),
			benchkit.Ratio(s.P50(), base.P50()), benchkit.Ratio(s.Pct(90), base.Pct(90)))
	}
	_ = tw.Flush()
	benchkit.Printf(b.out, "API/in-process = %.3f p50, %.3f p90 (target ≤ 1.3) · API − in-process p50 = %s\n",
		benchkit.Ratio(ops[0].P50(), base.P50()), benchkit.Ratio(ops[0].Pct(90), base.Pct(90)), benchkit.Ms(ops[0].P50()-base.P50()))
	b.reportFailures(ops)
	b.addTarget("API overhead: API p50 / in-process p50", benchkit.Ratio(ops[0].P50(), base.P50()), 1.3)
	return nil
}

// ---- 7. offices at scale ----

// scale measures what the number of registered offices costs: warm exec
// through the API of a daemon whose registry holds one office against
// one whose registry holds -offices, interleaved, and the listing of
// every office (GET /v1/offices) of each.
func (b *bench) scale(ctx context.Context) error {
	one, err := b.startDaemon(ctx, "scale-1", nil)
	if err != nil {
		return err
	}
	defer one.stop()
	many, err := b.startDaemon(ctx, "scale-n", func(state string) error {
		// Recorded as the daemon records them, in one write.
		at := time.Now().UTC().Truncate(time.Second)
		return office.NewRegistry(state).Update(func(f *office.File) error {
			for i := range b.c.offices - 1 {
				f.AddOffice(office.Address{Platform: "web", ConversationID: fmt.Sprintf("bench-scale-%06d", i)}, at)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	defer many.stop()
	// A conversation of each (two installations on one engine may not
	// serve the same one), ids of the same length.
	conv1 := api.Conversation{Platform: "web", ConversationID: "bench-scale-1"}
	convN := api.Conversation{Platform: "web", ConversationID: "bench-scale-n"}
	for d, conv := range map[*apiDaemon]api.Conversation{one: conv1, many: convN} {
		defer d.remove(conv)
		if err := d.execTrue(ctx, conv); err != nil {
			return fmt.Errorf("first command: %w", err)
		}
	}
	// The timed listing reads the whole answer and counts its entries;
	// decoding 10,000 entries (even scanning them as JSON) is the
	// client's cost (15 to 20 ms here), not the daemon's, so that is done
	// once, untimed, to check.
	list := func(d *apiDaemon, want int) func() error {
		var buf bytes.Buffer
		return func() error {
			buf.Reset()
			if _, err := d.cl.GetTo(ctx, "/v1/offices", &buf); err != nil {
				return err
			}
			if n := bytes.Count(buf.Bytes(), []byte(`"officeKey":`)); n != want {
				return fmt.Errorf("%d offices listed; want %d", n, want)
			}
			return nil
		}
	}
	for d, want := range map[*apiDaemon]int{one: 1, many: b.c.offices} {
		var out []api.OfficeEntry
		if err := d.cl.Get(ctx, "/v1/offices", &out); err != nil {
			return err
		}
		if len(out) != want || out[0].OfficeKey == "" {
			return fmt.Errorf("%d offices listed; want %d, each with its key", len(out), want)
		}
	}
	ops := []*benchkit.Series{
		{Name: "hutch API exec (sh -c true), 1 office", Run: func() error { return one.execTrue(ctx, conv1) }},
		{Name: fmt.Sprintf("hutch API exec (sh -c true), %d offices", b.c.offices), Run: func() error { return many.execTrue(ctx, convN) }},
		{Name: "GET /v1/offices, 1 office", Run: list(one, 1)},
		{Name: fmt.Sprintf("GET /v1/offices, %d offices", b.c.offices), Run: list(many, b.c.offices)},
	}
	if err := warmUp(ctx, 5, "offices at scale", ops); err != nil {
		return err
	}
	if err := interleave(ctx, b.c.api, "offices at scale", ops); err != nil {
		return err
	}
	benchkit.Printf(b.out, "\n7. Offices at scale: two daemons (this process, image mode), one office registered vs %d; %d runs per path, interleaved round-robin\n", b.c.offices, b.c.api)
	tw := benchkit.Table(b.out)
	benchkit.Println(tw, "path\tok\tfail\tp50\tp90\tp99\t÷1-office p50")
	for i, s := range ops {
		base := ops[i&^1]
		benchkit.Printf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%.3f\n", s.Name, len(s.Times), s.Fail, benchkit.Ms(s.P50()), benchkit.Ms(s.Pct(90)), benchkit.Ms(s.Pct(99)),
			benchkit.Ratio(s.P50(), base.P50()))
	}
	_ = tw.Flush()
	b.reportFailures(ops)
	b.addTarget(fmt.Sprintf("warm exec p50, %d offices / 1 office", b.c.offices), benchkit.Ratio(ops[1].P50(), ops[0].P50()), 1.1)
	b.addTarget(fmt.Sprintf("GET /v1/offices p50 of %d offices, ms", b.c.offices), float64(ops[3].P50())/float64(time.Millisecond), 10)
	return nil
}

// ---- 8. CLI ----

// cli times warm commands of the hutch CLI against the docker CLI, each a
// process of its own: the no-daemon path on an installation of its own,
// the daemon path on a daemon in this process (the CLI finds its socket
// in the state dir).
func (b *bench) cli(ctx context.Context) error {
	if b.docker == "" {
		return fmt.Errorf("the docker CLI is not installed: the CLI rows compare with it")
	}
	d, conv, done, err := b.warmDaemon(ctx, "cli-daemon", "bench-cli-daemon")
	if err != nil {
		return err
	}
	defer done()
	alone := filepath.Join(b.tmp, "cli-state")
	b.daemonStates = append(b.daemonStates, alone)
	runDir, err := os.MkdirTemp("", "hc-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(runDir) }()
	hutch := func(state string, args ...string) func() error {
		return func() error {
			cmd := exec.CommandContext(ctx, b.agent.Path, args...)
			cmd.Env = append(os.Environ(), "HUTCH_STATE_DIR="+state, "HUTCH_RUN_DIR="+runDir)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("hutch %s: %v: %s", strings.Join(args, " "), err, out)
			}
			return nil
		}
	}
	noDaemon := hutch(alone, "exec", "--sandbox", "image:"+b.c.image, "--conversation", "web/bench-cli", "true")
	if err := noDaemon(); err != nil {
		return fmt.Errorf("first command without a daemon: %w", err)
	}
	defer func() {
		if err := hutch(alone, "sandbox", "rm", "web/bench-cli", "--sandbox", "image:"+b.c.image)(); err != nil {
			progress("cli: %v", err)
		}
	}()
	daemonState := filepath.Dir(d.cl.Socket)
	addr, err := office.NewAddress("web", "bench-cli")
	if err != nil {
		return err
	}
	id, err := b.containerID(ctx, string(addr.Key()))
	if err != nil {
		return err
	}
	ops := []*benchkit.Series{
		{Name: "docker exec CLI (true)", Run: b.dockerExecTrue(ctx, id)},
		{Name: "hutch exec CLI, no daemon (sh -c true)", Run: noDaemon},
		{Name: "hutch exec CLI, through a daemon (sh -c true)", Run: hutch(daemonState, "exec", "--conversation", conv.Platform+"/"+conv.ConversationID, "true")},
		{Name: "diag: hutch --version (process start alone)", Run: hutch(alone, "--version")},
	}
	if err := warmUp(ctx, 5, "CLI", ops); err != nil {
		return err
	}
	if err := interleave(ctx, b.c.warm, "CLI", ops); err != nil {
		return err
	}
	benchkit.Printf(b.out, "\n8. CLI: a new process per command, %d runs per path, interleaved round-robin, each in a warm container of its own\n", b.c.warm)
	tw := benchkit.Table(b.out)
	benchkit.Println(tw, "path\tok\tfail\tp50\tp90\tp99\t÷docker exec p50")
	for _, s := range ops {
		benchkit.Printf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%.3f\n", s.Name, len(s.Times), s.Fail, benchkit.Ms(s.P50()), benchkit.Ms(s.Pct(90)), benchkit.Ms(s.Pct(99)),
			benchkit.Ratio(s.P50(), ops[0].P50()))
	}
	_ = tw.Flush()
	b.reportFailures(ops)
	b.addTarget("hutch exec CLI without a daemon p50 / docker exec p50", benchkit.Ratio(ops[1].P50(), ops[0].P50()), 0.4)
	b.addTarget("hutch exec CLI through a daemon p50 / docker exec p50", benchkit.Ratio(ops[2].P50(), ops[0].P50()), 0.25)
	return nil
}

// ---- summary ----

func (b *bench) summary() {
	if len(b.targets) == 0 {
		return
	}
	benchkit.Printf(b.out, "\nTargets\n")
	tw := benchkit.Table(b.out)
	for _, t := range b.targets {
		ok := t.value <= t.limit
		op := "≤"
		if !t.less {
			ok, op = t.value == t.limit, "="
		}
		verdict := "MISS"
		if ok {
			verdict = "ok"
		}
		benchkit.Printf(tw, "%s\t%.3g\t%s %g\t%s\n", t.what, t.value, op, t.limit, verdict)
	}
	_ = tw.Flush()
}
