package chat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/settings"
)

// Command is the one chat command this package answers.
const Command = "/sandbox"

// Reply is what a bot posts back in the conversation.
type Reply struct {
	// Text is the message, lines separated by "\n", without a trailing
	// newline. Commands and words are in `backticks`.
	Text string
	// Refusal, when the reply refuses what was asked, is why, in
	// hutch_refusals_total's words (metrics.Reason*); "" for any other
	// reply, bad input included.
	Refusal string
}

// BusyDoor is the reply to a door change while a command runs.
const BusyDoor = "A command is running in this conversation; the door policy was not changed. Try again when it finishes."

// Handle answers one chat message of conversation conv, whose commands
// run in mode. A leading bot mention ("<@U123>", "<@!123>", "@hutch",
// optionally followed by ':' or ',') is skipped; the command itself is
// /sandbox, or /sandbox@<bot> as Telegram writes it in groups. Words
// after it are matched case-insensitively.
//
// A message that is not a /sandbox command, or an invalid conv, is an
// error of class errdefs.ErrInvalid. Errors the person in the chat cannot
// act on (engine unreachable, malformed settings) are returned as they
// are; everything else is a Reply.
func Handle(ctx context.Context, svc *service.Service, mode sandbox.Mode, conv office.Address, message string) (Reply, error) {
	args, err := parse(message)
	if err != nil {
		return Reply{}, err
	}
	if err := conv.Validate(); err != nil {
		return Reply{}, err
	}
	h := &handler{ctx: ctx, svc: svc, mode: mode, conv: conv, key: string(conv.Key())}
	var sub string
	if len(args) > 0 {
		sub, args = strings.ToLower(args[0]), args[1:]
	}
	switch sub {
	case "", "status":
		if len(args) > 0 {
			return usage("status"), nil
		}
		return h.status()
	case "boost":
		if len(args) > 0 {
			return usage("boost"), nil
		}
		return h.boost()
	case "door":
		return h.door(args)
	case "limits":
		return h.limits(args)
	case "help":
		return text("`/sandbox` commands:\n" + commandList()), nil
	}
	return text(fmt.Sprintf("Unknown command `/sandbox %s`. The commands are:\n%s", sub, commandList())), nil
}

// parse strips leading mentions and the command word and returns the
// words after it.
func parse(message string) ([]string, error) {
	fields := strings.Fields(message)
	for len(fields) > 0 && isMention(fields[0]) {
		fields = fields[1:]
	}
	if len(fields) == 0 || !isCommand(fields[0]) {
		return nil, errdefs.New(errdefs.ErrInvalid, "Not a /sandbox command: chat commands start with /sandbox, e.g. /sandbox help")
	}
	return fields[1:], nil
}

func isMention(f string) bool {
	f = strings.TrimRight(f, ":,")
	if strings.HasPrefix(f, "<@") && strings.HasSuffix(f, ">") {
		return len(f) > len("<@>")
	}
	return len(f) > 1 && f[0] == '@'
}

func isCommand(f string) bool {
	name, bot, hasBot := strings.Cut(f, "@")
	return strings.EqualFold(name, Command) && (!hasBot || bot != "")
}

// commands are the sub-commands in the order help lists them.
var commands = []struct{ word, usage, help string }{
	{"status", "/sandbox", "the mode, the door policy, the runtime and its limits"},
	{"boost", "/sandbox boost", "raise CPU and memory until the runtime stops (image:*, gondolin:default, kube:*)"},
	{"door", "/sandbox door [<word>]", "show or set which parts of the workspace the runtime sees"},
	{"limits", "/sandbox limits cpus=<n> memory=<size> [pids=<n>]", "set limits until the runtime stops (image:*, gondolin:default, kube:*)"},
	{"help", "/sandbox help", "this list"},
}

func commandList() string {
	lines := make([]string, len(commands))
	for i, c := range commands {
		lines[i] = fmt.Sprintf("`%s`: %s", c.usage, c.help)
	}
	return strings.Join(lines, "\n")
}

func usage(word string) Reply {
	for _, c := range commands {
		if c.word == word {
			return text(fmt.Sprintf("Usage: `%s`: %s.", c.usage, c.help))
		}
	}
	return text("Usage:\n" + commandList())
}

