package service

import (
	"cmp"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/settings"
	"github.com/hutchsandbox/hutch/internal/vault"
	"github.com/hutchsandbox/hutch/internal/workspace"
)

// RuntimeRoot is where managed runtimes see the workspace.
const RuntimeRoot = "/workspace"

// Service performs hutch's operations over one Layout.
type Service struct {
	layout        Layout
	log           *slog.Logger
	registry      *office.Registry
	vaults        *vault.Store
	getenv        func(string) string
	agentOverride string
	rt            runtimes
	metrics       *metrics.Set
	// operator is who runs the command, for the events of surface cli.
	operator string
	events   *events.Log
	surface  string // of changes whose context names none
	// refusalLog bounds how many refusals a second reach the event log
	// (each is a write and an fsync); the metrics count every one.
	refusalLog refusalLimiter

	// The egress proxies of relaying runtimes (egress.go), made once.
	relaysMu sync.Mutex
	relays   *egress.Relays
	// egressRoots, when set, is what the proxies verify upstreams
	// against instead of the system's roots (tests).
	egressRoots *x509.CertPool
}

// SetEgressRoots makes the egress proxies verify upstream servers against
// roots instead of the system's (tests run their own CA).
func (s *Service) SetEgressRoots(roots *x509.CertPool) { s.egressRoots = roots }

// SetMetrics makes the service record commands and runtime events in m
// (the daemon does; one-shot CLI commands do not).
func (s *Service) SetMetrics(m *metrics.Set) { s.metrics = m }

// New returns a Service over layout. A nil logger discards.
func New(layout Layout, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		layout:   layout,
		log:      log,
		registry: office.NewRegistry(layout.StateDir),
		vaults:   vault.NewStore(layout.StateDir),
		events:   events.Open(layout.StateDir),
		surface:  events.SurfaceCLI,
		getenv:   os.Getenv,

		refusalLog: refusalLimiter{limit: rate.NewLimiter(refusalEventsPerSecond, 2*refusalEventsPerSecond), every: refusalSourceEvery},
	}
}

// Layout returns the state dir and workspace the service works on.
func (s *Service) Layout() Layout { return s.layout }

// Offices returns every registered office, sorted.
func (s *Service) Offices() ([]office.OfficeRecord, error) {
	return s.registry.Offices()
}

// OfficeView is v of the registry's current version, built once per
// version of the file (office.View).
func OfficeView[T any](s *Service, v *office.View[T]) (T, error) {
	return v.Of(s.registry)
}

// Policy is a conversation's effective door policy and what it projects.
type Policy struct {
	Address  office.Address
	Key      office.Key
	Dir      string
	StateDir string
	Decision projection.Decision
	// ChannelKind is the channel kind recorded for the conversation ("":
	// none, or unreadable), whatever the decision derived from.
	ChannelKind string
	// Mode is the mode the projection was planned for.
	Mode sandbox.Mode
	// Mounts is the projection as Mode's runtime sees it; empty when the
	// mode does not project the host workspace (Projection says why).
	Mounts []projection.Mount
	// Projection describes how Mode reaches the workspace, for display.
	Projection string
	// ManagedProjection: Mode mounts exactly Mounts, so it can enforce
	// any door (the seed's managedProjection; false for host, container
	// and cloudflare).
	ManagedProjection bool
	// Refusal is why Mode would refuse to run this conversation, or nil.
	Refusal error
	// VaultKey is the vault this conversation uses in Mode ("" = none).
	VaultKey string
	// Vault lists the vault's entries, names only.
	Vault []vault.Entry
	// Network is the conversation's effective egress policy in Mode.
	Network settings.Network
	// Placeholders are the vault's entries marked to reach commands as
	// placeholders, by name.
	Placeholders map[string]vault.Placeholder
	// settings are the global runtime settings Resolve read, which a
	// command's limits and time zone come from.
	settings settings.Runtime
}

