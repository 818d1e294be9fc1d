package cli

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// vaultFlags name a host or container vault instead of a conversation's.
type vaultFlags struct {
	user, container string
}

func (f *vaultFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.user, "user", "", "the vault of a platform user (used by host mode) instead of a conversation's")
	cmd.Flags().StringVar(&f.container, "container", "", "the vault of an existing container (used by container:<name>) instead of a conversation's")
}

// target takes the vault target from the flags or from args[0], and
// returns the remaining arguments.
func (f *vaultFlags) target(args []string) (service.VaultTarget, []string, error) {
	if f.user != "" || f.container != "" {
		return service.VaultTarget{User: f.user, Container: f.container}, args, nil
	}
	if len(args) == 0 {
		return service.VaultTarget{}, nil, errdefs.New(errdefs.ErrInvalid, "Name a vault: <platform>/<conversation-id>, --user ID or --container NAME")
	}
	addr, err := office.ParseAddress(args[0])
	if err != nil {
		return service.VaultTarget{}, nil, err
	}
	return service.VaultTarget{Conversation: &addr}, args[1:], nil
}

const vaultLong = `A vault holds the credentials of one conversation (managed modes), one
platform user (host mode) or one existing container (container mode):
env variables, injected into each command and never stored in a runtime's
config, and files, projected read-only and owner-only into the runtime: an
entry named X lands at /root/X, so .ssh, .kube and .config land where tools
look. Vaults live in <state-dir>/vaults/<key>/ (0700, files 0600).
Values are never printed.`

func newVaultCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vault",
		Short: "Manage the credentials a conversation's commands receive",
		Long:  vaultLong,
	}
	cmd.AddCommand(newVaultSetCmd(g), newVaultPutFileCmd(g), newVaultPlaceholderCmd(g), newVaultLsCmd(g), newVaultRmCmd(g))
	return cmd
}

func newVaultSetCmd(g *globals) *cobra.Command {
	var f vaultFlags
	cmd := &cobra.Command{
		Use:   "set (<platform>/<conversation-id> | --user ID | --container NAME) NAME[=VALUE]...",
		Short: "Set env variables in a vault",
		Long: vaultLong + `

NAME=VALUE sets a variable. A bare NAME reads its value from one line of
standard input, which keeps the value out of the process list and the shell
history: printf '%s\n' "$TOKEN" | hutch vault set slack/C1 GH_TOKEN
Names match [A-Za-z_][A-Za-z0-9_]*; values are taken literally.`,
		Example: "  hutch vault set slack/C0123ABC GH_TOKEN\n  hutch vault set --user U042 OPENAI_API_KEY=sk-...",
		RunE: func(cmd *cobra.Command, args []string) error {
			t, rest, err := f.target(args)
			if err != nil {
				return err
			}
			if len(rest) == 0 {
				return errdefs.New(errdefs.ErrInvalid, "Give at least one NAME=VALUE (or a bare NAME to read its value from stdin)")
			}
			vars := map[string]string{}
			var in *bufio.Reader
			for _, a := range rest {
				name, value, hasValue := strings.Cut(a, "=")
				if err := vault.ValidateEnvName(name); err != nil {
					return err
				}
				if !hasValue {
					if in == nil {
						in = bufio.NewReader(g.stdin)
					}
					line, err := in.ReadString('\n')
					if err != nil && line == "" {
						return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("No value for %s on standard input", name))
					}
					value = strings.TrimRight(line, "\r\n")
				}
				vars[name] = value
			}
			key, err := t.VaultKey()
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			if err := svc.VaultSetEnv(cmd.Context(), key, vars); err != nil {
				return err
			}
			names := make([]string, 0, len(vars))
			for n := range vars {
				names = append(names, n)
			}
			slices.Sort(names)
			return printf(g.stdout, "Set %s in vault %s.\n", strings.Join(names, ", "), key)
		},
	}
	f.register(cmd)
	return cmd
}

