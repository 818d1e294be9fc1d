package microvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// Name is how a VM is named in listings.
func Name(key string) string { return "hutch-vm-" + key }

// List returns every office with a VM or a root disk of this state dir.
func (r *Runtime) List(ctx context.Context) ([]sandbox.Status, error) {
	keys := map[string]bool{}
	for _, s := range r.sessions.All() {
		s.Lock()
		if s.vm != nil {
			keys[s.Key] = true
		}
		s.Unlock()
	}
	entries, err := os.ReadDir(filepath.Join(r.cfg.StateDir, "conversations"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list microVM disks: %w", err)
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(r.diskDir(e.Name()), "root.qcow2")); err == nil {
			keys[e.Name()] = true
		}
	}
	out := make([]sandbox.Status, 0, len(keys))
	for k := range keys {
		st, err := r.Status(ctx, k)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OfficeKey < out[j].OfficeKey })
	return out, nil
}

// Status describes one office's VM: running (in this process), stopped
// (its root disk exists) or missing.
func (r *Runtime) Status(_ context.Context, key string) (sandbox.Status, error) {
	out := sandbox.Status{OfficeKey: key, Name: Name(key), State: sandbox.StateMissing, Image: "gondolin:default"}
	if _, err := os.Stat(filepath.Join(r.diskDir(key), "root.qcow2")); err == nil {
		out.State = sandbox.StateStopped
	}
	if out.State == sandbox.StateStopped {
		// A stopped VM shows whose it is and the limits it boots with, as
		// its last boot recorded them: this process may have booted none
		// (a restart, or a CLI beside the daemon).
		b, err := r.lastBoot(key)
		if err != nil {
			return sandbox.Status{}, err
		}
		out.Platform, out.ConversationID, out.Limits = b.Platform, b.ConversationID, b.Limits
	}
	s, ok := r.sessions.Lookup(key)
	if !ok {
		return out, nil
	}
	s.Lock()
	defer s.Unlock()
	out.ActiveCommands, out.LastActivity = s.Active(), s.LastActivity()
	out.Recreated, out.RecreatedBecause = s.recreated, s.recreatedBecause
	if s.spec != nil {
		out.Platform, out.ConversationID = s.spec.Platform, s.spec.ConversationID
	}
	if v := s.vm; v != nil && v.alive() {
		out.State = sandbox.StateRunning
		out.ID = fmt.Sprint(v.qemu.Process.Pid)
		out.StartedAt = v.started
		out.Fingerprint = v.fingerprint
		out.Limits = v.limits
		out.Boosted, out.TempLimits = s.boost != nil, s.temp != nil
	}
	return out, nil
}

// Stop powers an office's VM off once no command runs in it; its root
// disk stays and the next command boots it again.
func (r *Runtime) Stop(ctx context.Context, key string) error {
	s := r.sessions.Get(key)
	s.Lock()
	defer s.Unlock()
	if s.vm == nil {
		if _, err := os.Stat(filepath.Join(r.diskDir(key), "root.qcow2")); err != nil {
			return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No runtime for office %s", key))
		}
		return nil
	}
	if err := s.WaitIdle(ctx); err != nil {
		return err
	}
	r.stopVMLocked(s, "stop")
	return nil
}

// Remove stops an office's VM and deletes its root disk. The office
// directory and the vault stay.
func (r *Runtime) Remove(ctx context.Context, key string) error {
	s := r.sessions.Get(key)
	s.Lock()
	defer s.Unlock()
	dd := r.diskDir(key)
	if _, err := os.Stat(dd); err != nil && s.vm == nil {
		return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No runtime for office %s", key))
	}
	if s.vm != nil {
		if err := s.WaitIdle(ctx); err != nil {
			return err
		}
		r.stopVMLocked(s, "remove")
	}
	if err := os.RemoveAll(dd); err != nil {
		return fmt.Errorf("remove the root disk of office %s: %w", key, err)
	}
	r.log.Info("removed microVM", "office_key", key)
	return nil
}

// Boost raises an office's limits until its VM stops. A VM's vCPUs and
// memory are fixed at boot, so the VM is replaced at once (after the
// commands in it end), keeping its root disk.
func (r *Runtime) Boost(ctx context.Context, key string, boost sandbox.Limits) (sandbox.Status, error) {
	if boost == (sandbox.Limits{}) {
		boost = r.cfg.Boost
	}
	return r.relimit(ctx, key, func(s *session) { s.boost = &boost })
}

// SetLimits sets temporary limits until the office's VM stops; like a
// boost, they replace the running VM.
func (r *Runtime) SetLimits(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	return r.relimit(ctx, key, func(s *session) {
		if s.temp != nil {
			l = l.Over(*s.temp)
		}
		s.temp = &l
	})
}

func (r *Runtime) relimit(ctx context.Context, key string, change func(*session)) (sandbox.Status, error) {
	s := r.sessions.Get(key)
	s.Lock()
	if s.vm == nil || !s.vm.alive() || s.spec == nil {
		s.Unlock()
		return sandbox.Status{}, sandbox.NotRunning(key)
	}
	if err := s.WaitIdle(ctx); err != nil {
		s.Unlock()
		return sandbox.Status{}, err
	}
	boost, temp := s.boost, s.temp
	r.stopVMLocked(s, "new limits")
	s.boost, s.temp = boost, temp
	change(s)
	s.markRecreated("its limits changed (a microVM's vCPUs and memory are fixed at boot)")
	r.log.Info("microVM limits change: booting a replacement", "office_key", key)
	_, err := r.ensureLocked(ctx, s, *s.spec)
	s.Unlock()
	if err != nil {
		return sandbox.Status{}, err
	}
	return r.Status(ctx, key)
}