// Resolve computes a conversation's effective policy under mode without
// changing anything on disk.
func (s *Service) Resolve(addr office.Address, mode sandbox.Mode, user string) (Policy, error) {
	key := addr.Key()
	p := Policy{
		Address:  addr,
		Key:      key,
		Dir:      office.Dir(s.layout.Workspace, key),
		StateDir: office.StateDir(s.layout.StateDir, key),
		Mode:     mode,
	}
	dec, kind, err := s.decide(key)
	if err != nil {
		return Policy{}, err
	}
	p.Decision, p.ChannelKind = dec, kind
	caps := sandbox.CapabilitiesOf(mode.Kind)
	p.ManagedProjection = caps.ManagedProjection()
	switch caps.Workspace {
	case sandbox.WorkspaceManaged:
		p.Mounts = projection.Plan(dec.Policy, s.layout.Workspace, string(key), RuntimeRoot)
		p.Projection = "managed: hutch mounts exactly these paths"
	case sandbox.WorkspaceHost:
		p.Mounts = projection.Plan(dec.Policy, s.layout.Workspace, string(key), s.layout.Workspace)
		p.Projection = "host: commands run on the host and see every host path; the plan below is what the policy grants"
	case sandbox.WorkspaceSelfManaged:
		p.Projection = "self-managed: the container sees whatever its operator mounted"
	case sandbox.WorkspaceNone:
		p.Projection = "none: the remote runtime does not see the host workspace"
	}
	if p.Network, p.settings, err = s.networkAndSettings(key, mode.Kind); err != nil {
		return Policy{}, err
	}
	p.VaultKey = s.vaultKey(mode, key, user)
	var hasFiles bool
	if p.VaultKey != "" {
		entries, err := s.vaults.List(p.VaultKey)
		if err != nil {
			return Policy{}, err
		}
		p.Vault = entries
		for _, e := range entries {
			if e.Kind != vault.EntryEnv {
				hasFiles = true
			}
		}
		if p.Placeholders, err = s.vaults.Placeholders(p.VaultKey); err != nil {
			return Policy{}, err
		}
	}
	p.Refusal = withReason(metrics.ReasonAdmission, sandbox.Admit(mode.Kind, caps, sandbox.Requirements{
		IsolatedOffice: dec.Policy.Isolated(),
		ReadOnlyMemory: dec.Policy.ReadOnlyMemory(),
		VaultFiles:     hasFiles,
		Network:        p.Network.Mode,
		Placeholders:   len(p.Placeholders) > 0,
	}))
	if p.Refusal == nil && caps.VaultFileMounts && hasFiles {
		plan, err := s.vaults.Plan(p.VaultKey)
		if err != nil {
			return Policy{}, err
		}
		var targets []string
		for _, m := range p.Mounts {
			targets = append(targets, m.RuntimePath)
		}
		p.Refusal = withReason(metrics.ReasonAdmission, vault.CheckTargets(plan.Files, targets))
	}
	return p, nil
}

// decide reads both settings scopes and the channel kind and resolves the
// door policy; it also returns the recorded kind ("" when none or
// unreadable). Malformed settings fail closed.
func (s *Service) decide(key office.Key) (projection.Decision, string, error) {
	global, err := settings.LoadWorkspace(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return projection.Decision{}, "", err
	}
	return s.decideWith(global, key)
}

// Door is a conversation's door decision and recorded channel kind.
type Door struct {
	Decision    projection.Decision
	ChannelKind string
	// Network is the conversation's egress policy in the mode Doors was
	// asked about.
	Network settings.Network
}

// Doors decides the door of each key with the global settings read once:
// what a list of offices shows, without what a command needs of each
// (mounts, vault), which Resolve adds.
func (s *Service) Doors(keys []office.Key, kind sandbox.Kind) ([]Door, error) {
	global, err := settings.LoadWorkspace(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return nil, err
	}
	globalRT, err := settings.LoadRuntime(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return nil, err
	}
	out := make([]Door, len(keys))
	for i, key := range keys {
		if out[i].Decision, out[i].ChannelKind, err = s.decideWith(global, key); err != nil {
			return nil, err
		}
		conv, err := settings.LoadRuntime(settings.ConversationPath(s.layout.StateDir, string(key)))
		if err != nil {
			return nil, err
		}
		out[i].Network = settings.ResolveNetwork(globalRT, conv, kind == sandbox.KindGondolin)
	}
	return out, nil
}

