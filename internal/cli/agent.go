package cli

import (
	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/microvm/guest"
)

// newAgentCmd is `hutch agent`, the side of hutch that runs inside a
// sandbox. It is hidden: the daemon starts it, people do not.
func newAgentCmd(g *globals) *cobra.Command {
	var (
		opts                  agent.Options
		asGuest               bool
		installTo, wantSHA256 string
	)
	cmd := &cobra.Command{
		Use:    "agent (--listen <socket> | --stdio | --guest) [--init] [--key-file <file>] [--egress <addr>] [--egress-ca <file> [--egress-ca-pem <base64>]] | --install-to <path> [--sha256 <hex>]",
		Short:  "Serve commands and file operations inside a sandbox (started by hutch)",
		Hidden: true,
		Args:   cobra.NoArgs,
		Long: `Serve the daemon's commands and file operations from inside a sandbox, over
HTTP/2 on one connection: a unix socket (--listen) or this process's stdin
and stdout (--stdio, one connection, then exit). With --init the agent does
the duties of a container's pid 1: it reaps every orphan and, on SIGTERM or
SIGINT, kills every running command and exits 0. With --key-file the agent
answers the host's challenge on every connection with proof that it holds
the key in that file (a read-only mount): a host that requires the proof
refuses any other process that answers on the socket.

With --egress the agent listens on that loopback address (127.0.0.1:3128)
and relays every connection made to it through its channel to hutch's
egress proxy on the host, the only way out of a runtime without a network;
every command gets it as HTTP_PROXY, HTTPS_PROXY, http_proxy and
https_proxy unless its request sets them. With --egress-ca the agent writes
/etc/hutch-egress-ca-bundle.pem, the system's roots plus that CA
certificate (the proxy's, for TLS it intercepts), and every command gets
SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and GIT_SSL_CAINFO naming
the bundle and NODE_EXTRA_CA_CERTS naming the certificate. --egress-ca-pem
gives the certificate itself, base64-encoded, which the agent first writes
to the --egress-ca file, for runtimes that cannot mount one.

With --guest the agent is a microVM's init (pid 1, started by the kernel
from the initramfs): it mounts the root disk, switches to it, confines the
commands (a cgroup, a reduced capability bounding set) and serves the host
on the virtio port hutch.agent, one session after the other, until the
host powers the VM off. It logs to the console at info level by default.

With --install-to the agent only copies its own executable to that path
(mode 0555, its directory created when missing) and exits: the init
container of a kube: pod runs it from the agent image to deliver hutch into
the pod. With --sha256 the copy is refused, and nothing is written, unless
this executable has that SHA-256, so an agent image of another hutch fails
the pod with the fix instead of speaking another protocol.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("install-to") {
				if installTo == "" {
					return &exitError{code: 2, msg: "hutch agent --install-to needs the path to copy the binary to"}
				}
				if opts.Listen != "" || opts.Stdio || asGuest || opts.Init {
					return &exitError{code: 2, msg: "hutch agent --install-to only installs the binary: drop --listen, --stdio, --guest and --init"}
				}
				if egressFlags(opts) {
					return &exitError{code: 2, msg: "hutch agent --install-to only installs the binary: drop the --egress flags"}
				}
				if err := agentbin.InstallSelf(installTo, wantSHA256); err != nil {
					return &exitError{code: 1, msg: err.Error()}
				}
				return nil
			}
			if wantSHA256 != "" {
				return &exitError{code: 2, msg: "hutch agent --sha256 checks the binary that --install-to installs: add --install-to <path>"}
			}
			if asGuest {
				if opts.Listen != "" || opts.Stdio {
					return &exitError{code: 2, msg: "hutch agent --guest serves its virtio port alone: drop --listen and --stdio"}
				}
				if egressFlags(opts) {
					return &exitError{code: 2, msg: "hutch agent --guest takes its network and proxy from the host's guest setup: drop the --egress flags"}
				}
				if f := cmd.Flag("log-level"); f != nil && !f.Changed {
					g.logLevel = "info"
				}
			} else if (opts.Listen == "") == !opts.Stdio {
				return &exitError{code: 2, msg: "hutch agent needs exactly one of --listen <socket>, --stdio, --guest and --install-to <path>"}
			}
			log, err := g.logger()
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			if asGuest {
				// Run returns only when the VM failed to power off, saying why.
				err := guest.Run(cmd.Context(), guest.Options{Version: Version, Log: log})
				return &exitError{code: 1, msg: err.Error()}
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
	f.StringVar(&opts.KeyFile, "key-file", "", "prove to the host on every connection that this agent holds the channel key in this file")
	f.BoolVar(&opts.Init, "init", false, "act as pid 1: reap every orphan, kill every command on SIGTERM/SIGINT")
	f.BoolVar(&asGuest, "guest", false, "be a microVM's init and serve the host on the virtio port "+guest.PortName)
	f.StringVar(&opts.Egress, "egress", "", "relay connections to this loopback address (127.0.0.1:PORT) to the host's egress proxy; commands get it as their proxy")
	f.StringVar(&opts.EgressCA, "egress-ca", "", "trust this CA certificate (PEM, absolute path) too: commands get a bundle of it and the system's roots")
	f.StringVar(&opts.EgressCAPEM, "egress-ca-pem", "", "write this base64-encoded PEM certificate to the --egress-ca file first")
	f.StringVar(&installTo, "install-to", "", "copy this executable to this path (mode 0555) and exit")
	f.StringVar(&wantSHA256, "sha256", "", "with --install-to: refuse unless this executable has this SHA-256 (hex)")
	return cmd
}

// egressFlags reports whether any --egress flag is set.
func egressFlags(opts agent.Options) bool {
	return opts.Egress != "" || opts.EgressCA != "" || opts.EgressCAPEM != ""
}
