package api

import (
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/hutchsandbox/hutch/internal/buildinfo"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// This file holds the types of the CLI's machine-readable output (--json)
// that the HTTP API answers too, the conversions both use so that the two
// never differ, and the types of the commands whose data the API does not
// serve (modes, doctor, project status and settings, migrate --dry-run):
// their schema lives here, next to the API's, so that one place documents
// every JSON hutch prints. Keys are lower camelCase; a key is added to,
// never renamed or removed. docs/api.md, "Machine-readable output", lists
// which command prints which type.

// OfficeList is GET /v1/offices's answer for svc's registry: a JSON array
// of OfficeEntry, the bytes the daemon serves (hutch office list --json
// prints them too).
func OfficeList(svc *service.Service) ([]byte, error) {
	return service.OfficeView(svc, officeListing)
}

// PolicyAnswerOf is pol as /v1/policy answers it (hutch office show
// --json prints it too).
func PolicyAnswerOf(pol service.Policy) PolicyAnswer {
	ans := PolicyAnswer{Conversation: pol.Address.String(), OfficeKey: string(pol.Key),
		OfficeDir: pol.Dir, StateDir: pol.StateDir, Sandbox: pol.Mode.String(),
		Policy: pol.Decision.Policy.String(), Origin: pol.Decision.Origin(),
		Warning: pol.Decision.Warning, Mounts: []Mount{}, Projection: pol.Projection,
		ManagedProjection: pol.ManagedProjection}
	if fi, err := os.Lstat(pol.Dir); err == nil && fi.IsDir() {
		ans.OfficeDirExists = true
	}
	if pol.VaultKey != "" {
		v := &VaultSummary{Key: pol.VaultKey}
		for _, e := range pol.Vault {
			if e.Kind == vault.EntryEnv {
				v.Env++
			} else {
				v.Files++
			}
		}
		ans.Vault = v
	}
	for _, m := range pol.Mounts {
		ans.Mounts = append(ans.Mounts, Mount{HostPath: m.HostPath, RuntimePath: m.RuntimePath, ReadOnly: m.ReadOnly})
	}
	if pol.Refusal != nil {
		ans.Refusal = pol.Refusal.Error()
	}
	return ans
}

// VaultEntries is a vault's listing as /v1/vault/list answers it: names
// and kinds, never values, and the placeholder marks of its variables
// as of now (hutch vault ls --json prints it too). Never nil, so an
// empty vault is [].
func VaultEntries(entries []vault.Entry, marks map[string]vault.Placeholder, now time.Time) []VaultEntry {
	out := []VaultEntry{}
	for _, e := range entries {
		ve := VaultEntry{Name: e.Name, Kind: string(e.Kind)}
		if m, ok := marks[e.Name]; ok && e.Kind == vault.EntryEnv {
			p := &VaultPlaceholder{Hosts: slices.Clone(m.Hosts), Body: m.Body}
			if !m.Expires.IsZero() {
				at := m.Expires.UTC()
				p.Expires, p.Expired = &at, m.Expired(now)
			}
			ve.Placeholder = p
		}
		out = append(out, ve)
	}
	return out
}

// BuildVersion is this binary's build (buildinfo.Read); version is its
// -ldflags version ("dev" by default).
func BuildVersion(version string) Version { return buildinfo.Read(version) }

// VersionOf is what bi (nil: none) says of a build (buildinfo.Of).
func VersionOf(version string, bi *debug.BuildInfo) Version { return buildinfo.Of(version, bi) }

func (s *Server) version(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, BuildVersion(s.Version))
	return nil
}

// VersionReport is hutch version --json: this binary's build and, when a
// daemon answers on the state dir's socket, the daemon's.
type VersionReport struct {
	// Client is the hutch binary that ran the command.
	Client Version `json:"client"`
	// Daemon is the daemon's answer to GET /v1/version; absent when no
	// daemon answers. A daemon that answers /v1/health but not
	// /v1/version (older than this route) has only Version set.
	Daemon *Version `json:"daemon,omitempty"`
}

// ModeInfo is one sandbox mode as hutch modes --json lists it: an array
// of ModeInfo, one per mode, in the order of the text table.
type ModeInfo struct {
	// Mode is the mode as --sandbox takes it, with a placeholder for its
	// target: host, container:<name>, image:<image>, cloudflare:<id>,
	// gondolin:default, kube:<image>.
	Mode string `json:"mode"`
	// Kind is the mode's kind alone: host, container, image, cloudflare,
	// gondolin, kube.
	Kind string `json:"kind"`
	// Capabilities is what the mode can enforce; false is a refusal,
	// never a silent downgrade.
	Capabilities ModeCapabilities `json:"capabilities"`
	// Recommendation is the mode's standing, as the table's last row.
	Recommendation string `json:"recommendation"`
	// Needs says what the mode needs before its first command runs.
	Needs string `json:"needs"`
}