// decideWith is decide with the global settings already read.
func (s *Service) decideWith(global *projection.Setting, key office.Key) (projection.Decision, string, error) {
	conv, err := settings.LoadWorkspace(settings.ConversationPath(s.layout.StateDir, string(key)))
	if err != nil {
		return projection.Decision{}, "", err
	}
	platform, err := office.PlatformOf(key)
	if err != nil {
		return projection.Decision{}, "", err
	}
	kind, present, kerr := office.ReadChannelKind(s.layout.StateDir, key)
	ch := projection.ChannelState{Kind: kind, Present: present, Platform: string(platform)}
	if kerr != nil {
		ch = projection.ChannelState{Unreadable: true}
		kind = ""
	}
	dec, err := projection.Resolve(global, conv, ch)
	if err == nil && dec.Warning != "" {
		s.log.Warn(dec.Warning, "office_key", string(key), "error", kerr)
	}
	return dec, kind, err
}

// vaultKey is the vault a mode uses for a conversation: the platform user
// in host mode, the container in container mode, the office otherwise.
func (s *Service) vaultKey(mode sandbox.Mode, key office.Key, user string) string {
	switch mode.Kind {
	case sandbox.KindHost:
		if user == "" {
			return ""
		}
		return vault.UserKey(user)
	case sandbox.KindContainer:
		return vault.ContainerKey(mode.Target)
	default:
		return string(key)
	}
}

// SetDoor sets (or with nil clears) the door policy of one conversation.
func (s *Service) SetDoor(ctx context.Context, addr office.Address, setting *projection.Setting) error {
	key := addr.Key()
	if _, err := s.registry.Record(addr); err != nil {
		return err
	}
	if _, err := office.EnsureStateDir(s.layout.StateDir, key); err != nil {
		return err
	}
	if err := settings.SetWorkspace(settings.ConversationPath(s.layout.StateDir, string(key)), setting); err != nil {
		return err
	}
	s.Record(ctx, events.DoorSet, addr.String(), doorDetail(setting))
	return nil
}

// BusyMessage refuses a change that must wait for a running command.
const BusyMessage = "Conversation is busy; retry when the current run finishes"

// Busy reports whether a command runs in the conversation's runtime in
// mode. Only the managed modes count commands; the others have no runtime
// of the conversation's own and are never busy.
func (s *Service) Busy(ctx context.Context, mode sandbox.Mode, addr office.Address) (bool, error) {
	if !sandbox.CapabilitiesOf(mode.Kind).ManagedLifecycle {
		return false, nil
	}
	m, err := s.ManagedFor(ctx, mode)
	if err != nil {
		return false, err
	}
	return BusyIn(ctx, m, addr)
}

// BusyIn reports whether a command runs in the conversation's runtime of
// the lifecycle lc (for callers that hold one already).
func BusyIn(ctx context.Context, lc sandbox.Lifecycle, addr office.Address) (bool, error) {
	st, err := lc.Status(ctx, string(addr.Key()))
	if err != nil {
		return false, err
	}
	return st.ActiveCommands > 0, nil
}

// SetGlobalDoor sets (or with nil clears) the global door policy.
func (s *Service) SetGlobalDoor(ctx context.Context, setting *projection.Setting) error {
	if err := settings.SetWorkspace(settings.GlobalPath(s.layout.StateDir), setting); err != nil {
		return err
	}
	s.Record(ctx, events.DoorSet, "global", doorDetail(setting))
	return nil
}

// SetChannelKind records the platform's channel kind of a conversation,
// which the door policy derives from when no setting is explicit.
func (s *Service) SetChannelKind(addr office.Address, kind string) error {
	k, err := projection.ParseChannelKind(kind)
	if err != nil {
		return err
	}
	if _, err := s.registry.Record(addr); err != nil {
		return err
	}
	return office.WriteChannelKind(s.layout.StateDir, addr.Key(), string(k))
}

// VaultTarget names a vault: exactly one of its fields is set.
type VaultTarget struct {
	Conversation *office.Address
	User         string
	Container    string
}

// VaultKey resolves a target to its vault key.
func (t VaultTarget) VaultKey() (string, error) {
	n := 0
	if t.Conversation != nil {
		n++
	}
	if t.User != "" {
		n++
	}
	if t.Container != "" {
		n++
	}
	if n != 1 {
		return "", errdefs.New(errdefs.ErrInvalid, "Name exactly one vault: <platform>/<conversation-id>, --user ID or --container NAME")
	}
	switch {
	case t.Conversation != nil:
		return string(t.Conversation.Key()), nil
	case t.User != "":
		return vault.UserKey(t.User), nil
	default:
		return vault.ContainerKey(t.Container), nil
	}
}

