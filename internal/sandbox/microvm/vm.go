package microvm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
	"github.com/hutchsandbox/hutch/internal/microvm/qemu"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// vm is one running microVM and the processes that serve it.
type vm struct {
	key         string
	dir         string // the VM's run directory
	qemu        *exec.Cmd
	exited      chan struct{} // closed once QEMU has exited and been waited for
	virtiofsd   []*exec.Cmd
	client      *agent.Client
	fingerprint string
	limits      sandbox.Limits
	started     time.Time
	unlock      func()
	syncer      *syncer
	// stopEgress ends the VM's egress proxy (nil: the VM has no network).
	stopEgress func()
}

// alive reports whether QEMU still runs. A QEMU that has died but not
// yet been waited for (a zombie) counts as dead: the wait is moments away.
func (v *vm) alive() bool {
	select {
	case <-v.exited:
		return false
	default:
	}
	if v.qemu != nil && v.qemu.Process != nil && procState(v.qemu.Process.Pid) == 'Z' {
		<-v.exited
		return false
	}
	return true
}

// consoleTail is the end of the guest's serial console, for errors.
func (v *vm) consoleTail() string {
	return tail(filepath.Join(v.dir, "console.log"), 12)
}

// record is what a VM's run directory says about its processes, so that
// a later hutch can end them when the one that started them died.
type record struct {
	OfficeKey   string    `json:"officeKey"`
	OwnerPID    int       `json:"ownerPid"`
	Processes   []procRef `json:"processes"`
	Fingerprint string    `json:"fingerprint"`
	Started     time.Time `json:"started"`
}

// procRef identifies a process across pid reuse: its pid, its start time
// in clock ticks since boot, and a string its command line contains.
type procRef struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	Marker    string `json:"marker"`
}

const recordName = "vm.json"

// vmDir is the run directory of an office's VM: short, because unix
// socket paths are limited to 107 bytes.
func (r *Runtime) vmDir(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(r.cfg.RunDir, "vm", hex.EncodeToString(sum[:8]))
}

// diskDir is where an office's root disk lives.
func (r *Runtime) diskDir(key string) string {
	return filepath.Join(r.cfg.StateDir, "conversations", key, "microvm")
}

// lockVM takes the VM's ownership lock without waiting. Another live
// hutch process holding it owns the VM.
func lockVM(dir string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("microVM run dir: %w", err)
	}
	f, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("microVM lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errBusy
		}
		return nil, fmt.Errorf("microVM lock: %w", err)
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, nil
}

var errBusy = errors.New("locked by another process")

