// Package events is hutch's one event log: every change made through any
// surface (the CLI, the HTTP API, chat, MCP, the admin portal, the daemon
// itself) is one line of JSON in <state>/events.jsonl.
//
// The log is an audit trail, so it holds names and reasons, never values:
// a vault's variable names but not what they hold, a door policy's word,
// a refusal's reason. Every field an agent can influence (conversation
// ids, names, refusal texts) is cut to a bound, and the line is JSON, so
// a newline in a name stays inside its string: one event is one line.
//
// Several processes append to the same file (a daemon, and CLI commands
// run beside it), each event with one O_APPEND write of at most MaxLine
// bytes, synced before Append returns. Past MaxSize the file is renamed to
// events.jsonl.1 (one older file is kept) under an flock, so two
// processes never rotate the same file twice. Readers skip a line that
// does not parse (a write torn by a crash), and Follow keeps reading
// across a rotation.
package events

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// The surfaces a change comes from.
const (
	SurfaceCLI    = "cli"    // a hutch command run without a daemon's help
	SurfaceAPI    = "api"    // the HTTP API
	SurfaceChat   = "chat"   // /sandbox commands sent to /v1/chat
	SurfaceMCP    = "mcp"    // MCP's sandbox tool
	SurfacePortal = "portal" // the admin portal
	SurfaceDaemon = "daemon" // the daemon on its own: idle stops, reconcile
	SurfaceEgress = "egress" // the egress proxies: what a runtime's traffic was refused
)

// The actions an event records. The set is fixed: a reader may switch on
// it, and a new action is a documented addition.
const (
	RuntimeCreated   = "runtime.created"   // a runtime was made for an office
	RuntimeRecreated = "runtime.recreated" // replaced; Detail says why
	RuntimeStopped   = "runtime.stopped"   // stopped (by a caller, or idle)
	RuntimeRemoved   = "runtime.removed"   // removed with its writable layer
	LimitsSet        = "limits.set"        // temporary limits; Detail the numbers
	LimitsBoost      = "limits.boost"      // a boost; Detail the size
	DoorSet          = "door.set"          // door policy; Detail the word
	VaultSet         = "vault.set"         // variables or a file; Detail the names
	VaultRemove      = "vault.remove"      // Detail the name
	VaultPlaceholder = "vault.placeholder" // a placeholder marked; Detail name and hosts
	VaultUnmark      = "vault.unmark"      // a placeholder mark cleared; Detail the name
	SettingSet       = "setting.set"       // a global setting; Detail key=value or key cleared
	ProjectTrust     = "project.trust"     // a project's devcontainer.json approved; Detail the file and digest
	ProjectSetting   = "project.setting"   // a project setting set or unset; Detail the key, never the value
	Refused          = "refused"           // a refusal; Detail its reason and text
	PortalSignIn     = "portal.signin"
	PortalSignOut    = "portal.signout"
)

// Actions lists every action, in the order of the documentation.
var Actions = []string{
	RuntimeCreated, RuntimeRecreated, RuntimeStopped, RuntimeRemoved,
	LimitsSet, LimitsBoost, DoorSet,
	VaultSet, VaultRemove, VaultPlaceholder, VaultUnmark,
	SettingSet, ProjectTrust, ProjectSetting, Refused, PortalSignIn, PortalSignOut,
}

// Event is one change. Its JSON form is the line in the log, what
// GET /v1/events streams and what hutch events --json prints.
type Event struct {
	// Time is when the change was made (UTC, RFC 3339 with nanoseconds).
	Time time.Time `json:"time"`
	// Surface is where it came from (Surface*).
	Surface string `json:"surface"`
	// Who made it, when known: a portal user, a chat's user.
	Who string `json:"who,omitempty"`
	// Action is one of Actions.
	Action string `json:"action"`
	// Target is what changed: a conversation ("platform/id"), an office
	// key, "global", or a project; empty when nothing in particular.
	Target string `json:"target,omitempty"`
	// Detail says what changed to what, or why: names and reasons only.
	Detail string `json:"detail,omitempty"`
}

// Bounds on an event's fields and line. A field past its bound is cut
// (at a rune boundary) and ends with "…".
const (
	MaxWho    = 128
	MaxTarget = 512
	MaxDetail = 1024
	// MaxLine bounds one line, newline included: under PIPE_BUF's 4096,
	// so one write(2) of it is one piece in every reader's view.
	MaxLine = 4096
)

