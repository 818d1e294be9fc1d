// Command bridge measures a warm command through a bridge against the
// same mode run locally, side by side in one run:
//
//	go run ./bench/bridge [-n 200]
//
// It builds hutch, starts `hutch bridge serve --sandbox host` on loopback
// as a process of its own (temporary state dir and workspace, a trusted
// door policy, which host mode needs), and then runs `true`, interleaved
// and n times each, through a cloudflare: runtime talking to that bridge
// (HTTP, token check, policy and registry on the bridge side, streamed
// answer) and through host mode in this process (host.New: fork and wait,
// nothing else). Two diagnostic rows split the difference: GET /health (the
// HTTP round trip and token check alone) and service.Exec in host mode in
// this process (what the bridge does per command, without HTTP). It prints
// p50, p90 and p99 of each and the ratio of the p50s. These machines are
// noisy, so the claim is the ratio of paths measured in the same run,
// never a bare time; nothing is asserted.
//
// The bridge process and the temp dirs are removed at the end and on
// Ctrl-C. Tables go to stdout, progress to stderr.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
	"github.com/hutchsandbox/hutch/internal/sandbox/host"
	"github.com/hutchsandbox/hutch/internal/service"
)

func main() {
	n := flag.Int("n", 200, "runs per path")
	flag.Parse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		progress("interrupted: cleaning up (interrupt again to quit at once)")
		cancel()
		<-sig
		os.Exit(130)
	}()
	if err := run(ctx, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench/bridge:", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench/bridge: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, n int) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "hutch-bench-bridge-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if tmp, err = filepath.EvalSymlinks(tmp); err != nil {
		return err
	}

	progress("building hutch (CGO_ENABLED=0 go build ./cmd/hutch)")
	bin := filepath.Join(tmp, "hutch")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/hutch")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("CGO_ENABLED=0 go build ./cmd/hutch: %v\n%s", err, out)
	}

	layout, err := service.ResolveLayout(service.LayoutOptions{
		StateDir: filepath.Join(tmp, "state"), Workspace: filepath.Join(tmp, "workspace"),
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		return err
	}
	svc := service.New(layout, nil)
	defer svc.Close()
	// Host mode runs only conversations trusted with the workspace.
	if err := svc.SetGlobalDoor(&projection.Setting{DoorPolicy: string(projection.DoorTrusted), Layout: string(projection.LayoutFull)}); err != nil {
		return err
	}

	token := randomHex(16)
	progress("starting hutch bridge serve --sandbox host on loopback")
	url, stop, err := startBridge(ctx, bin, layout, token)
	if stop != nil {
		defer stop()
	}
	if err != nil {
		return err
	}
	remote, err := cloudflare.New(cloudflare.Config{SandboxID: "bench", URL: url, Token: token})
	if err != nil {
		return err
	}
	h, err := remote.Health(ctx)
	if err != nil {
		return err
	}
	remoteSpec := sandbox.Spec{OfficeKey: "v1-web-bench-" + randomHex(8)}

	local := host.New(nil)
	officeDir := filepath.Join(tmp, "local-office")
	if err := os.Mkdir(officeDir, 0o700); err != nil {
		return err
	}
	localSpec := sandbox.Spec{OfficeKey: "local", OfficeDir: officeDir, OfficeRuntimePath: officeDir}
	addr, err := office.NewAddress("web", "bench-local")
	if err != nil {
		return err
	}

	true1 := sandbox.ExecRequest{Argv: []string{"true"}}
	check := func(res sandbox.ExecResult, err error) error {
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("true exited %d", res.ExitCode)
		}
		return nil
	}
	paths := []*series{
		{name: "cloudflare: → hutch bridge serve (host mode), loopback", run: func() error {
			return check(remote.Exec(ctx, remoteSpec, true1))
		}},
		{name: "host mode in process (host.New)", run: func() error {
			return check(local.Exec(ctx, localSpec, true1))
		}},
		{name: "diag: GET /health (HTTP round trip + token check)", run: func() error {
			_, err := remote.Health(ctx)
			return err
		}},
		{name: "diag: service.Exec host mode in process (policy, registry)", run: func() error {
			return check(svc.Exec(ctx, service.ExecOptions{Address: addr, Mode: sandbox.Mode{Kind: sandbox.KindHost}, Argv: []string{"true"}}))
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
	report(n, h, paths)
	return nil
}

var servingLine = regexp.MustCompile(`serving \S+ on (https?://\S+)`)

// startBridge starts the bridge process and returns its URL once it
// serves, and a function that stops it (SIGTERM, then SIGKILL).
func startBridge(ctx context.Context, bin string, layout service.Layout, token string) (string, func(), error) {
	cmd := exec.Command(bin, "--state-dir", layout.StateDir, "--workspace", layout.Workspace,
		"bridge", "serve", "--listen", "127.0.0.1:0", "--sandbox", "host", "--grace", "1s")
	cmd.Env = append(os.Environ(), "HUTCH_BRIDGE_TOKEN="+token)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case u := <-urls:
		return u, stop, nil
	case <-ctx.Done():
		return "", stop, ctx.Err()
	case <-time.After(time.Minute):
		return "", stop, errors.New("hutch bridge serve did not start serving within a minute")
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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

func report(n int, h cloudflare.Health, paths []*series) {
	hostname, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Printf("hutch bench/bridge · %s · nproc %d · Linux %s · %s · %s\n",
		hostname, runtime.NumCPU(), strings.TrimSpace(string(kernel)), runtime.Version(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Printf("command: go run ./bench/bridge %s\n", strings.Join(os.Args[1:], " "))
	fmt.Printf("bridge: %s %s, extensions %s\n", h.Bridge, h.Version, strings.Join(h.Extensions, " "))
	fmt.Printf("\nWarm `true`, %d runs per path, interleaved; percentiles nearest-rank\n", n)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tp50\tp90\tp99\t÷host p50")
	local := paths[1]
	for _, p := range paths {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\n", p.name, ms(p.pct(50)), ms(p.pct(90)), ms(p.pct(99)), ratio(p.pct(50), local.pct(50)))
	}
	tw.Flush()
	fmt.Printf("bridge p50 / local p50 = %.2f · p90 ratio %.2f\n", ratio(paths[0].pct(50), local.pct(50)), ratio(paths[0].pct(90), local.pct(90)))
}
