package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/settings"
)

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "See and steer the managed runtimes (containers, microVMs, pods)",
		Long: `In image:<image> mode every conversation gets a container of its own, made
by hutch and named hutch-<office-key> (a microVM in gondolin:default, a pod
in kube:*). These commands list them, show one, stop or remove one, boost
one, set temporary limits, and set the global defaults every runtime gets.
ls and rm cover every managed mode at once.

Defaults: CPU 0.5, memory 1g (no swap), 1024 processes; a boost raises a
runtime to 2 CPUs and 4g until it stops; an idle runtime stops after 10m
and starts again on the next command. Limits apply live, without
re-creating the container.`,
	}
	cmd.AddCommand(newSandboxLsCmd(g), newSandboxStatusCmd(g), newSandboxStopCmd(g), newSandboxRmCmd(g),
		newSandboxBoostCmd(g), newSandboxLimitsCmd(g), newSandboxNetworkCmd(g), newSandboxSettingsCmd(g), newSandboxReconcileCmd(g))
	return cmd
}

func newSandboxLsCmd(g *globals) *cobra.Command {
	var modeFlag string
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:   "ls [--sandbox MODE]",
		Short: "List the managed runtimes of every mode",
		Long: `List the runtimes this installation owns in every managed mode (image:*
containers, gondolin:default microVMs, kube:* pods), whatever mode
$HUTCH_SANDBOX names; --sandbox lists one mode's. A mode whose engine is
absent (no Docker, no QEMU, no cluster) is left out with a note on stderr.

--json prints an array of the runtime status GET /v1/sandbox/runtimes
answers, each with its mode (image, gondolin, kube). -q prints one
conversation a line (<platform>/<conversation-id>).`,
		Example: "  hutch sandbox ls\n  hutch sandbox ls --json | jq -r '.[] | select(.state == \"running\") | .name'\n  hutch sandbox ls -q --sandbox 'image:*'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && quiet {
				return errdefs.New(errdefs.ErrInvalid, "Give --json or --quiet, not both")
			}
			only, err := managedKindFlag(modeFlag)
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			list, notes, err := g.ownedRuntimes(cmd.Context(), svc, only)
			if err != nil {
				return err
			}
			printNotes(g, notes, "not listed")
			switch {
			case asJSON:
				return printJSON(g.stdout, runtimesJSON(list))
			case quiet:
				out := &printer{w: g.stdout}
				for _, r := range list {
					if r.Status.Platform == "" {
						// A runtime no registered office accounts for.
						out.println(r.Status.OfficeKey)
						continue
					}
					out.printf("%s/%s\n", r.Status.Platform, r.Status.ConversationID)
				}
				return out.err
			}
			if len(list) == 0 {
				return printf(g.stdout, "No managed runtimes.\n")
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			out := &printer{w: tw}
			out.println("CONVERSATION\tMODE\tSTATE\tNETWORK\tUPTIME\tCPUS\tMEMORY\tPIDS\tIMAGE\tCONTAINER")
			for _, r := range list {
				s := r.Status
				// A pod has no process ceiling of its own (kube:): "-".
				pids := "-"
				if s.Limits.Pids > 0 {
					pids = strconv.FormatInt(s.Limits.Pids, 10)
				}
				out.printf("%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Platform, s.ConversationID, r.Kind, stateWord(s), networkWord(svc, s, r.Kind), uptime(s),
					strconv.FormatFloat(s.Limits.CPUs, 'f', -1, 64), units.BytesSize(float64(s.Limits.MemoryBytes)), pids, s.Image, s.Name)
			}
			return out.flush(tw)
		},
	}
	cmd.Flags().StringVar(&modeFlag, "sandbox", "", "list one managed mode's runtimes: image:*, gondolin:default or kube:* (default: every mode)")
	jsonFlag(cmd, &asJSON)
	quietFlag(cmd, &quiet, "the conversations")
	return cmd
}

// runtimesJSON is the list as hutch sandbox ls --json prints it: the
// API's status of each runtime, with its mode. Never nil.
func runtimesJSON(list []service.OwnedRuntime) []api.Status {
	out := []api.Status{}
	for _, r := range list {
		st := api.StatusOf(r.Status)
		st.Mode = string(r.Kind)
		out = append(out, st)
	}
	return out
}

