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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/hutchsandbox/hutch/bench/benchkit"
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
	ctx, cancel := benchkit.Interruptible(progress, "interrupted: cleaning up (interrupt again to quit at once)")
	defer cancel()
	if err := run(ctx, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench/bridge:", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

var progress = benchkit.Progress("bench/bridge")

func run(ctx context.Context, n int) error {
	tmp, err := os.MkdirTemp("", "hutch-bench-bridge-")
	if err != nil {
		return err
	}
	defer func(dir string) { _ = os.RemoveAll(dir) }(tmp)
	if tmp, err = filepath.EvalSymlinks(tmp); err != nil {
		return err
	}

	progress("building hutch (CGO_ENABLED=0 go build ./cmd/hutch)")
	bin, err := benchkit.BuildHutch(ctx, tmp)
	if err != nil {
		return err
	}

	layout, err := service.ResolveLayout(service.LayoutOptions{
		StateDir: filepath.Join(tmp, "state"), Workspace: filepath.Join(tmp, "workspace"),
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		return err
	}
	svc := service.New(layout, nil)
	defer func() { _ = svc.Close() }()
	// Host mode runs only conversations trusted with the workspace.
	if err := svc.SetGlobalDoor(ctx, &projection.Setting{DoorPolicy: string(projection.DoorTrusted), Layout: string(projection.LayoutFull)}); err != nil {
		return err
	}

	token := benchkit.RandomHex(16)
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
	remoteSpec := sandbox.Spec{OfficeKey: "v1-web-bench-" + benchkit.RandomHex(8)}

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
	paths := []*benchkit.Series{
		{Name: "cloudflare: → hutch bridge serve (host mode), loopback", Run: func() error {
			return check(remote.Exec(ctx, remoteSpec, true1))
		}},
		{Name: "host mode in process (host.New)", Run: func() error {
			return check(local.Exec(ctx, localSpec, true1))
		}},
		{Name: "diag: GET /health (HTTP round trip + token check)", Run: func() error {
			_, err := remote.Health(ctx)
			return err
		}},
		{Name: "diag: service.Exec host mode in process (policy, registry)", Run: func() error {
			return check(svc.Exec(ctx, service.ExecOptions{Address: addr, Mode: sandbox.Mode{Kind: sandbox.KindHost}, Argv: []string{"true"}}))
		}},
	}
	progress("warm-up: 5 rounds")
	if err := benchkit.WarmUp(ctx, benchkit.Rounds{N: 5}, paths); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	progress("measuring: %d rounds", n)
	if err := benchkit.Interleave(ctx, benchkit.Rounds{N: n, Progress: progress}, paths); err != nil {
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

func report(n int, h cloudflare.Health, paths []*benchkit.Series) {
	benchkit.Header{Bench: "bench/bridge"}.Print(os.Stdout)
	fmt.Printf("bridge: %s %s, extensions %s\n", h.Bridge, h.Version, strings.Join(h.Extensions, " "))
	fmt.Printf("\nWarm `true`, %d runs per path, interleaved; percentiles nearest-rank\n", n)
	tw := benchkit.Table(os.Stdout)
	benchkit.Println(tw, "path\tp50\tp90\tp99\t÷host p50")
	local := paths[1]
	for _, p := range paths {
		benchkit.Printf(tw, "%s\t%s\t%s\t%s\t%.2f\n", p.Name, benchkit.Ms(p.P50()), benchkit.Ms(p.Pct(90)), benchkit.Ms(p.Pct(99)), benchkit.Ratio(p.P50(), local.P50()))
	}
	_ = tw.Flush()
	fmt.Printf("bridge p50 / local p50 = %.2f · p90 ratio %.2f\n", benchkit.Ratio(paths[0].P50(), local.P50()), benchkit.Ratio(paths[0].Pct(90), local.Pct(90)))
}