// Vaults returns the vault store, for reading: its changes go through
// the Vault* methods, which record them.
func (s *Service) Vaults() *vault.Store { return s.vaults }

// VaultSetEnv sets variables in the vault key (vault.Store.SetEnv) and
// records their names.
func (s *Service) VaultSetEnv(ctx context.Context, key string, vars map[string]string) error {
	if err := s.vaults.SetEnv(key, vars); err != nil {
		return err
	}
	s.Record(ctx, events.VaultSet, key, namesDetail(vars))
	return nil
}

// VaultPutFile stores a credential file (vault.Store.PutFile) and records
// its name.
func (s *Service) VaultPutFile(ctx context.Context, key, name, source string) error {
	if err := s.vaults.PutFile(key, name, source); err != nil {
		return err
	}
	s.Record(ctx, events.VaultSet, key, "file "+name)
	return nil
}

// VaultRemove removes a variable or file (vault.Store.Remove) and records
// its name.
func (s *Service) VaultRemove(ctx context.Context, key, name string) error {
	if err := s.vaults.Remove(key, name); err != nil {
		return err
	}
	s.Record(ctx, events.VaultRemove, key, name)
	return nil
}

// VaultSetPlaceholder marks a variable as a placeholder
// (vault.Store.SetPlaceholder) and records its name and hosts.
func (s *Service) VaultSetPlaceholder(ctx context.Context, key, name string, hosts []string, expires time.Time, body bool) (vault.Placeholder, error) {
	m, err := s.vaults.SetPlaceholder(key, name, hosts, expires, body)
	if err != nil {
		return m, err
	}
	s.Record(ctx, events.VaultPlaceholder, key, placeholderDetail(name, hosts, expires))
	return m, nil
}

// VaultClearPlaceholder clears a placeholder mark
// (vault.Store.ClearPlaceholder) and records its name.
func (s *Service) VaultClearPlaceholder(ctx context.Context, key, name string) error {
	if err := s.vaults.ClearPlaceholder(key, name); err != nil {
		return err
	}
	s.Record(ctx, events.VaultUnmark, key, name)
	return nil
}

// ExecOptions is one `hutch exec`.
type ExecOptions struct {
	Address office.Address
	Mode    sandbox.Mode
	// User is the platform user whose host vault applies in host mode.
	User        string
	Argv        []string
	Dir         string
	Timeout     time.Duration
	OutputLimit int64
	Stdin       io.Reader
	Stdout      io.Writer
	Stderr      io.Writer
	// TimeZone, when set, is the command's TZ instead of sandbox.timezone
	// (a bridge passes its caller's); a TZ in the env still wins.
	TimeZone string
	// Env is extra env for this command only, merged over the vault env
	// (a name in both takes this value). It is injected in every mode,
	// host included, because the caller asked for it; a runtime that
	// cannot inject env refuses the command rather than run without it.
	// Like vault env, its values are never logged.
	Env map[string]string
}

// Exec admits, prepares and runs one command. Refusals come before any
// directory is created or any process starts.
func (s *Service) Exec(ctx context.Context, o ExecOptions) (sandbox.ExecResult, error) {
	if len(o.Argv) == 0 {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "No command given; put it after --, e.g. hutch exec --conversation slack/C1 -- ls -la")
	}
	// Bad input is not a command: it is refused before anything counts it.
	if err := CheckArgv(o.Argv); err != nil {
		return sandbox.ExecResult{}, err
	}
	if o.User != "" {
		if err := ValidateUser(o.User); err != nil {
			return sandbox.ExecResult{}, err
		}
	}
	start := time.Now()
	p, err := s.prepare(ctx, o.Address, o.Mode, o.User)
	if err != nil {
		s.metrics.Command(o.Mode.Kind, sandbox.ExecResult{}, err, errdefs.IsFailedPrecondition(err), 0)
		return sandbox.ExecResult{}, err
	}
	env := p.env
	if len(o.Env) > 0 {
		env = make(map[string]string, len(p.env)+len(o.Env))
		maps.Copy(env, p.env)
		maps.Copy(env, o.Env)
	}
	req := sandbox.ExecRequest{
		Argv:        o.Argv,
		Dir:         o.Dir,
		Env:         env,
		TimeZone:    cmp.Or(o.TimeZone, p.timeZone),
		Stdin:       o.Stdin,
		Stdout:      o.Stdout,
		Stderr:      o.Stderr,
		Timeout:     o.Timeout,
		OutputLimit: o.OutputLimit,
	}
	s.log.Debug("exec", "office_key", p.spec.OfficeKey, "mode", o.Mode.String(), "policy", p.pol.Decision.Policy.String(), "env_keys", sortedKeys(req.Env))
	res, err := p.rt.Exec(ctx, p.spec, req)
	s.metrics.Command(o.Mode.Kind, res, err, false, time.Since(start))
	return res, err
}