// networkWord is the runtime's egress policy, for the list: open is
// shown as plainly as the others, never assumed.
func networkWord(svc *service.Service, s sandbox.Status, kind sandbox.Kind) string {
	addr, err := office.NewAddress(s.Platform, s.ConversationID)
	if err != nil {
		return "?"
	}
	n, err := svc.Network(addr, sandbox.Mode{Kind: kind})
	if err != nil {
		return "?"
	}
	return string(n.Mode)
}

func stateWord(s sandbox.Status) string {
	w := string(s.State)
	switch {
	case s.Boosted && s.TempLimits:
		w += " (boosted, limits set)"
	case s.Boosted:
		w += " (boosted)"
	case s.TempLimits:
		w += " (limits set)"
	}
	return w
}

func uptime(s sandbox.Status) string {
	if s.State != sandbox.StateRunning || s.StartedAt.IsZero() {
		return "-"
	}
	return time.Since(s.StartedAt).Round(time.Second).String()
}

// conversationArg parses the one <platform>/<id> argument of a command.
func conversationArg(args []string) (office.Address, error) {
	if len(args) != 1 {
		return office.Address{}, errdefs.New(errdefs.ErrInvalid, "Give one conversation: <platform>/<conversation-id>")
	}
	return office.ParseAddress(args[0])
}

func printStatus(out *printer, s sandbox.Status) {
	out.printf("Office key:    %s\n", s.OfficeKey)
	out.printf("Container:     %s\n", s.Name)
	out.printf("State:         %s\n", stateWord(s))
	if s.State == sandbox.StateMissing {
		out.println("               (the next command creates it)")
		return
	}
	out.printf("Uptime:        %s\n", uptime(s))
	out.printf("Image:         %s (%s)\n", s.Image, shortDigest(s.ImageID))
	procs := "no process ceiling of its own"
	if s.Limits.Pids > 0 {
		procs = strconv.FormatInt(s.Limits.Pids, 10) + " processes"
	}
	out.printf("Limits:        %s, %s memory, %s\n",
		sandbox.CPUCount(s.Limits.CPUs), units.BytesSize(float64(s.Limits.MemoryBytes)), procs)
	out.printf("Fingerprint:   %s\n", s.Fingerprint)
	if s.ActiveCommands > 0 {
		out.printf("Running:       %d commands\n", s.ActiveCommands)
	}
}

func shortDigest(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func newSandboxStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status <platform>/<conversation-id>",
		Short: "Show a conversation's runtime: state, image, limits, fingerprint",
		Long: `Show a conversation's runtime in the managed mode of $HUTCH_SANDBOX (or of
the daemon serving this state dir): its state, image, limits and
fingerprint, and the egress policy it gets.

--json prints what POST /v1/sandbox/status answers: {officeKey, name,
state, image, imageId, cpus, memoryBytes, pids, boosted, tempLimits, ...}.`,
		Example: "  hutch sandbox status slack/C0123ABC\n  hutch sandbox status slack/C0123ABC --json | jq .state",
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := conversationArg(args)
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			m, err := g.managed(cmd.Context(), svc, &addr)
			if err != nil {
				return err
			}
			st, err := m.Status(cmd.Context(), string(addr.Key()))
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(g.stdout, api.StatusOf(st))
			}
			out := &printer{w: g.stdout}
			out.printf("Conversation:  %s\n", addr)
			kind := sandbox.KindImage
			if m, err := g.sandboxMode(""); err == nil && sandbox.CapabilitiesOf(m.Kind).ManagedLifecycle {
				kind = m.Kind
			}
			if n, err := svc.Network(addr, sandbox.Mode{Kind: kind}); err == nil {
				out.printf("Network:       %s\n", n.Describe())
			}
			printStatus(out, st)
			return out.err
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

func newSandboxStopCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stop <platform>/<conversation-id>",
		Short: "Stop a conversation's runtime; the next command starts it again",
		Long: `Stop a conversation's runtime. Its container, writable layer and office
stay; the next command starts it again. A boost or temporary limits end.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := conversationArg(args)
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			m, err := g.managed(cmd.Context(), svc, &addr)
			if err != nil {
				return err
			}
			if err := m.Stop(cmd.Context(), string(addr.Key())); err != nil {
				return err
			}
			return printf(g.stdout, "Stopped the runtime of %s.\n", addr)
		},
	}
}

func newSandboxRmCmd(g *globals) *cobra.Command {
	var modeFlag string
	cmd := &cobra.Command{
		Use:   "rm <platform>/<conversation-id> [--sandbox MODE]",
		Short: "Remove a conversation's runtime (its container and network)",
		Long: `Remove a conversation's runtime: its container, with whatever was