// StopIdle stops every VM with no command running and none started
// within idle.
func (r *Runtime) StopIdle(ctx context.Context, idle time.Duration) ([]string, error) {
	var stopped []string
	for _, s := range r.sessions.All() {
		s.Lock()
		if s.vm != nil && s.IdleFor(idle) {
			r.stopVMLocked(s, "idle")
			stopped = append(stopped, s.Key)
		}
		s.Unlock()
	}
	return stopped, ctx.Err()
}

// Close stops every VM of this process, in parallel, syncing projected
// files back first. Commands still running are killed with their VM.
// Later commands are refused. It is what a daemon does on SIGTERM.
func (r *Runtime) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range r.sessions.All() {
		wg.Go(func() {
			s.Lock()
			defer s.Unlock()
			r.stopVMLocked(s, "shutdown")
		})
	}
	wg.Wait()
	return nil
}

// Reconcile runs at start. It ends the VMs a hutch that died left
// running (their records say which processes they were), and removes
// the root disks of offices it can no longer account for.
func (r *Runtime) Reconcile(ctx context.Context, known func(officeKey string) bool) (sandbox.ReconcileReport, error) {
	var rep sandbox.ReconcileReport
	dirs, err := os.ReadDir(filepath.Join(r.cfg.RunDir, "vm"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, fmt.Errorf("microVM run dirs: %w", err)
	}
	for _, e := range dirs {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(r.cfg.RunDir, "vm", e.Name())
		unlock, err := lockVM(dir)
		if err != nil {
			continue // a live hutch owns it
		}
		if key := r.endLeftover(dir); key != "" {
			rep.Removed = append(rep.Removed, key)
		}
		_ = os.RemoveAll(dir)
		unlock()
	}
	entries, err := os.ReadDir(filepath.Join(r.cfg.StateDir, "conversations"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, fmt.Errorf("microVM disks: %w", err)
	}
	for _, e := range entries {
		key := e.Name()
		if _, err := os.Stat(r.diskDir(key)); err != nil {
			continue
		}
		if known(key) {
			rep.Adopted = append(rep.Adopted, key)
			continue
		}
		if err := r.Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
			return rep, err
		}
		rep.Removed = append(rep.Removed, key)
	}
	return rep, nil
}

// endLeftover ends the processes a VM's record names, if they are still
// the ones recorded: first a clean power-off through the agent socket
// (the guest flushes its disk), then SIGKILL. It returns the office key
// when it ended anything. The caller holds the VM's lock.
func (r *Runtime) endLeftover(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, recordName))
	if err != nil {
		return ""
	}
	var rec record
	if json.Unmarshal(data, &rec) != nil {
		return ""
	}
	var live []procRef
	for _, p := range rec.Processes {
		if p.running() {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return ""
	}
	r.log.Warn("ending a microVM left running by a hutch process that died", "office_key", rec.OfficeKey, "owner_pid", rec.OwnerPID)
	sock := filepath.Join(dir, "agent.sock")
	cl := agent.NewClient(dialAgent(sock), r.log)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_ = cl.GuestPowerOff(ctx)
	cancel()
	_ = cl.Close()
	// virtiofsd ends with its VM; whatever still runs after the grace is
	// killed. The next boot opens the same disk, which QEMU locks, so
	// wait until the processes have exited (a zombie holds no files).
	waitGone(live, 5*time.Second)
	for _, p := range live {
		if p.running() {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	waitGone(live, 5*time.Second)
	return rec.OfficeKey
}

// waitGone waits up to d for every process of procs to have exited.
func waitGone(procs []procRef, d time.Duration) {
	deadline := time.Now().Add(d)
	for _, p := range procs {
		for p.running() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Check verifies, before a daemon starts in this mode, that the guest
// assets are there and intact.
func (r *Runtime) Check(context.Context) error {
	m, err := r.assets.load(r.cfg.AssetDir)
	if err != nil {
		return err
	}
	return r.assets.verify(r.cfg.AssetDir, m)
}

// bootName records, beside an office's root disk, whose VM it is and the
// limits it boots with, so a stopped VM is listed with them by a process
// that did not boot it (after a restart the list showed "/", 0 CPUs, 0B).
const bootName = "boot.json"

// bootRecord is bootName's content.
type bootRecord struct {
	Platform       string         `json:"platform"`
	ConversationID string         `json:"conversationId"`
	Limits         sandbox.Limits `json:"limits"`
}

// recordBoot writes the boot record of a VM about to boot for spec. The
// limits are the base ones (no boost or temporary limits: a stop ends
// those), rounded as a VM has them.
func (r *Runtime) recordBoot(key string, spec sandbox.Spec) error {
	l := spec.Limits.Over(managed.DefaultLimits)
	l.CPUs = float64(WholeCPUs(l.CPUs))
	l.MemoryBytes = max(l.MemoryBytes, minMemoryMiB<<20)
	data, err := json.Marshal(bootRecord{Platform: spec.Platform, ConversationID: spec.ConversationID, Limits: l})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(r.diskDir(key), bootName), append(data, '\n'), 0o600)
}

// lastBoot reads an office's boot record; a disk of an earlier release
// has none (zero values). One that cannot be read or parsed is an error
// naming it, as every state file's is: a guess would show wrong limits.
func (r *Runtime) lastBoot(key string) (bootRecord, error) {
	path := filepath.Join(r.diskDir(key), bootName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return bootRecord{}, nil
	}
	if err != nil {
		return bootRecord{}, fmt.Errorf("microVM boot record %s: %w", path, err)
	}
	var b bootRecord
	if err := json.Unmarshal(data, &b); err != nil {
		return bootRecord{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Malformed microVM boot record %s: %v", path, err))
	}
	return b, nil
}
