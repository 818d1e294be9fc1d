package sandbox

import (
	"context"
	"time"
)

// Limits are a runtime's resource ceilings. Zero fields mean "not set";
// EffectiveLimits fills them from defaults.
type Limits struct {
	// CPUs is a number of CPUs, fractions allowed (0.5 = half a CPU).
	CPUs float64 `json:"cpus,omitempty"`
	// MemoryBytes caps memory; swap is capped to the same (no swap).
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Pids caps the number of processes and threads (fork-bomb ceiling).
	Pids int64 `json:"pids,omitempty"`
}

// Over returns l with every unset field taken from base.
func (l Limits) Over(base Limits) Limits {
	if l.CPUs == 0 {
		l.CPUs = base.CPUs
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = base.MemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = base.Pids
	}
	return l
}

// RuntimeState is where a runtime is in its life.
type RuntimeState string

const (
	// StateRunning: the runtime is up and serves commands.
	StateRunning RuntimeState = "running"
	// StateStopped: the runtime exists but is stopped; the next command starts it.
	StateStopped RuntimeState = "stopped"
	// StateMissing: no runtime exists; the next command creates it.
	StateMissing RuntimeState = "missing"
)

// Status describes one managed runtime.
type Status struct {
	OfficeKey      string
	Platform       string
	ConversationID string
	// Name and ID identify the runtime in its engine.
	Name, ID string
	State    RuntimeState
	// Image is the reference the runtime was made from; ImageID its id.
	Image, ImageID string
	// Limits are in force now; Boosted and TempLimits say why they differ
	// from the base limits.
	Limits     Limits
	Boosted    bool
	TempLimits bool
	// LimitsApplied says how the change of limits that returned this
	// status took effect, where a mode has two ways: kube: "resized in
	// place" or "re-created" (a cluster without in-place resize, or a
	// node without room). Empty otherwise.
	LimitsApplied string
	StartedAt     time.Time
	// Fingerprint is the hash of what the runtime was built from.
	Fingerprint string
	// ActiveCommands counts commands running now (this process only).
	ActiveCommands int
	// LastActivity is when the last command started or ended (zero: unknown).
	LastActivity time.Time
	// Recreated is when the runtime was last re-created, and
	// RecreatedBecause why ("what it was built from changed (mounts)");
	// zero and empty when it never was, or the mode cannot tell.
	Recreated        time.Time
	RecreatedBecause string
}

// Keys of the labels (image:) or annotations (kube:) a re-created
// runtime carries: when (RFC 3339) and why it was re-created.
const (
	LabelRecreatedAt      = "hutch.recreated-at"
	LabelRecreatedBecause = "hutch.recreated-because"
)

// MarkRecreated records in labels or annotations m that the runtime they
// describe was re-created at at, because of because.
func MarkRecreated(m map[string]string, at time.Time, because string) {
	m[LabelRecreatedAt] = at.UTC().Format(time.RFC3339)
	m[LabelRecreatedBecause] = because
}

// RecreatedFrom reads what MarkRecreated recorded in m (zero and empty
// when nothing or something unreadable is there).
func RecreatedFrom(m map[string]string) (time.Time, string) {
	at, err := time.Parse(time.RFC3339, m[LabelRecreatedAt])
	if err != nil {
		return time.Time{}, ""
	}
	return at, m[LabelRecreatedBecause]
}

// Change is what a managed mode tells its Changed hook when it makes or
// replaces an office's runtime, for the event log.
type Change struct {
	// Event is "created" or "recreated".
	Event string
	// OfficeKey names the runtime's office.
	OfficeKey string
	// Because says why a runtime was re-created: what MarkRecreated
	// records on it ("what it was built from changed (mounts)").
	Because string
	// From says where a created runtime came from when it was not made
	// for the office then: FromWarmPool.
	From string
}

// FromWarmPool is Change.From of a runtime handed out of image mode's
// warm pool.
const FromWarmPool = "from the warm pool"

// Made is the Change of a runtime just made for key: re-created when
// because (what MarkRecreated recorded) says why, else created.
func Made(key, because string) Change {
	if because != "" {
		return Change{Event: "recreated", OfficeKey: key, Because: because}
	}
	return Change{Event: "created", OfficeKey: key}
}

// LimitsAppliedRecreated is Status.LimitsApplied for a runtime that was
// re-created to take new limits.
const LimitsAppliedRecreated = "re-created"