installed in it, and its network (its microVM disk in gondolin:default, its
pod in kube:*). Every managed mode is searched, whatever mode
$HUTCH_SANDBOX names; --sandbox searches one. The office directory and the
vault stay; the next command creates a fresh runtime.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := conversationArg(args)
			if err != nil {
				return err
			}
			only, err := managedKindFlag(modeFlag)
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			removed, notes, err := g.removeOwned(cmd.Context(), svc, addr, only)
			if err != nil {
				return err
			}
			printNotes(g, notes, "not searched")
			if len(removed) == 0 {
				where := "image, gondolin or kube mode"
				if only != "" {
					where = string(only) + " mode"
				}
				return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No runtime of %s in %s", addr, where))
			}
			kinds := make([]string, len(removed))
			for i, k := range removed {
				kinds[i] = string(k)
			}
			return printf(g.stdout, "Removed the runtime of %s (%s); its office and vault are kept.\n", addr, strings.Join(kinds, ", "))
		},
	}
	cmd.Flags().StringVar(&modeFlag, "sandbox", "", "search one managed mode: image:*, gondolin:default or kube:* (default: every mode)")
	return cmd
}

// limitFlags are --cpus, --memory and --pids.
type limitFlags struct {
	cpus, memory, pids string
}

func (f *limitFlags) register(cmd *cobra.Command, pids bool) {
	cmd.Flags().StringVar(&f.cpus, "cpus", "", "CPUs, fractions allowed (0.5, 2)")
	cmd.Flags().StringVar(&f.memory, "memory", "", "memory in Docker units (512m, 4g); swap is capped to the same")
	if pids {
		cmd.Flags().StringVar(&f.pids, "pids", "", "process ceiling (1024)")
	}
}

func (f *limitFlags) limits() (sandbox.Limits, error) {
	var l sandbox.Limits
	var err error
	if f.cpus != "" {
		if l.CPUs, err = settings.ParseCPUs(f.cpus); err != nil {
			return l, err
		}
	}
	if f.memory != "" {
		if l.MemoryBytes, err = settings.ParseMemory(f.memory); err != nil {
			return l, err
		}
	}
	if f.pids != "" {
		if l.Pids, err = settings.ParsePids(f.pids); err != nil {
			return l, err
		}
	}
	return l, nil
}

func newSandboxBoostCmd(g *globals) *cobra.Command {
	var f limitFlags
	var global bool
	cmd := &cobra.Command{
		Use:   "boost (<platform>/<conversation-id> | --global) [--cpus X] [--memory Y]",
		Short: "Raise a conversation's limits until its runtime stops",
		Long: `Raise a running runtime's CPU and memory to the boost size (default 2 CPUs
and 4g, or the values given) until it stops. With --global, set the boost
size instead (sandbox.boost.cpus and sandbox.boost.memory).`,
		Example: "  hutch sandbox boost slack/C0123ABC\n  hutch sandbox boost slack/C0123ABC --memory 8g\n  hutch sandbox boost --global --cpus 4 --memory 8g",
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := f.limits()
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			if global {
				if len(args) != 0 {
					return errdefs.New(errdefs.ErrInvalid, "With --global, give no conversation")
				}
				if f.cpus == "" && f.memory == "" {
					return errdefs.New(errdefs.ErrInvalid, "With --global, give --cpus and/or --memory: the boost size to set")
				}
				if f.cpus != "" {
					if err := svc.SetRuntimeSetting("sandbox.boost.cpus", f.cpus); err != nil {
						return err
					}
				}
				if f.memory != "" {
					if err := svc.SetRuntimeSetting("sandbox.boost.memory", f.memory); err != nil {
						return err
					}
				}
				return printf(g.stdout, "Boost size set; it applies to the next boost.\n")
			}
			addr, err := conversationArg(args)
			if err != nil {
				return err
			}
			m, err := g.managed(cmd.Context(), svc, &addr)
			if err != nil {
				return err
			}
			// What the flags leave out is the boost size set now.
			size, err := svc.BoostSize()
			if err != nil {
				return err
			}
			st, err := m.Boost(cmd.Context(), string(addr.Key()), l.Over(size))
			if err != nil {
				return err
			}
			out := &printer{w: g.stdout}
			out.printf("Boosted %s until its runtime stops.\n", addr)
			if note := st.AppliedNote(); note != "" {
				out.println(note)
			}
			printStatus(out, st)
			return out.err
		},
	}
	f.register(cmd, false)
	cmd.Flags().BoolVar(&global, "global", false, "set the boost size instead of boosting one runtime")
	return cmd
}