func newVaultPutFileCmd(g *globals) *cobra.Command {
	var f vaultFlags
	cmd := &cobra.Command{
		Use:   "put-file (<platform>/<conversation-id> | --user ID | --container NAME) <name> <source>",
		Short: "Store a file or directory credential in a vault",
		Long: vaultLong + `

<source> is copied into the vault as the entry <name> (a file, or a
directory copied recursively; symlinks inside it are refused). The copy
replaces an entry of the same name. Only modes that project vault files
(image:, gondolin:) accept a vault that holds files; the others refuse to
run rather than run without the credential.`,
		Example: "  hutch vault put-file slack/C0123ABC .ssh ~/.ssh\n  hutch vault put-file slack/C0123ABC .kube ~/.kube",
		RunE: func(cmd *cobra.Command, args []string) error {
			t, rest, err := f.target(args)
			if err != nil {
				return err
			}
			if len(rest) != 2 {
				return errdefs.New(errdefs.ErrInvalid, "Give the entry name and the source path: hutch vault put-file <vault> <name> <source>")
			}
			key, err := t.VaultKey()
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			if err := svc.VaultPutFile(cmd.Context(), key, rest[0], rest[1]); err != nil {
				return err
			}
			return printf(g.stdout, "Stored %s in vault %s; runtimes see it at %s (read-only).\n", rest[0], key, vault.FileTarget(rest[0]))
		},
	}
	f.register(cmd)
	return cmd
}

func newVaultLsCmd(g *globals) *cobra.Command {
	var f vaultFlags
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:   "ls (<platform>/<conversation-id> | --user ID | --container NAME)",
		Short: "List a vault's entries (names and kinds, never values)",
		Long: vaultLong + `

--json prints what POST /v1/vault/list answers: an array of {name, kind}
(kind env, file or dir), with "placeholder": {hosts, body, expires,
expired} on a variable marked as one, never a value or a token. -q
prints the names, one a line.`,
		Example: "  hutch vault ls slack/C0123ABC\n  hutch vault ls --container hutch-sandbox\n  hutch vault ls slack/C0123ABC --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && quiet {
				return errdefs.New(errdefs.ErrInvalid, "Give --json or --quiet, not both")
			}
			t, rest, err := f.target(args)
			if err != nil {
				return err
			}
			if len(rest) != 0 {
				return errdefs.New(errdefs.ErrInvalid, "vault ls takes only the vault")
			}
			key, err := t.VaultKey()
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			entries, err := svc.Vaults().List(key)
			if err != nil {
				return err
			}
			marks, err := svc.Vaults().Placeholders(key)
			if err != nil {
				return err
			}
			switch {
			case asJSON:
				return printJSON(g.stdout, api.VaultEntries(entries, marks, time.Now()))
			case quiet:
				out := &printer{w: g.stdout}
				for _, e := range entries {
					out.println(e.Name)
				}
				return out.err
			}
			if len(entries) == 0 {
				return printf(g.stdout, "Vault %s is empty.\n", key)
			}
			out := &printer{w: g.stdout}
			out.printf("Vault %s:\n", key)
			for _, e := range entries {
				switch e.Kind {
				case vault.EntryEnv:
					if m, ok := marks[e.Name]; ok {
						out.printf("  env   %s  %s\n", e.Name, placeholderNote(m, time.Now()))
					} else {
						out.printf("  env   %s\n", e.Name)
					}
				default:
					out.printf("  %-5s %s -> %s\n", e.Kind, e.Name, vault.FileTarget(e.Name))
				}
			}
			return out.err
		},
	}
	f.register(cmd)
	jsonFlag(cmd, &asJSON)
	quietFlag(cmd, &quiet, "the entry names")
	return cmd
}