// MaxArgBytes is the longest one argument of a command may be: Linux's
// MAX_ARG_STRLEN (32 pages, the terminating NUL included), which execve
// enforces in every mode, since every mode's command ends in an execve on
// a Linux kernel. A shell string is one argument (of sh -c).
const MaxArgBytes = 32*4096 - 1

// MaxArgvBytes bounds a command's arguments together. Linux takes argv
// and the environment together up to a quarter of the stack limit (2 MiB
// with the usual 8 MiB); half of that leaves room for the vault env.
const MaxArgvBytes = 1 << 20

// CheckArgv refuses, as invalid, a command no runtime could start: a
// blank shell string, an empty program name, a NUL byte (execve ends an
// argument there) or arguments longer than the kernel takes. Without this
// the runtime's failure would reach the caller as an error of the runtime
// ("unavailable", which says to retry), or as a shell's complaint. The
// texts name no part of the command: a command line may carry a secret.
func CheckArgv(argv []string) error {
	if len(argv) == 0 {
		return errdefs.New(errdefs.ErrInvalid, "No command given")
	}
	name := func(i int) string {
		if len(argv) == 1 {
			return "The command"
		}
		return fmt.Sprintf("argv[%d]", i)
	}
	if len(argv) == 1 && strings.TrimSpace(argv[0]) == "" {
		return errdefs.New(errdefs.ErrInvalid, "The command is blank: give the shell string to run")
	}
	if len(argv) > 1 && strings.TrimSpace(argv[0]) == "" {
		return errdefs.New(errdefs.ErrInvalid, "argv[0] is empty: name the program to run")
	}
	total := 0
	for i, a := range argv {
		if len(a) > MaxArgBytes {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is %d bytes; one argument can be at most %d bytes (Linux's MAX_ARG_STRLEN): pass a long script or data on stdin instead", name(i), len(a), MaxArgBytes))
		}
		if strings.IndexByte(a, 0) >= 0 {
			return errdefs.New(errdefs.ErrInvalid, name(i)+" contains a NUL byte, which no argument can carry: pass such data on stdin")
		}
		total += len(a) + 1
	}
	if total > MaxArgvBytes {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("The command's arguments are %d bytes together; at most %d fit: pass large data on stdin instead", total, MaxArgvBytes))
	}
	return nil
}

// MaxUserBytes bounds a platform user id, as office.MaxConversationIDBytes
// bounds a conversation id.
const MaxUserBytes = 256

// ValidateUser checks the platform user id whose vault host mode uses.
// The vault key hashes the id's bytes, so an id with U+FFFD (what a
// decoder puts in place of bytes that are not UTF-8) could name another
// user's vault; control and bidirectional characters would garble the
// logs and listings that show it. Errors are of class errdefs.ErrInvalid.
func ValidateUser(user string) error {
	invalid := func(msg string) error { return errdefs.New(errdefs.ErrInvalid, msg) }
	switch {
	case strings.TrimSpace(user) == "":
		return invalid("User id must not be blank")
	case len(user) > MaxUserBytes:
		return invalid(fmt.Sprintf("User id must be at most %d bytes", MaxUserBytes))
	case !utf8.ValidString(user):
		return invalid("User id must be valid UTF-8")
	}
	for _, r := range user {
		switch {
		case r <= 0x1f || (r >= 0x7f && r <= 0x9f):
			return invalid("User id must not contain control characters")
		case r == utf8.RuneError:
			return invalid("User id must not contain U+FFFD, the character a decoder puts in place of bytes that are not valid UTF-8")
		case r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			return invalid("User id must not contain bidirectional control characters (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069)")
		}
	}
	return nil
}

// prepared is one conversation ready to run in one mode.
type prepared struct {
	pol  Policy
	rt   sandbox.Runtime
	spec sandbox.Spec
	// env is the vault env of each command (nil where the mode injects none).
	env map[string]string
	// timeZone is sandbox.timezone, every command's TZ unless env sets one.
	timeZone string
}