// doorHelp says what each door word selects, in projection.DoorWords order.
var doorHelp = map[string]string{
	"default":        "clear this conversation's setting: back to the global setting, then the channel kind",
	"isolated":       "only this conversation's office",
	"shared":         "the office plus the workspace's MEMORY.md, skills/ and events/, read-write",
	"shared-private": "the same, with MEMORY.md read-only",
	"full":           "the whole workspace, every conversation's office included",
}

func doorList() string {
	lines := make([]string, len(projection.DoorWords))
	for i, w := range projection.DoorWords {
		lines[i] = fmt.Sprintf("`%s`: %s", w, doorHelp[w])
	}
	return strings.Join(lines, "\n")
}

// limitKeys are the keys /sandbox limits takes, in the order help lists them.
var limitKeys = []struct{ key, help string }{
	{"cpus", "CPUs, fractions allowed (0.5, 2)"},
	{"memory", "memory in Docker units (512m, 4g); swap is capped to the same"},
	{"pids", "process ceiling (1024)"},
}

func limitKeyList() string {
	lines := make([]string, len(limitKeys))
	for i, k := range limitKeys {
		lines[i] = fmt.Sprintf("`%s=`: %s", k.key, k.help)
	}
	return strings.Join(lines, "\n")
}

type handler struct {
	ctx  context.Context
	svc  *service.Service
	mode sandbox.Mode
	conv office.Address
	key  string
}

func text(s string) Reply { return Reply{Text: s} }

func (h *handler) status() (Reply, error) {
	pol, err := h.svc.Resolve(h.conv, h.mode, "")
	if err != nil {
		return Reply{}, err
	}
	lines := []string{
		fmt.Sprintf("Sandbox: `%s`", h.mode),
		"Door policy: " + service.Describe(pol.Decision),
	}
	if r := refusal(pol, h.mode); r != nil {
		lines = append(lines, "Commands here are refused: "+r.Error())
	}
	if !sandbox.CapabilitiesOf(h.mode.Kind).ManagedLifecycle {
		lines = append(lines, fmt.Sprintf("Limits: not managed in `%s` mode; boosts and limits need image:*, gondolin:default or kube:* mode", h.mode.Kind))
		return text(strings.Join(lines, "\n")), nil
	}
	m, err := h.svc.ManagedFor(h.ctx, h.mode)
	if err != nil {
		return Reply{}, err
	}
	st, err := m.Status(h.ctx, h.key)
	if err != nil {
		return Reply{}, err
	}
	base, boost, err := h.sizes()
	if err != nil {
		return Reply{}, err
	}
	switch st.State {
	case sandbox.StateRunning:
		run := "Runtime: running"
		if st.ActiveCommands > 0 {
			run += fmt.Sprintf(" (%s running now)", plural(st.ActiveCommands, "command"))
		}
		lines = append(lines, run, "Limits: "+formatLimits(st.Limits, true))
		if st.Boosted {
			lines = append(lines, "Boosted: yes, until the runtime stops")
		} else {
			lines = append(lines, "Boosted: no")
		}
		if st.TempLimits {
			lines = append(lines, "Temporary limits: set, until the runtime stops")
		}
		lines = append(lines, "Defaults: "+formatLimits(base, true))
	case sandbox.StateStopped:
		lines = append(lines, "Runtime: stopped (the next command starts it)", "Limits: "+formatLimits(base, true)+" (the defaults)")
	default:
		lines = append(lines, "Runtime: not created yet (the next command creates it)", "Limits: "+formatLimits(base, true)+" (the defaults)")
	}
	lines = append(lines, "Boost size: "+formatLimits(boost, false))
	return text(strings.Join(lines, "\n")), nil
}

// sizes are the default limits and the boost size of every runtime.
func (h *handler) sizes() (base, boost sandbox.Limits, err error) {
	rs, err := settings.LoadRuntime(settings.GlobalPath(h.svc.Layout().StateDir))
	if err != nil {
		return base, boost, err
	}
	base = sandbox.Limits{CPUs: rs.CPUs, MemoryBytes: rs.MemoryBytes, Pids: rs.Pids}.Over(managed.DefaultLimits)
	boost = sandbox.Limits{CPUs: rs.BoostCPUs, MemoryBytes: rs.BoostMemoryBytes}.Over(managed.DefaultBoost)
	return base, boost, nil
}