// Bounded returns e with every field cut to its bound and invalid UTF-8
// replaced, so that its line stays under MaxLine.
func (e Event) Bounded() Event {
	e.Surface = cut(e.Surface, 16)
	e.Action = cut(e.Action, 32)
	e.Who = cut(e.Who, MaxWho)
	e.Target = cut(e.Target, MaxTarget)
	e.Detail = cut(e.Detail, MaxDetail)
	return e
}

// Line is e's line in the log: bounded JSON and a newline. Escaping can
// grow a field up to six times ("\u0001"), so the detail is cut further
// until the line fits.
func (e Event) Line() []byte {
	e = e.Bounded()
	for {
		b, err := json.Marshal(e)
		if err != nil { // only strings and a time: cannot fail
			b = []byte(`{}`)
		}
		if len(b)+1 <= MaxLine {
			return append(b, '\n')
		}
		switch {
		case len(e.Detail) > 16:
			e.Detail = cut(e.Detail, len(e.Detail)/2)
		case len(e.Target) > 16:
			e.Target = cut(e.Target, len(e.Target)/2)
		default:
			e.Who = cut(e.Who, len(e.Who)/2)
		}
	}
}

// Text is e in one line for people: time first.
func (e Event) Text() string {
	var b strings.Builder
	b.WriteString(e.Time.UTC().Format("2006-01-02T15:04:05Z"))
	b.WriteString(" " + quoteIfNeeded(e.Surface))
	if e.Who != "" {
		b.WriteString(" " + quoteIfNeeded(e.Who))
	}
	b.WriteString(" " + quoteIfNeeded(e.Action))
	if e.Target != "" {
		b.WriteString(" " + quoteIfNeeded(e.Target))
	}
	if e.Detail != "" {
		b.WriteString(": " + quoteIfNeeded(e.Detail))
	}
	return b.String()
}

// quoteIfNeeded quotes a field holding what could break the line or
// make it read otherwise than it is on a terminal: a control character
// (C0 or C1, some terminals act on U+009B), a line separator, or a
// format character such as a direction override. The quote escapes them
// all.
func quoteIfNeeded(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}

// cut returns s as valid UTF-8 of at most n bytes.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const ell = "…"
	n -= len(ell)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)] + ell
}

// Parse reads one line of the log; ok is false for a line that is not an
// event (torn by a crash, or not hutch's).
func Parse(line []byte) (Event, bool) {
	var e Event
	if err := json.Unmarshal(line, &e); err != nil || e.Action == "" || e.Time.IsZero() {
		return Event{}, false
	}
	return e, true
}

type actorKey struct{}

// Actor is who makes the changes of a context's call, and through what.
type Actor struct {
	Surface string
	Who     string
}

// WithActor returns ctx carrying a; the service reads it when it records
// what a call changed.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor ctx carries, if any.
func ActorFrom(ctx context.Context) (Actor, bool) {
	if ctx == nil {
		return Actor{}, false
	}
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

type targetKey struct{}

// targetSlot holds the target of a call, named once the call knows it.
type targetSlot struct {
	mu sync.Mutex
	v  string
}

// WithTargetSlot returns ctx with room for the target of its call: a
// surface makes it when a request comes in, and SetTarget fills it once
// the request names what it acts on, so that an event recorded without
// a target of its own (a refusal, which may come before or after that
// point) says what the call was about.
func WithTargetSlot(ctx context.Context) context.Context {
	return context.WithValue(ctx, targetKey{}, &targetSlot{})
}

// WithTarget returns ctx whose calls act on target.
func WithTarget(ctx context.Context, target string) context.Context {
	return context.WithValue(ctx, targetKey{}, &targetSlot{v: target})
}

// SetTarget names the target of ctx's call, in the slot WithTargetSlot
// made; without one it does nothing.
func SetTarget(ctx context.Context, target string) {
	if t, ok := ctx.Value(targetKey{}).(*targetSlot); ok {
		t.mu.Lock()
		t.v = target
		t.mu.Unlock()
	}
}

// TargetFrom returns the target of ctx's call, "" when none is named.
func TargetFrom(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	t, ok := ctx.Value(targetKey{}).(*targetSlot)
	if !ok {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.v
}
