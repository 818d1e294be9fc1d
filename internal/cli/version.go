package cli

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/daemon"
)

// versionTimeout bounds how long hutch version waits for a daemon.
const versionTimeout = 500 * time.Millisecond

func newVersionCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show hutch's version, commit and Go version, and the daemon's",
		Long: `Show what this hutch binary was built from: its version (set at build
time, "dev" otherwise), the module version ("(devel)" for a build in a
checkout), the commit and whether the checkout had uncommitted changes,
and the Go version. When a daemon answers on the state dir's socket (as
for every other command), its own build is shown too, from GET
/v1/version; when none answers, one line says so. Nothing is started or
created, and the exit status is 0 either way.

--json prints one object: {client, daemon}, each {version, module,
commit, commitTime, modified, goVersion}; daemon is absent when no daemon
answers.`,
		Example: "  hutch version\n  hutch version --json | jq -r .daemon.commit",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rep := api.VersionReport{Client: api.BuildVersion(Version)}
			sock, why := g.socketPath()
			if sock != "" {
				rep.Daemon = daemonVersion(cmd.Context(), &client.Client{Socket: sock})
			}
			if asJSON {
				return printJSON(g.stdout, rep)
			}
			out := &printer{w: g.stdout}
			out.println("Client:")
			printVersion(out, rep.Client)
			switch {
			case rep.Daemon != nil:
				out.printf("Daemon (%s):\n", sock)
				printVersion(out, *rep.Daemon)
			case sock == "":
				out.printf("Daemon:       none (%s)\n", why)
			default:
				out.printf("Daemon:       none answers on %s\n", sock)
			}
			return out.err
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

func printVersion(out *printer, v api.Version) {
	out.printf("  Version:    %s\n", v.Version)
	if v.Module != "" {
		out.printf("  Module:     %s\n", v.Module)
	}
	commit := v.Commit
	switch {
	case commit == "" && v.GoVersion == "":
		// A daemon older than /v1/version: its version alone is known.
		return
	case commit == "":
		commit = "unknown (the build recorded no commit)"
	case v.Modified:
		commit += " (with uncommitted changes)"
	}
	out.printf("  Commit:     %s\n", commit)
	if v.CommitTime != "" {
		out.printf("  Committed:  %s\n", v.CommitTime)
	}
	out.printf("  Go:         %s\n", v.GoVersion)
}

// socketPath is the daemon socket of the state dir the flags and the
// environment name; "" and why when that state dir does not exist or is
// refused (nothing is created, as doctor creates nothing).
func (g *globals) socketPath() (string, string) {
	dir, _, err := g.probeStateDir()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "no state dir at " + dir + " yet"
	case err != nil:
		return "", err.Error()
	}
	return daemon.SocketPath(dir), ""
}

// daemonVersion asks the daemon at c for its build; nil when none
// answers. A daemon that answers /v1/health but not /v1/version gives
// its version alone.
func daemonVersion(ctx context.Context, c *client.Client) *api.Version {
	if _, err := os.Stat(c.Socket); err != nil {
		return nil
	}
	vctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	v, err := c.Version(vctx)
	var ae *client.Error
	switch {
	case err == nil:
		return &v
	case !errors.As(err, &ae):
		return nil // no daemon answered
	}
	// An older daemon, without the route: its health says its version.
	h, ok := c.Answers(ctx, versionTimeout)
	if !ok {
		return nil
	}
	return &api.Version{Version: h.Version}
}