// prepare admits a conversation in a mode and makes what it needs on
// the host: the registry record, the office, the shared support paths.
func (s *Service) prepare(ctx context.Context, addr office.Address, mode sandbox.Mode, user string) (*prepared, error) {
	pol, err := s.Resolve(addr, mode, user)
	if err != nil {
		return nil, err
	}
	if pol.Refusal != nil {
		return nil, pol.Refusal
	}
	rt, err := s.runtime(ctx, mode)
	if err != nil {
		return nil, err
	}
	if err := workspace.EnsureRoot(s.layout.Workspace); err != nil {
		return nil, err
	}
	dir, err := office.Ensure(s.registry, s.layout.Workspace, addr)
	if err != nil {
		return nil, err
	}
	if _, err := office.EnsureStateDir(s.layout.StateDir, pol.Key); err != nil {
		return nil, err
	}
	if err := workspace.Materialize(pol.Mounts); err != nil {
		return nil, err
	}
	spec := sandbox.Spec{
		OfficeKey:         string(pol.Key),
		Platform:          string(addr.Platform),
		ConversationID:    addr.ConversationID,
		OfficeDir:         dir,
		OfficeRuntimePath: dir,
	}
	caps := rt.Capabilities()
	if caps.Workspace != sandbox.WorkspaceHost {
		// Managed runtimes mount the office there; an existing container
		// is expected to mount the workspace at the same place.
		spec.OfficeRuntimePath = path.Join(RuntimeRoot, string(pol.Key))
	}
	mounts := pol.Mounts
	if caps.Workspace == sandbox.WorkspaceSelfManaged {
		// An existing container manages its own mounts; it is expected to
		// have the workspace at /workspace, so the policy's plan there is
		// what file operations may reach.
		mounts = projection.Plan(pol.Decision.Policy, s.layout.Workspace, string(pol.Key), RuntimeRoot)
	}
	for _, m := range mounts {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{HostPath: m.HostPath, RuntimePath: m.RuntimePath, ReadOnly: m.ReadOnly})
	}
	// The vault env, with marked entries replaced by their placeholders:
	// the real values (secrets) go to the egress proxy, never into the
	// runtime.
	var env map[string]string
	var secrets []vault.Secret
	if (caps.VaultEnv || caps.VaultFileMounts) && pol.VaultKey != "" {
		if env, err = s.vaults.Env(pol.VaultKey); err != nil {
			return nil, err
		}
		env, secrets = vault.ApplyPlaceholders(env, pol.Placeholders)
	}
	if caps.VaultFileMounts && pol.VaultKey != "" {
		plan, err := s.vaults.Plan(pol.VaultKey)
		if err != nil {
			return nil, err
		}
		files := plan.Files
		if len(secrets) > 0 {
			// File credentials holding a marked value are mounted as
			// copies with the placeholder in its place.
			dir := filepath.Join(s.layout.RunDir, "vault-placeholders", string(pol.Key))
			if files, err = s.vaults.ProjectWithPlaceholders(files, secrets, dir); err != nil {
				return nil, err
			}
		}
		for _, f := range files {
			spec.VaultFiles = append(spec.VaultFiles, sandbox.Mount{HostPath: f.HostPath, RuntimePath: f.RuntimePath, ReadOnly: true})
		}
	}
	// The runtime settings Resolve read: limits and the time zone come
	// from them, as the network did.
	rs := pol.settings
	if caps.Limits {
		spec.Limits = sandbox.Limits{CPUs: rs.CPUs, MemoryBytes: rs.MemoryBytes, Pids: rs.Pids}
		spec.DiskCeiling = diskCeiling(rs)
	}
	spec.Network = pol.Network.Mode
	if pol.Network.Mode == netpolicy.ModeAllowlist {
		spec.NetworkAllow = pol.Network.Allow
	}
	spec.Placeholders = len(secrets) > 0
	p := &prepared{pol: pol, rt: rt, spec: spec, timeZone: rs.TimeZone}
	if caps.VaultEnv {
		p.env = env
	}
	return p, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Describe renders the policy origin for display.
func Describe(d projection.Decision) string {
	return fmt.Sprintf("%s (from %s)", d.Policy, d.Origin())
}