// needManaged is the reply for a command only the managed modes serve,
// or ok.
func (h *handler) needManaged(command string) (Reply, bool) {
	if sandbox.CapabilitiesOf(h.mode.Kind).ManagedLifecycle {
		return Reply{}, true
	}
	r := text(fmt.Sprintf("`%s` needs image:*, gondolin:default or kube:* mode, where hutch runs one managed runtime per conversation; this conversation runs in `%s` mode.", command, h.mode))
	r.Refusal = metrics.ReasonNotSupported
	return r, false
}

// lifecycleReply turns the errors of a boost or limits change that the
// person can act on into a reply.
func lifecycleReply(err error, what string) (Reply, bool) {
	switch {
	case errdefs.IsFailedPrecondition(err), errdefs.IsNotFound(err):
		return Reply{Text: fmt.Sprintf("This conversation's runtime is not running, and %s last one run of it. Run a command first, then try again.", what),
			Refusal: metrics.ReasonFailedPrecondition}, true
	case errdefs.IsNotSupported(err), errdefs.IsInvalid(err): // a mode without it, a value above the ceiling
		return Reply{Text: err.Error(), Refusal: service.RefusalReason(err)}, true
	}
	return Reply{}, false
}

func (h *handler) boost() (Reply, error) {
	if r, ok := h.needManaged("/sandbox boost"); !ok {
		return r, nil
	}
	m, err := h.svc.ManagedFor(h.ctx, h.mode)
	if err != nil {
		return Reply{}, err
	}
	size, err := h.svc.BoostSize()
	if err != nil {
		return Reply{}, err
	}
	st, err := m.Boost(h.ctx, h.key, size)
	if r, ok := lifecycleReply(err, "boosts"); ok {
		return r, nil
	}
	if err != nil {
		return Reply{}, err
	}
	idle, err := h.svc.IdleDuration()
	if err != nil {
		return Reply{}, err
	}
	msg := fmt.Sprintf("Boosted this conversation's runtime.\nLimits: %s\nThe boost lasts until the runtime stops (after %s without a command, or when stopped); it then starts at the defaults again.",
		formatLimits(st.Limits, true), formatDuration(idle))
	if note := st.AppliedNote(); note != "" {
		msg += "\n" + note
	}
	return text(msg), nil
}

func (h *handler) limits(args []string) (Reply, error) {
	if r, ok := h.needManaged("/sandbox limits"); !ok {
		return r, nil
	}
	if len(args) == 0 {
		return text("Give the limits to set, e.g. `/sandbox limits cpus=2 memory=4g`. The keys are:\n" + limitKeyList()), nil
	}
	var l sandbox.Limits
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		var err error
		switch strings.ToLower(k) {
		case "cpus":
			l.CPUs, err = settings.ParseCPUs(v)
		case "memory":
			l.MemoryBytes, err = settings.ParseMemory(v)
		case "pids":
			l.Pids, err = settings.ParsePids(v)
		default:
			ok = false
		}
		if !ok {
			return text(fmt.Sprintf("Unknown limit `%s`; the limits were not changed. The keys are:\n%s", a, limitKeyList())), nil
		}
		if err != nil {
			return text(fmt.Sprintf("The limits were not changed: %s.", strings.TrimSuffix(err.Error(), "."))), nil
		}
	}
	m, err := h.svc.ManagedFor(h.ctx, h.mode)
	if err != nil {
		return Reply{}, err
	}
	st, err := m.SetLimits(h.ctx, h.key, l)
	if r, ok := lifecycleReply(err, "temporary limits"); ok {
		return r, nil
	}
	if err != nil {
		return Reply{}, err
	}
	msg := fmt.Sprintf("Set temporary limits on this conversation's runtime.\nLimits: %s\nThey last until the runtime stops; it then starts at the defaults again.",
		formatLimits(st.Limits, true))
	if note := st.AppliedNote(); note != "" {
		msg += "\n" + note
	}
	return text(msg), nil
}