func newVaultPlaceholderCmd(g *globals) *cobra.Command {
	var f vaultFlags
	var expires string
	var body bool
	cmd := &cobra.Command{
		Use:   "placeholder (<platform>/<conversation-id> | --user ID | --container NAME) NAME (HOSTS [--expires WHEN] | off)",
		Short: "Show commands a placeholder instead of an env variable's value",
		Long: vaultLong + `

A placeholder keeps a secret out of the runtime. Commands see NAME set to
hutch-placeholder-<32 hex digits> instead of its value, and hutch's egress
proxy puts the real value in place of the placeholder in requests to HOSTS,
and nowhere else. Vault files holding the value (an .npmrc, a kubeconfig)
are projected as copies holding the placeholder; values shorter than 8
bytes are not looked for in files. The placeholder stays the same when the
value is set again or HOSTS change; removing the variable removes the mark.

HOSTS is comma-separated, e.g. api.github.com,*.githubusercontent.com; an
entry with a port (registry.example:8443) covers that port only, one
without covers 80 and 443. --expires ends the substitution after a
duration (720h) or at a time (2027-01-01, 2027-01-01T12:00:00Z); after it
commands still see the placeholder, never the value, and the proxy stops
replacing it. "off" turns the mark off: commands see the real value again.

What it protects: whatever runs in the runtime (a command, a dependency, an
agent following injected instructions) can read and leak only the
placeholder, which is worth nothing outside hutch's proxy.
What it does not: a host in HOSTS receives the real value and can send it
back (echoed in a response or an error page), where commands read it.
Only requests through hutch's egress proxy are substituted, in headers
(Basic credentials decoded), paths and queries, and with --body in request
bodies too. In files the value is found as it is and inside standard
base64 (the "auth" of ~/.docker/config.json); other encodings are not
found and reach the runtime as they are. Placeholders need a mode with
hutch's egress proxy in front of the runtime (image:, kube:, gondolin:);
the other modes refuse to run rather than hand over the value.`,
		Example: "  hutch vault placeholder slack/C0123ABC GH_TOKEN api.github.com,*.githubusercontent.com\n" +
			"  hutch vault placeholder slack/C0123ABC NPM_TOKEN registry.npmjs.org --expires 720h\n" +
			"  hutch vault placeholder slack/C0123ABC GH_TOKEN off",
		RunE: func(cmd *cobra.Command, args []string) error {
			t, rest, err := f.target(args)
			if err != nil {
				return err
			}
			if len(rest) != 2 {
				return errdefs.New(errdefs.ErrInvalid, "Give the variable and its hosts, or off: hutch vault placeholder <vault> NAME HOSTS|off")
			}
			name := rest[0]
			var hosts []string
			var exp time.Time
			if rest[1] == "off" {
				if cmd.Flags().Changed("expires") || body {
					return errdefs.New(errdefs.ErrInvalid, "--expires and --body go with HOSTS, not with off")
				}
			} else {
				if hosts, err = vault.ParsePlaceholderHosts(rest[1]); err != nil {
					return err
				}
				if cmd.Flags().Changed("expires") {
					if exp, err = vault.ParseExpiry(expires, time.Now()); err != nil {
						return err
					}
				}
			}
			key, err := t.VaultKey()
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			if hosts == nil {
				if err := svc.VaultClearPlaceholder(cmd.Context(), key, name); err != nil {
					return err
				}
				return printf(g.stdout, "%s in vault %s is no longer a placeholder; commands see its real value.\n", name, key)
			}
			m, err := svc.VaultSetPlaceholder(cmd.Context(), key, name, hosts, exp, body)
			if err != nil {
				return err
			}
			return printf(g.stdout, "Marked %s in vault %s: %s.\n", name, key, placeholderNote(m, time.Now()))
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&expires, "expires", "", "stop substituting after a duration (720h) or at a time (2027-01-01, RFC 3339)")
	cmd.Flags().BoolVar(&body, "body", false, "substitute in request bodies too (JSON or form posts of at most 1 MiB), not only in headers, paths and queries")
	return cmd
}

// placeholderNote describes a mark for vault ls and vault placeholder:
// "placeholder -> api.github.com, *.example.com (expires 2027-01-01)".
// Only the token is a mark's own; it is not shown, as it is of no use
// outside the runtime.
func placeholderNote(m vault.Placeholder, now time.Time) string {
	s := "placeholder -> " + strings.Join(m.Hosts, ", ")
	if m.Body {
		s += ", bodies too"
	}
	switch {
	case m.Expires.IsZero():
	case m.Expired(now):
		s += " (expired " + formatExpiry(m.Expires) + ")"
	default:
		s += " (expires " + formatExpiry(m.Expires) + ")"
	}
	return s
}

// formatExpiry shows a date alone when the expiry is midnight UTC, as
// given by --expires 2027-01-01, and the RFC 3339 time in UTC otherwise.
func formatExpiry(t time.Time) string {
	t = t.UTC()
	if t.Equal(t.Truncate(24 * time.Hour)) {
		return t.Format(time.DateOnly)
	}
	return t.Format(time.RFC3339)
}

func newVaultRmCmd(g *globals) *cobra.Command {
	var f vaultFlags
	cmd := &cobra.Command{
		Use:     "rm (<platform>/<conversation-id> | --user ID | --container NAME) <name>",
		Short:   "Remove an env variable or file from a vault",
		Long:    vaultLong,
		Example: "  hutch vault rm slack/C0123ABC GH_TOKEN",
		RunE: func(cmd *cobra.Command, args []string) error {
			t, rest, err := f.target(args)
			if err != nil {
				return err
			}
			if len(rest) != 1 {
				return errdefs.New(errdefs.ErrInvalid, "Give the one entry to remove: hutch vault rm <vault> <name>")
			}
			key, err := t.VaultKey()
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			if err := svc.VaultRemove(cmd.Context(), key, rest[0]); err != nil {
				return err
			}
			return printf(g.stdout, "Removed %s from vault %s.\n", rest[0], key)
		},
	}
	f.register(cmd)
	return cmd
}
