package cli

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// Exit codes of `hutch exec` when the command did not end on its own,
// chosen to match timeout(1), shells and docker run.
const (
	exitTimedOut    = 124
	exitHutchFailed = 125
	exitAborted     = 130
)

func newExecCmd(g *globals) *cobra.Command {
	var (
		modeFlag, conv, cwd, user, timeout, maxOutput string
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] --conversation <platform>/<conversation-id> -- <command> [args...]",
		Short: "Run a command in a conversation's sandbox",
		Long: `Run a command for a conversation, in the sandbox of --sandbox, and exit
with its exit code. A single argument is a shell string run with sh -c;
several are run as they are, without a shell.

Before anything runs, policy checks that the mode can enforce the
conversation's door policy and vault; if it cannot, hutch refuses and says
why instead of running with less protection. The conversation's office is
recorded in the registry and created (0700) on first use, and commands
start in it.

stdout and stderr stream as they come, kept apart. With --timeout the
whole command (background children included) is killed when it runs too
long; Ctrl-C or SIGTERM kills it the same way. When the command's main
process exits, whatever it left running in its process group is killed too.

Exit status: the command's own, or 124 when it timed out, 130 when it was
aborted, 125 when hutch itself could not run it (a refusal, bad input).

When a daemon (hutch serve) answers on this state dir, the command runs
through it, in the daemon's mode, unless --sandbox names another mode;
then it runs in this process, in that mode.

Host mode runs the command directly on this machine: it is for local
development, injects no vault env, and needs an explicit trusted door
policy (hutch door set <conversation> shared).

` + execGondolinHelp,
		Example: `  hutch door set slack/C0123ABC shared
  hutch exec --conversation slack/C0123ABC -- 'ls -la && pwd'
  hutch exec --conversation slack/C0123ABC --timeout 30s -- make test`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{code: exitHutchFailed, msg: "No command given; put it after --, e.g. hutch exec --conversation slack/C0123ABC -- ls -la"}
			}
			if conv == "" {
				return &exitError{code: exitHutchFailed, msg: "--conversation <platform>/<conversation-id> is required"}
			}
			explicit := modeFlag
			mode, err := g.sandboxMode(modeFlag)
			if err != nil {
				return &exitError{code: exitHutchFailed, msg: err.Error()}
			}
			o, err := execOptions(mode, conv, cwd, user, timeout, maxOutput)
			if err != nil {
				return &exitError{code: exitHutchFailed, msg: err.Error()}
			}
			o.Argv = args
			o.Stdin, o.Stdout, o.Stderr = g.stdin, g.stdout, g.stderr
			svc, err := g.service()
			if err != nil {
				return &exitError{code: exitHutchFailed, msg: err.Error()}
			}
			defer func() { _ = svc.Close() }()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			var res sandbox.ExecResult
			if c, ok := g.daemon(ctx, svc, explicit); ok {
				res, err = execViaDaemon(ctx, c, o, g)
			} else {
				if mode.Kind == sandbox.KindGondolin {
					note(g.stderr, "%s\n", microvmNoDaemonNote)
				}
				res, err = svc.Exec(ctx, o)
			}
			if err != nil {
				return &exitError{code: exitHutchFailed, msg: err.Error()}
			}
			if notice := res.TruncationNotice(o.OutputLimit); notice != "" {
				note(g.stderr, "%s\n", notice)
			}
			switch {
			case res.TimedOut:
				return &exitError{code: exitTimedOut, msg: res.Message()}
			case res.Aborted:
				return &exitError{code: exitAborted, msg: res.Message()}
			case res.Message() != "":
				note(g.stderr, "hutch: %s\n", res.Message())
			}
			if res.ExitCode != 0 {
				code := res.ExitCode
				if res.Signal != "" {
					// Shells report a command killed by signal N as 128+N.
					code = 128 + int(unix.SignalNum(res.Signal))
				}
				if code < 0 || code > 255 {
					code = exitHutchFailed
				}
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&modeFlag, "sandbox", "", "where the command runs: host, container:<name>, image:<image>, cloudflare:<id>, gondolin:default, kube:<image> (default: the daemon's mode when hutch serve answers on this state dir, else $HUTCH_SANDBOX, else host)")
	cmd.Flags().StringVar(&conv, "conversation", "", "the conversation, as <platform>/<conversation-id> (required)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory; relative paths start at the office (default: the office)")
	cmd.Flags().StringVar(&user, "user", "", "platform user whose vault host mode checks")
	cmd.Flags().StringVar(&timeout, "timeout", "", "kill the command after this long: 30s, 5m, 1h30m or plain seconds (default: no limit)")
	cmd.Flags().StringVar(&maxOutput, "max-output", "", "pass at most this much of each stream, e.g. 10MiB; the rest is dropped with a notice (default: no cap)")
	return cmd
}

func execOptions(mode sandbox.Mode, conv, cwd, user, timeout, maxOutput string) (service.ExecOptions, error) {
	addr, err := office.ParseAddress(conv)
	if err != nil {
		return service.ExecOptions{}, err
	}
	o := service.ExecOptions{Address: addr, Mode: mode, User: user, Dir: cwd}
	if timeout != "" {
		if o.Timeout, err = parseTimeout(timeout); err != nil {
			return service.ExecOptions{}, err
		}
	}
	if maxOutput != "" {
		if o.OutputLimit, err = parseSize(maxOutput); err != nil {
			return service.ExecOptions{}, err
		}
	}
	return o, nil
}

// parseTimeout accepts a Go duration ("90s", "1h30m") or plain seconds.
func parseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, nerr := strconv.ParseFloat(s, 64)
		if nerr != nil {
			return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("--timeout %q is not a duration; use 30s, 5m, 1h30m or plain seconds", s))
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d <= 0 {
		return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("--timeout %q must be positive", s))
	}
	return d, nil
}

// parseSize accepts a byte count with an optional unit: B, KiB, MiB, GiB
// (and K, M, G, KB, MB, GB as the same binary units).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 {
		return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("--max-output %q is not a size; use e.g. 65536, 512KiB or 10MiB", s))
	}
	return n * mult, nil
}