func (h *handler) door(args []string) (Reply, error) {
	if len(args) > 1 {
		return text("Give one door policy: `/sandbox door <word>`. The words are:\n" + doorList()), nil
	}
	before, err := h.svc.Resolve(h.conv, h.mode, "")
	if err != nil {
		return Reply{}, err
	}
	if len(args) == 0 {
		return text(fmt.Sprintf("Door policy: %s\n\nChange it with `/sandbox door <word>`:\n%s", service.Describe(before.Decision), doorList())), nil
	}
	if sees := unenforced(h.mode); sees != "" {
		return Reply{Text: fmt.Sprintf("The door policy was not changed: `%s` mode cannot enforce one (its commands see %s, whatever the policy says), so a change from chat, where any participant can send one, would only widen what this conversation may run. The operator sets it with `hutch door set %s <word>` or in the admin portal.",
			h.mode, sees, h.conv), Refusal: metrics.ReasonFailedPrecondition}, nil
	}
	word := strings.ToLower(args[0])
	setting, err := projection.ParseDoorWord(word)
	if err != nil {
		return text(fmt.Sprintf("Unknown door policy `%s`; the door policy was not changed. The words are:\n%s", args[0], doorList())), nil
	}
	if busy, err := h.busy(); err != nil {
		return Reply{}, err
	} else if busy {
		return text(BusyDoor), nil
	}
	if err := h.svc.SetDoor(h.ctx, h.conv, setting); err != nil {
		return Reply{}, err
	}
	after, err := h.svc.Resolve(h.conv, h.mode, "")
	if err != nil {
		return Reply{}, err
	}
	first := fmt.Sprintf("Door policy set to `%s`.", word)
	if setting == nil {
		first = "Cleared this conversation's door policy; it follows the global setting, then the channel kind."
	}
	lines := []string{first, "Effective: " + service.Describe(after.Decision)}
	switch {
	case !service.Runnable(h.mode):
		lines = append(lines, "Commands here are refused until the mode changes: "+sandbox.NotImplemented(h.mode).Error())
	case after.Refusal != nil:
		lines = append(lines, fmt.Sprintf("`%s` mode cannot run this conversation with it, so commands here are refused until the door policy or the mode changes: %s", h.mode, after.Refusal))
	case after.Decision.Policy == before.Decision.Policy:
		lines = append(lines, "The effective policy did not change.")
	default:
		// Only the managed modes get here (see unenforced).
		lines = append(lines, "It takes effect on the next command (the runtime is re-created with the new mounts; what was installed in it is kept).")
	}
	return text(strings.Join(lines, "\n")), nil
}

// refusal is why commands of a conversation are refused in mode, or nil.
func refusal(pol service.Policy, mode sandbox.Mode) error {
	if pol.Refusal != nil {
		return pol.Refusal
	}
	if !service.Runnable(mode) {
		return sandbox.NotImplemented(mode)
	}
	return nil
}

// busy reports whether a command runs in the conversation's runtime.
func (h *handler) busy() (bool, error) { return h.svc.Busy(h.ctx, h.mode, h.conv) }

// unenforced says what a mode's commands see when the mode cannot enforce
// a door policy, and "" when it can: only where hutch projects an
// isolated office (the managed modes) may chat change the door, as the
// reference system offers its door command only there.
func unenforced(mode sandbox.Mode) string {
	switch sandbox.CapabilitiesOf(mode.Kind).Workspace {
	case sandbox.WorkspaceManaged:
		return ""
	case sandbox.WorkspaceHost:
		return "every host path"
	case sandbox.WorkspaceSelfManaged:
		return "whatever the container's operator mounted"
	}
	return "their own remote workspace"
}

// formatLimits renders limits as "2 CPUs, 4GiB memory, 1024 processes";
// a zero field is unlimited. withPids leaves the process count out when false.
func formatLimits(l sandbox.Limits, withPids bool) string {
	parts := []string{"unlimited CPUs", "unlimited memory"}
	if l.CPUs > 0 {
		parts[0] = sandbox.CPUCount(l.CPUs)
	}
	if l.MemoryBytes > 0 {
		parts[1] = units.BytesSize(float64(l.MemoryBytes)) + " memory"
	}
	if withPids {
		if l.Pids > 0 {
			parts = append(parts, plural(int(l.Pids), "process"))
		} else {
			parts = append(parts, "unlimited processes")
		}
	}
	return strings.Join(parts, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// formatDuration renders an idle timeout as people say it: "10 minutes",
// "1 hour", "90 seconds".
func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	case d%time.Second == 0:
		return plural(int(d/time.Second), "second")
	}
	return d.String()
}