// ModeCapabilities are a mode's capabilities (sandbox.Capabilities), one
// key per row of hutch modes' table.
type ModeCapabilities struct {
	// CommandExecution: the mode runs commands at all.
	CommandExecution bool `json:"commandExecution"`
	// ManagedLifecycle: hutch creates, stops and re-creates the runtime.
	ManagedLifecycle bool `json:"managedLifecycle"`
	// PerConversationRuntime: each conversation gets a runtime of its own.
	PerConversationRuntime bool `json:"perConversationRuntime"`
	// VaultEnv: vault env variables are injected into each command.
	VaultEnv bool `json:"vaultEnv"`
	// PerConversationVault: the vault is keyed by the conversation's
	// office (otherwise by the platform user or the container name).
	PerConversationVault bool `json:"perConversationVault"`
	// VaultFileMounts: vault files are projected into the runtime.
	VaultFileMounts bool `json:"vaultFileMounts"`
	// Workspace is how the runtime reaches the host workspace.
	Workspace string `json:"workspace"`
	// IsolatedOffice: the runtime can be limited to the conversation's
	// office.
	IsolatedOffice bool `json:"isolatedOffice"`
	// ReadOnlyMemory: the shared MEMORY.md can be mounted read-only.
	ReadOnlyMemory bool `json:"readOnlyMemory"`
	// IdleStop: idle runtimes stop and are re-created on the next command.
	IdleStop bool `json:"idleStop"`
	// Limits: CPU, memory and process limits are enforced.
	Limits bool `json:"limits"`
	// Boost: a conversation's limits can be raised for a while.
	Boost bool `json:"boost"`
	// Egress lists the sandbox.network modes the runtime can enforce
	// (open, allowlist, none).
	Egress []string `json:"egress"`
	// PlaceholderSecrets: vault entries marked as placeholders reach
	// commands as placeholders.
	PlaceholderSecrets bool `json:"placeholderSecrets"`
}

// DoctorCheck is one line of hutch doctor; hutch doctor --json prints an
// array of them, in the order of the text report.
type DoctorCheck struct {
	// Name is what was checked: engine, podman, kvm, qemu, cgroup, state
	// dir, network, or "mode <mode>" for each sandbox mode.
	Name string `json:"name"`
	// Status is ok, missing (not there; the detail says what needs it),
	// bad (there but unusable) or no (a mode that cannot run here).
	Status string `json:"status"`
	// Detail says what was found, or why not.
	Detail string `json:"detail"`
}

// ProjectStatus is hutch project status --json: the project's sandbox
// container, as the text report shows it.
type ProjectStatus struct {
	// Project is the checkout's root directory.
	Project string `json:"project"`
	// Engine is the container engine and its version, e.g. "docker 28.1.1".
	Engine string `json:"engine"`
	// Container is the sandbox container's name (an editor's container,
	// when one runs for the project).
	Container string `json:"container"`
	// State is running, stopped or missing.
	State string `json:"state"`
	// Owner is who made the container: hutch, external (an editor's,
	// never stopped or removed by hutch), unknown, or "" when missing.
	Owner string `json:"owner"`
	// Users is how many sessions (shells, agents) are attached.
	Users int `json:"users"`
	// Image is the image the container runs, or while it is missing the
	// one it would be made from ("... (generated)" for the image hutch
	// builds from the settings).
	Image string `json:"image"`
	// Limits are the memory, CPU and process caps, as text.
	Limits string `json:"limits"`
	// Network is sandbox-network, and under allowlist the hosts it lets
	// through.
	Network string `json:"network"`
	// Enabled is sandbox-enabled for this project.
	Enabled bool `json:"enabled"`
	// Persist is sandbox-persist: the container is kept when the last
	// user leaves.
	Persist bool `json:"persist"`
	// Notes are what the sandbox could not apply or wants the user to
	// know; never null.
	Notes []string `json:"notes"`
}

// ProjectSettings is hutch project settings --json: every sandbox-*
// setting of the project with its effective value and origin.
type ProjectSettings struct {
	// Project is the checkout's root directory.
	Project string `json:"project"`
	// SettingsFile is the user's settings file the values came from.
	SettingsFile string `json:"settingsFile"`
	// Settings are the keys in the order of the text table.
	Settings []ProjectSetting `json:"settings"`
	// Notes are entries that could not be used; never null.
	Notes []string `json:"notes"`
}

// ProjectSetting is one sandbox-* setting.
type ProjectSetting struct {
	// Key is the setting's name, e.g. sandbox-memory.
	Key string `json:"key"`
	// Value is its effective value, as the text table shows it.
	Value string `json:"value"`
	// From is where the value came from: default, the settings file, or
	// the file's override for this project.
	From string `json:"from"`
}

// MigratePlan is hutch migrate --dry-run --json: what a migration would
// do, and what would stop it. The command exits 1 when Blockers is not
// empty, after printing the plan.
type MigratePlan struct {
	// Workspace is the workspace root the plan is for.
	Workspace string `json:"workspace"`
	// Platforms are the enabled platforms the owners were chosen among.
	Platforms []string `json:"platforms"`
	// Moves are the conversation directories that would move to their
	// offices.
	Moves []MigrateMove `json:"moves"`
	// Steps is every step in order (interrupted moves finished, moves,
	// vault and host state moves), as the text plan lists them.
	Steps []string `json:"steps"`
	// Skipped are workspace entries left alone, with why.
	Skipped []MigrateSkip `json:"skipped"`
	// Blockers are what would stop the migration with nothing moved; the
	// text plan's summary says what to do about each kind.
	Blockers []string `json:"blockers"`
}

// MigrateMove is the move of one raw-id conversation directory.
type MigrateMove struct {
	// RawID is the conversation's raw id (the directory's name).
	RawID string `json:"rawId"`
	// Platform is the platform that owns it.
	Platform string `json:"platform"`
	// OfficeKey is the office it becomes.
	OfficeKey string `json:"officeKey"`
	// Source and Target are the directory before and after.
	Source string `json:"source"`
	Target string `json:"target"`
}

// MigrateSkip is a workspace entry a migration leaves alone.
type MigrateSkip struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}