// AppliedNote is the sentence that tells a user a change of limits
// re-created the runtime (what it wrote outside its mounts is gone), or
// "" when the limits changed in place.
func (s Status) AppliedNote() string {
	if s.LimitsApplied != LimitsAppliedRecreated {
		return ""
	}
	return "The cluster could not resize the runtime in place, so it was re-created with the new limits: what it wrote outside its office and mounts is gone."
}

// Lifecycle is implemented by modes whose runtimes hutch manages (found
// by type assertion on a Runtime). Errors: errdefs.ErrNotFound when the
// office has no runtime; errdefs.ErrUnavailable when the engine is gone.
type Lifecycle interface {
	// List returns every runtime this hutch manages.
	List(ctx context.Context) ([]Status, error)
	// Status returns one office's runtime (State missing when there is none).
	Status(ctx context.Context, officeKey string) (Status, error)
	// Stop stops an office's runtime; the next command starts it again.
	// Boosts and temporary limits end with it.
	Stop(ctx context.Context, officeKey string) error
	// Remove deletes an office's runtime (its writable layer included) and
	// its network; the office directory and vault stay.
	Remove(ctx context.Context, officeKey string) error
	// Boost raises an office's limits to boost until its runtime stops.
	Boost(ctx context.Context, officeKey string, boost Limits) (Status, error)
	// SetLimits sets temporary limits until the runtime stops; set fields
	// override, zero fields keep the current value.
	SetLimits(ctx context.Context, officeKey string, limits Limits) (Status, error)
	// StopIdle stops every runtime idle for longer than idle: no command
	// running and none started within idle. It returns the stopped keys.
	StopIdle(ctx context.Context, idle time.Duration) ([]string, error)
}

// Usage is one reading of a runtime's resource use.
type Usage struct {
	// Instance names what was measured (a container, a pod, a VM). CPU
	// times compare only between readings of one instance: a re-created
	// runtime counts from zero again.
	Instance string
	// CPU is the CPU time the runtime has used since it started. Clock is
	// read with it, from a clock that advances a second per second; the
	// CPU use between two readings is their CPU delta over their Clock
	// delta (1 is one CPU busy). Reading both where they are counted keeps
	// the network's delays out of the figure.
	CPU, Clock time.Duration
	// Memory is memory in use, less the file cache the kernel drops before
	// it runs out (as docker stats counts it); MemoryLimit is the cgroup's
	// limit, 0 when it has none.
	Memory, MemoryLimit uint64
	// Pids counts processes and threads; PidsLimit is 0 when unlimited.
	Pids, PidsLimit uint64
}

// UsageReader is implemented by the managed modes whose runtimes' resource
// use can be read (found by type assertion on a Lifecycle). Reading never
// counts as use of the runtime: it starts nothing and moves no idle clock.
// Errors: errdefs.ErrNotFound when the office's runtime is not running.
type UsageReader interface {
	Usage(ctx context.Context, officeKey string) (Usage, error)
}

// DiskEnforcer is implemented by the managed modes whose engine cannot
// cap what a runtime writes outside its mounts on this host (image: an
// overlay on a filesystem without project quotas), so hutch counts it.
// EnforceDisk stops every running runtime of this installation that
// holds more than ceiling bytes outside its office and mounts, and
// returns their keys; such a runtime does not start again (the next
// command is refused with errdefs.ErrFailedPrecondition) until it is
// removed or the ceiling raised. Found by type assertion on a Lifecycle.
type DiskEnforcer interface {
	EnforceDisk(ctx context.Context, ceiling int64) ([]string, error)
}

// Checker is implemented by modes that can tell, before a daemon serves
// anything, whether they can work here: the engine answers and the image
// is present, the operator's container exists and runs, the bridge
// answers its health check, the guest assets are whole, the cluster's API
// server answers. Found by type assertion on a Runtime; a mode without it
// has nothing to check.
type Checker interface {
	Check(ctx context.Context) error
}

// ReconcileReport says what a Reconcile did.
type ReconcileReport struct {
	// Adopted are offices whose existing runtimes this process now tracks.
	Adopted []string
	// Removed are runtimes (by office) removed because no office accounts for them.
	Removed []string
}

// Reconciler is implemented by the managed modes (found by type
// assertion): at start, Reconcile adopts the runtimes of the offices known
// reports true for (their idle clocks start then) and removes what this
// installation made for offices it can no longer account for.
type Reconciler interface {
	Reconcile(ctx context.Context, known func(officeKey string) bool) (ReconcileReport, error)
}
