package cli

import (
	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/agent"
)

// newAgentCmd is `hutch agent`, the side of hutch that runs inside a
// sandbox. It is hidden: the daemon starts it, people do not.
func newAgentCmd(g *globals) *cobra.Command {
	var opts agent.Options
	cmd := &cobra.Command{
		Use:    "agent (--listen <socket> | --stdio) [--init]",
		Short:  "Serve commands and file operations inside a sandbox (started by hutch)",
		Hidden: true,
		Args:   cobra.NoArgs,
		Long: `Serve the daemon's commands and file operations from inside a sandbox, over
HTTP/2 on one connection: a unix socket (--listen) or this process's stdin
and stdout (--stdio, one connection, then exit). With --init the agent does
the duties of a container's pid 1: it reaps every orphan and, on SIGTERM or
SIGINT, kills every running command and exits 0.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (opts.Listen == "") == !opts.Stdio {
				return &exitError{code: 2, msg: "hutch agent needs exactly one of --listen <socket> and --stdio"}
			}
			log, err := g.logger()
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			opts.Log = log
			opts.Version = Version
			opts.Stdin, opts.Stdout = g.stdin, g.stdout
			if err := agent.Run(cmd.Context(), opts); err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Listen, "listen", "", "serve on this unix socket (mode 0600; a missing directory is created 0700)")
	f.BoolVar(&opts.Stdio, "stdio", false, "serve one connection made of stdin and stdout, then exit")
	f.BoolVar(&opts.Init, "init", false, "act as pid 1: reap every orphan, kill every command on SIGTERM/SIGINT")
	return cmd
}