// boot starts the office's VM: it ends a leftover of a dead hutch,
// prepares the root disk, starts one virtiofsd per shared directory and
// QEMU, waits for the agent, and hands it the projection.
func (r *Runtime) boot(ctx context.Context, s *session, spec sandbox.Spec, m assets.Manifest, d desired, fp string) (_ *vm, err error) {
	p, err := projectSpec(spec)
	if err != nil {
		return nil, err
	}
	dir := r.vmDir(s.Key)
	if len(filepath.Join(dir, "vfs-99.sock")) > 100 {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"The run dir %s is too long for the microVM's unix sockets; set HUTCH_RUN_DIR to a shorter path", r.cfg.RunDir))
	}
	unlock, err := lockVM(dir)
	if errors.Is(err, errBusy) {
		return nil, errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
			"The microVM of office %s is owned by another hutch process serving this state dir; run commands through that process (or stop it)", s.Key))
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	r.endLeftover(dir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("microVM run dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("microVM run dir: %w", err)
	}
	disk, err := r.ensureDisk(ctx, s.Key, m)
	if err != nil {
		return nil, err
	}
	if err := r.recordBoot(s.Key, spec); err != nil {
		return nil, err
	}
	// Until the guest has applied this plan, its disk may hold what the
	// last one projected and what this one does.
	prev, cur := r.projected(s.Key), p.filePaths()
	if d.ca != nil {
		cur = append(cur, trustPaths...)
		slices.Sort(cur)
	}
	withdraw := withdrawn(prev, cur)
	if err := r.recordProjected(s.Key, append(slices.Clone(withdraw), cur...)); err != nil {
		return nil, err
	}
	initrd, err := r.stageInitrd(m)
	if err != nil {
		return nil, err
	}
	v := &vm{key: s.Key, dir: dir, exited: make(chan struct{}), fingerprint: fp, limits: d.Limits, unlock: unlock}
	rec := record{OfficeKey: s.Key, OwnerPID: os.Getpid(), Fingerprint: fp}
	defer func() {
		if err != nil {
			r.cleanupVM(v)
		}
	}()
	mach := qemu.Machine{
		Binary:      r.cfg.QEMU,
		Accel:       r.cfg.Accel,
		TSCKHz:      r.tscKHz,
		CPUs:        int(d.Limits.CPUs),
		MemoryMiB:   (d.Limits.MemoryBytes + 1<<20 - 1) >> 20,
		Kernel:      assetPath(r.cfg.AssetDir, m, "kernel"),
		Initrd:      initrd,
		RootDisk:    disk,
		AgentSocket: filepath.Join(dir, "agent.sock"),
		ConsoleLog:  filepath.Join(dir, "console.log"),
	}
	for i, sh := range p.Shares {
		sock := filepath.Join(dir, "vfs-"+strconv.Itoa(i)+".sock")
		cmd, err := r.startVirtiofsd(ctx, dir, i, sh.HostPath, sock)
		if err != nil {
			return nil, err
		}
		if h := testHookBeforeShare.Load(); h != nil {
			(*h)(sh.HostPath)
		}
		v.virtiofsd = append(v.virtiofsd, cmd)
		rec.Processes = append(rec.Processes, procRef{PID: cmd.Process.Pid, StartTime: procStart(cmd.Process.Pid), Marker: sock})
		mach.Shares = append(mach.Shares, qemu.Share{Tag: sh.Tag, Socket: sock})
	}
	if networked(spec) {
		cmd, stop, err := r.startEgress(dir, spec, d.ca)
		if err != nil {
			return nil, err
		}
		v.stopEgress = stop
		mach.EgressCommand = cmd
	}
	if err := mach.Validate(); err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, err.Error())
	}
	logf, err := os.OpenFile(filepath.Join(dir, "qemu.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("microVM log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(mach.Command(), mach.Args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A process group of its own: a ctrl-C at hutch's terminal must not
	// reach QEMU before hutch has synced files back and powered it off.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("start QEMU: %v", err))
	}
	v.qemu = cmd
	go func() {
		_ = cmd.Wait()
		close(v.exited)
	}()
	rec.Processes = append(rec.Processes, procRef{PID: cmd.Process.Pid, StartTime: procStart(cmd.Process.Pid), Marker: mach.AgentSocket})
	rec.Started = start
	if err := writeRecord(dir, rec); err != nil {
		return nil, err
	}
	r.log.Info("booting microVM", "office_key", s.Key, "accel", r.cfg.Accel, "vcpus", mach.CPUs, "memory_mib", mach.MemoryMiB, "shares", len(mach.Shares), "pid", cmd.Process.Pid)
	r.event("created")
	if r.cfg.Changed != nil {
		r.cfg.Changed(ctx, sandbox.Made(s.Key, s.because))
	}
	s.because = ""
	v.client = agent.NewClient(dialAgent(mach.AgentSocket), r.log.With("office_key", s.Key))
	if err := r.waitAgent(ctx, v); err != nil {
		return nil, err
	}
	var trust []agent.GuestFile
	if d.ca != nil {
		trust = r.guestTrust(ctx, v, d.ca)
	}
	if err := r.setup(ctx, v, p, trust, withdraw, d.Limits); err != nil {
		return nil, err
	}
	if err := r.recordProjected(s.Key, cur); err != nil {
		return nil, err
	}
	v.started = time.Now()
	r.log.Info("microVM ready", "office_key", s.Key, "boot", time.Since(start).Round(time.Millisecond))
	r.event("started")
	v.syncer = r.startSyncer(v, p.Files)
	return v, nil
}

// dialAgent dials a guest agent's port through its unix socket. The
// guest's port outlives host connections: a sync line makes sure each
// session starts clean of an earlier one's bytes.
func dialAgent(sock string) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			return nil, err
		}
		sc, err := agent.SyncSession(ctx, c)
		if err != nil {
			_ = c.Close()
		}
		return sc, err
	}
}