func newSandboxLimitsCmd(g *globals) *cobra.Command {
	var f limitFlags
	var global bool
	cmd := &cobra.Command{
		Use:   "limits (<platform>/<conversation-id> | --global) [--cpus X] [--memory Y] [--pids N]",
		Short: "Set a conversation's limits until its runtime stops, or the global defaults",
		Long: `Set temporary limits on one running runtime (they end when it stops), or
with --global the default limits of every runtime (sandbox.cpus,
sandbox.memory, sandbox.pids), which running runtimes take on live at
their next command, without being re-created.`,
		Example: "  hutch sandbox limits slack/C0123ABC --cpus 1 --memory 2g\n  hutch sandbox limits --global --memory 2g --pids 2048",
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := f.limits()
			if err != nil {
				return err
			}
			if l == (sandbox.Limits{}) {
				return errdefs.New(errdefs.ErrInvalid, "Give at least one of --cpus, --memory, --pids")
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			if global {
				if len(args) != 0 {
					return errdefs.New(errdefs.ErrInvalid, "With --global, give no conversation")
				}
				for _, kv := range [][2]string{{"sandbox.cpus", f.cpus}, {"sandbox.memory", f.memory}, {"sandbox.pids", f.pids}} {
					if kv[1] == "" {
						continue
					}
					if err := svc.SetRuntimeSetting(kv[0], kv[1]); err != nil {
						return err
					}
				}
				return printf(g.stdout, "Default limits set; running runtimes take them on at their next command.\n")
			}
			addr, err := conversationArg(args)
			if err != nil {
				return err
			}
			m, err := g.managed(cmd.Context(), svc, &addr)
			if err != nil {
				return err
			}
			st, err := m.SetLimits(cmd.Context(), string(addr.Key()), l)
			if err != nil {
				return err
			}
			out := &printer{w: g.stdout}
			out.printf("Set limits of %s until its runtime stops.\n", addr)
			if note := st.AppliedNote(); note != "" {
				out.println(note)
			}
			printStatus(out, st)
			return out.err
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&global, "global", false, "set the defaults of every runtime instead")
	return cmd
}

func newSandboxSettingsCmd(g *globals) *cobra.Command {
	var unset bool
	width := 0
	for _, k := range settings.RuntimeKeys {
		width = max(width, len(k.Name()))
	}
	keys := make([]string, len(settings.RuntimeKeys))
	for i, k := range settings.RuntimeKeys {
		keys[i] = fmt.Sprintf("  %-*s %s", width, k.Name(), k.Help())
	}
	cmd := &cobra.Command{
		Use:     "settings [KEY [VALUE]]",
		Short:   "Show or set the global runtime settings",
		Long:    "Without arguments, show the global runtime settings that are set. With a\nkey and a value, set it; with --unset, remove it (back to the default).\n\nKeys:\n" + strings.Join(keys, "\n"),
		Example: "  hutch sandbox settings\n  hutch sandbox settings sandbox.idleTimeout 30m\n  hutch sandbox settings --unset sandbox.idleTimeout",
		Args:    cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := g.service()
			if err != nil {
				return err
			}
			switch {
			case unset && len(args) == 1:
				if err := svc.SetRuntimeSetting(args[0], ""); err != nil {
					return err
				}
				return printf(g.stdout, "Removed %s; the default applies.\n", args[0])
			case !unset && len(args) == 2:
				if err := svc.SetRuntimeSetting(args[0], args[1]); err != nil {
					return err
				}
				return printf(g.stdout, "Set %s to %s.\n", args[0], args[1])
			case len(args) == 0:
				vals, err := svc.RuntimeSettings()
				if err != nil {
					return err
				}
				out := &printer{w: g.stdout}
				if len(vals) == 0 {
					out.println("No runtime settings set; defaults apply.")
				}
				for _, kv := range vals {
					out.printf("%s = %s\n", kv[0], kv[1])
				}
				return out.err
			default:
				return errdefs.New(errdefs.ErrInvalid, "Give KEY VALUE to set, --unset KEY to remove, or nothing to show")
			}
		},
	}
	cmd.Flags().BoolVar(&unset, "unset", false, "remove the key instead of setting it")
	return cmd
}

func newSandboxReconcileCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reconcile",
		Short: "Adopt the runtimes of known offices and remove unaccounted ones",
		Long: `Walk the runtimes this hutch labelled in the managed mode of $HUTCH_SANDBOX
(image:* when it names none): containers and networks, microVM disks, or
pods and Secrets in kube mode. Those of registered offices are adopted;
those no registered office accounts for are removed. hutch serve does this
at every start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			mode := sandbox.Mode{Kind: sandbox.KindImage}
			if m, err := g.sandboxMode(""); err == nil && sandbox.CapabilitiesOf(m.Kind).ManagedLifecycle {
				mode = m
			}
			rep, err := svc.ReconcileMode(cmd.Context(), mode)
			if err != nil {
				return err
			}
			out := &printer{w: g.stdout}
			out.printf("Adopted %d runtimes, removed %d.\n", len(rep.Adopted), len(rep.Removed))
			for _, k := range rep.Removed {
				out.printf("  removed %s\n", k)
			}
			return out.err
		},
	}
}

// managedKindFlag parses --sandbox of ls and rm: empty means every
// managed mode; a mode without runtimes of its own is refused.
func managedKindFlag(flag string) (sandbox.Kind, error) {
	if flag == "" {
		return "", nil
	}
	m, err := sandbox.ParseMode(flag)
	if err != nil {
		return "", err
	}
	if !sandbox.CapabilitiesOf(m.Kind).ManagedLifecycle {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
			"Sandbox '%s' has no runtimes managed by hutch; use image:*, gondolin:default or kube:*", m.Kind))
	}
	return m.Kind, nil
}

// daemonKind returns the client and the managed mode of a daemon serving
// this state dir, if one answers in a managed mode: its runtimes are
// asked of it (it knows which commands run), the other modes' in-process.
func (g *globals) daemonKind(ctx context.Context, svc *service.Service) (*client.Client, sandbox.Kind) {
	c, ok := g.daemon(ctx, svc, "")
	if !ok {
		return nil, ""
	}
	h, err := c.Health(ctx)
	if err != nil {
		return nil, ""
	}
	m, err := sandbox.ParseMode(h.Mode)
	if err != nil || !sandbox.CapabilitiesOf(m.Kind).ManagedLifecycle {
		return nil, ""
	}
	return c, m.Kind
}

// ownedRuntimes lists the runtimes of every managed mode (or of only),
// in the order of service.ManagedKinds.
func (g *globals) ownedRuntimes(ctx context.Context, svc *service.Service, only sandbox.Kind) ([]service.OwnedRuntime, []service.ModeNote, error) {
	var out []service.OwnedRuntime
	c, dk := g.daemonKind(ctx, svc)
	if dk != "" && (only == "" || only == dk) {
		list, err := (&daemonLifecycle{c: c}).List(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, st := range list {
			out = append(out, service.OwnedRuntime{Kind: dk, Status: st})
		}
	}
	more, notes, err := svc.OwnedRuntimes(ctx, func(k sandbox.Kind) bool { return k == dk || (only != "" && k != only) })
	if err != nil {
		return nil, nil, err
	}
	out = append(out, more...)
	slices.SortStableFunc(out, func(a, b service.OwnedRuntime) int {
		return slices.Index(service.ManagedKinds, a.Kind) - slices.Index(service.ManagedKinds, b.Kind)
	})
	return out, notes, nil
}

// removeOwned removes addr's runtime in every managed mode (or in only)
// that has one, the daemon's mode through the daemon.
func (g *globals) removeOwned(ctx context.Context, svc *service.Service, addr office.Address, only sandbox.Kind) ([]sandbox.Kind, []service.ModeNote, error) {
	var removed []sandbox.Kind
	c, dk := g.daemonKind(ctx, svc)
	if dk != "" && (only == "" || only == dk) {
		err := (&daemonLifecycle{c: c, addr: &addr}).Remove(ctx, "")
		switch {
		case err == nil:
			removed = append(removed, dk)
		case !errdefs.IsNotFound(err):
			return nil, nil, err
		}
	}
	more, notes, err := svc.RemoveOwned(ctx, string(addr.Key()), func(k sandbox.Kind) bool { return k == dk || (only != "" && k != only) })
	removed = append(removed, more...)
	slices.SortStableFunc(removed, func(a, b sandbox.Kind) int {
		return slices.Index(service.ManagedKinds, a) - slices.Index(service.ManagedKinds, b)
	})
	return removed, notes, err
}

// printNotes says on stderr, one line each, which modes were left out
// and why.
func printNotes(g *globals, notes []service.ModeNote, what string) {
	for _, n := range notes {
		note(g.stderr, "hutch: %s: %s: %s\n", n.Kind, what, n.Reason)
	}
}
