// Package cli is hutch's command line: cobra commands that turn flags into
// option structs and call the service. It is the only package that knows
// about cobra; it prints, the service decides.
package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// Version is hutch's version, set at build time with -ldflags.
var Version = "dev"

// exitError carries a process exit code out of a command. A message of ""
// means the command has already said what happened.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// globals are the flags every command shares.
type globals struct {
	stateDir  string
	workspace string
	logLevel  string
	logFormat string // text or json (hutch serve --log-format)

	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// Run executes hutch with args and returns the process exit code.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(args, stdin, stdout, stderr, nil)
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := newRoot(g)
	restoreArgs(root)
	args = keepNegativeArgs(root, args)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := unknownGroupWord(root, args)
	if err == nil {
		err = root.Execute()
	}
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		note(stderr, "hutch: %s\nRun '%s --help' for usage.\n", ue.msg, ue.command)
		return 2
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			note(stderr, "hutch: %s\n", ee.msg)
		}
		return ee.code
	}
	note(stderr, "hutch: %s\n", err)
	if strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "unknown flag") || strings.HasPrefix(err.Error(), "unknown shorthand flag") ||
		strings.HasPrefix(err.Error(), "accepts ") || strings.HasPrefix(err.Error(), "requires ") {
		note(stderr, "Run 'hutch --help' for usage.\n")
		return 2
	}
	return 1
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "hutch",
		Short: "Run AI agents' tools inside sandboxes",
		Long: `hutch runs every shell command and file operation of an AI agent inside a
sandbox that sees only what its conversation was given: the conversation's
own office (a directory under the workspace), the credentials of its vault,
and capped CPU, memory and processes.

Each conversation is addressed as <platform>/<conversation-id>, for example
slack/C0123ABC; platforms are slack, discord, telegram, github and web.

State (the office registry, settings, vaults) lives in --state-dir, default
$HUTCH_STATE_DIR or ~/.hutch. Offices live under --workspace, default
$HUTCH_WORKSPACE or <state-dir>/workspace. The state dir is never mounted
into a sandbox.`,
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// hutch completion is hutch's own (bash, zsh and fish; its help says
	// how to install each).
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&g.stateDir, "state-dir", "", "state directory (default $HUTCH_STATE_DIR or ~/.hutch)")
	pf.StringVar(&g.workspace, "workspace", "", "workspace root holding the offices (default $HUTCH_WORKSPACE or <state-dir>/workspace)")
	pf.StringVar(&g.logLevel, "log-level", "warn", "log detail on stderr: debug, info, warn or error")
	root.AddCommand(newOfficeCmd(g), newDoorCmd(g), newVaultCmd(g), newExecCmd(g), newFilesCmd(g), newModesCmd(g), newSandboxCmd(g), newServeCmd(g), newMCPCmd(g), newDoctorCmd(g), newImageCmd(g), newMicrovmCmd(g), newKubeCmd(g), newAdminCmd(g), newMigrateCmd(g), newProjectCmd(g), newBridgeCmd(g), newAgentCmd(g), newEventsCmd(g),
		newVersionCmd(g), newCompletionCmd(g))
	registerCompletions(g, root)
	return root
}

// env reads the process environment (or the test's).
func (g *globals) env(key string) string {
	if g.getenv != nil {
		return g.getenv(key)
	}
	return os.Getenv(key)
}

// sandboxMode is the mode a command runs in: the --sandbox flag, else
// $HUTCH_SANDBOX, else the default (host).
func (g *globals) sandboxMode(flag string) (sandbox.Mode, error) {
	if flag == "" {
		flag = g.env("HUTCH_SANDBOX")
	}
	if flag == "" {
		return sandbox.DefaultMode, nil
	}
	return sandbox.ParseMode(flag)
}

// service resolves the layout from the flags and returns a Service.
func (g *globals) service() (*service.Service, error) {
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: g.stateDir, Workspace: g.workspace, Getenv: g.getenv})
	if err != nil {
		return nil, err
	}
	svc := service.New(layout, log)
	svc.SetGetenv(g.getenv)
	svc.SetOperator(g.operator())
	return svc, nil
}

// operator is the user who runs this command, as the event log names
// them: the account's name, else $USER.
func (g *globals) operator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return g.getenv("USER")
}

func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch g.logFormat {
	case "", "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	}
	return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("--log-format %q: use text or json", g.logFormat))
}