// waitAgent waits for the guest agent's first answer, failing early with
// the console's last lines when QEMU exits instead.
func (r *Runtime) waitAgent(ctx context.Context, v *vm) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.BootTimeout)
	defer cancel()
	go func() {
		select {
		case <-v.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	// QEMU creates the socket a moment after it starts.
	for {
		if _, err := os.Stat(filepath.Join(v.dir, "agent.sock")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return r.bootFailure(v, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	// One connection: the handshake completes when the guest's agent
	// opens its port; a ping that times out leaves the connection up.
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := v.client.Ping(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return r.bootFailure(v, err)
		}
		select {
		case <-ctx.Done():
			return r.bootFailure(v, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *Runtime) bootFailure(v *vm, err error) error {
	if !v.alive() {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
			"The microVM of office %s exited before its agent answered%s%s", v.key, qemuError(v.dir), consoleSuffix(v)))
	}
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
		"The agent in the microVM of office %s did not answer within %s (%v)%s", v.key, r.cfg.BootTimeout, err, consoleSuffix(v)))
}

func consoleSuffix(v *vm) string {
	if t := v.consoleTail(); t != "" {
		return "; its console ended with:\n" + t
	}
	return ""
}

func qemuError(dir string) string {
	if t := tail(filepath.Join(dir, "qemu.log"), 3); t != "" {
		return " (QEMU: " + strings.ReplaceAll(t, "\n", "; ") + ")"
	}
	return ""
}

// setup hands the guest its projection: the files an earlier plan
// projected onto the disk and this one withdraws, /workspace as a tmpfs,
// virtiofs mounts, copied files (held in the guest's memory) and the
// egress CA's trust files, the commands' pids and memory ceilings, the
// time zone and the network card.
func (r *Runtime) setup(ctx context.Context, v *vm, p plan, trust []agent.GuestFile, withdraw []string, l sandbox.Limits) error {
	gs := agent.GuestSetup{
		Withdraw: withdraw,
		// What the projection puts under /workspace besides shares (the
		// shares' mount points, MEMORY.md, a write's staging file beside
		// it) never reaches the root disk, so no later plan finds it.
		Volatile:    []string{projection.RuntimeRoot},
		Pids:        l.Pids,
		MemoryBytes: commandMemory(l.MemoryBytes),
		TimeZone:    r.cfg.TimeZone,
	}
	if v.stopEgress != nil {
		gs.Network = &agent.GuestNetwork{Address: guestAddress, Proxy: "http://" + qemu.ProxyAddr}
	}
	for _, sh := range p.Shares {
		gs.Mounts = append(gs.Mounts, agent.GuestMount{Tag: sh.Tag, Target: sh.RuntimePath, ReadOnly: sh.ReadOnly})
	}
	for _, f := range p.Files {
		data, err := os.ReadFile(f.HostPath)
		if err != nil {
			return fmt.Errorf("projected file %s: %w", f.RuntimePath, err)
		}
		gs.Files = append(gs.Files, agent.GuestFile{Path: f.RuntimePath, Mode: uint32(f.Mode), Data: data, ReadOnly: f.ReadOnly})
	}
	gs.Files = append(gs.Files, trust...)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := v.client.GuestSetup(ctx, gs); err != nil {
		return fmt.Errorf("set up the microVM of office %s: %w", v.key, err)
	}
	return nil
}

// guestAddress is the guest's address in QEMU's user-mode network, where
// qemu.ProxyAddr is the only other host it can reach.
const guestAddress = "10.0.2.15/24"

// commandMemory is the memory commands may use in a VM of total bytes:
// the rest is kept for the guest kernel and the agent, so that a command
// that runs out is killed as an OOM of its cgroup, not the agent.
func commandMemory(total int64) int64 {
	reserve := max(total/8, 96<<20)
	return max(total-reserve, 32<<20)
}

// A runtime whose door grants the workspace (full) can rename any office
// and put a link in its place; virtiofsd given the path would export
// whatever the link names (hutch's state dir, the host's /). So each
// share's source is opened beneath the workspace with no link followed,
// and virtiofsd is handed that open directory as fd 3 and exports
// /proc/self/fd/3/, which names the directory opened, whatever is at its
// path by then (the slash: virtiofsd checks that the source is a
// directory without following a last link). Its sandbox is chroot(2)
// into that directory: the namespace sandbox bind-mounts the source by
// path in a new mount and PID namespace, where the fd's magic link does
// not resolve (measured: "mount(/proc/self/fd/3/, ...): No such file or
// directory"). virtiofsd still drops its capabilities to the file
// operations it serves and applies its seccomp filter.

// pinShare opens source beneath the workspace (or beneath its parent,
// for a source outside it).
func (r *Runtime) pinShare(source string) (*os.File, error) {
	root := filepath.Dir(source)
	if ws := r.cfg.Workspace; ws != "" && (source == ws || strings.HasPrefix(source, ws+"/")) {
		root = ws
	}
	pin, err := beneath.Open(root, source)
	if err != nil {
		return nil, fmt.Errorf("projected directory: %w", err)
	}
	defer func() { _ = pin.Close() }()
	return pin.Dup()
}

// testHookBeforeShare, set by tests only, runs between the start of a
// share's virtiofsd and QEMU's: virtiofsd checks its source when it
// starts but mounts it when QEMU connects, so that is where a racing
// runtime would swap it.
var testHookBeforeShare atomic.Pointer[func(source string)]

// startVirtiofsd exports one directory and waits for its socket.
func (r *Runtime) startVirtiofsd(ctx context.Context, dir string, i int, source, sock string) (*exec.Cmd, error) {
	pinned, err := r.pinShare(source)
	if err != nil {
		return nil, err
	}
	defer func() { _ = pinned.Close() }()
	logf, err := os.OpenFile(filepath.Join(dir, "vfs-"+strconv.Itoa(i)+".log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("virtiofsd log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	// cache=none: the host and other runtimes write the same files, and
	// a guest must see their writes at once.
	cmd := exec.Command(r.cfg.Virtiofsd, "--socket-path="+sock, "-o", "source=/proc/self/fd/3/", "-o", "sandbox=chroot", "-o", "cache=none", "-o", "log_level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pinned} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("start virtiofsd: %v", err))
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return cmd, nil
		}
		select {
		case <-done:
			return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("virtiofsd for %s exited at once: %s", source, tail(filepath.Join(dir, "vfs-"+strconv.Itoa(i)+".log"), 3)))
		case <-deadline:
			_ = cmd.Process.Kill()
			return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("virtiofsd for %s made no socket within 10 s", source))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// diskLayout is what a root disk made now holds of hutch's: 1, nothing
// projected (see projectedName). A disk of an earlier layout (none
// recorded) may hold copies of vault files an old guest wrote onto it,
// and no record says which: it starts fresh.
const diskLayout = 1

// ensureDisk returns the office's root disk, a qcow2 overlay over the
// root filesystem asset, made when missing. An overlay of another root
// filesystem (the assets were rebuilt) cannot be kept: its blocks mean
// nothing over new ones.
func (r *Runtime) ensureDisk(ctx context.Context, key string, m assets.Manifest) (string, error) {
	dd := r.diskDir(key)
	disk := filepath.Join(dd, "root.qcow2")
	meta := filepath.Join(dd, "root.json")
	rootfs, _ := m.Asset("rootfs")
	var base struct {
		Rootfs string `json:"rootfsSha256"`
		Layout int    `json:"layout"`
	}
	data, err := os.ReadFile(meta)
	known := err == nil && json.Unmarshal(data, &base) == nil
	if known && base.Rootfs == rootfs.SHA256 && base.Layout == diskLayout {
		if _, err := os.Stat(disk); err == nil {
			return disk, nil
		}
	} else if _, err := os.Stat(disk); err == nil {
		if known && base.Rootfs == rootfs.SHA256 {
			r.log.Warn("the office's root disk was made before hutch kept projected files off it and may hold withdrawn vault files; it starts fresh and its changes are not kept", "office_key", key)
		} else {
			r.log.Warn("the microVM root filesystem was rebuilt; the office's root disk starts fresh from it and its changes are not kept", "office_key", key)
		}
	}
	if err := os.MkdirAll(dd, 0o700); err != nil {
		return "", fmt.Errorf("microVM disk dir: %w", err)
	}
	// A fresh disk holds nothing projected.
	if err := os.Remove(filepath.Join(dd, projectedName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("microVM disk dir: %w", err)
	}
	tmp := disk + ".new"
	_ = os.Remove(tmp)
	cmd := exec.CommandContext(ctx, r.cfg.QEMUImg, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", assetPath(r.cfg.AssetDir, m, "rootfs"), tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("create the root disk of office %s: %v: %s", key, err, bytes.TrimSpace(out))
	}
	if err := os.Rename(tmp, disk); err != nil {
		return "", fmt.Errorf("root disk: %w", err)
	}
	base.Rootfs, base.Layout = rootfs.SHA256, diskLayout
	data, _ = json.Marshal(base)
	if err := atomicfile.WriteFile(meta, append(data, '\n'), 0o600); err != nil {
		return "", err
	}
	return disk, nil
}

// stopVMLocked ends s's VM: a last sync of projected files, a clean
// power-off through the agent (the guest flushes its disk), QEMU killed
// if it does not exit, the virtiofsds ended. Boosts end with it.
func (r *Runtime) stopVMLocked(s *session, why string) {
	v := s.vm
	if v == nil {
		return
	}
	s.vm, s.boost, s.temp = nil, nil, nil
	if v.syncer != nil {
		v.syncer.stop()
	}
	if v.alive() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := v.client.GuestPowerOff(ctx)
		cancel()
		if err != nil {
			r.log.Debug("microVM power-off request failed", "office_key", s.Key, "error", err)
		}
		select {
		case <-v.exited:
		case <-time.After(10 * time.Second):
			r.log.Warn("the microVM did not power off within 10 s; killing QEMU", "office_key", s.Key)
		}
	}
	r.cleanupVM(v)
	r.log.Info("stopped microVM", "office_key", s.Key, "why", why)
	r.event("stopped")
}

// cleanupVM kills what is left of a VM's processes, releases its run
// directory and its lock.
func (r *Runtime) cleanupVM(v *vm) {
	if v.client != nil {
		_ = v.client.Close()
	}
	if v.qemu != nil && v.qemu.Process != nil && v.alive() {
		_ = syscall.Kill(-v.qemu.Process.Pid, syscall.SIGKILL)
		<-v.exited
	}
	for _, c := range v.virtiofsd {
		// virtiofsd ends when its VM does; make sure.
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	if v.syncer != nil {
		v.syncer.stop()
	}
	if v.stopEgress != nil {
		v.stopEgress()
	}
	_ = os.RemoveAll(v.dir)
	if v.unlock != nil {
		v.unlock()
		v.unlock = nil
	}
}

func writeRecord(dir string, rec record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, recordName), append(data, '\n'), 0o600)
}

// procStart is a process's start time in clock ticks since boot (field 22
// of /proc/<pid>/stat), or 0 when it cannot be read.
func procStart(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields resume after ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(fields[19], 10, 64)
	return n
}

// running reports whether p names the process recorded and it has not
// exited (a zombie has).
func (p procRef) running() bool {
	return p.matches() && procState(p.PID) != 'Z'
}

// procState is the state letter of a process (R, S, Z, ...), or 0 when
// it is gone.
func procState(pid int) byte {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || len(data) < i+3 {
		return 0
	}
	return data[i+2]
}

// matches reports whether p still names the process recorded: same start
// time and a command line that holds the marker.
func (p procRef) matches() bool {
	if p.PID <= 0 || procStart(p.PID) != p.StartTime {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte(p.Marker))
}

// tail returns the last n lines of a file.
func tail(p string, n int) string {
	data, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
