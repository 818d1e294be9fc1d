package supervise

import (
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reaper owns the exit statuses of the commands this process started. It
// is the one place that waits for them, on SIGCHLD, and hands each status
// to the Process of that child. A wait status cannot be lost to a fast
// exit: a command is registered under the same lock that the reaper holds
// while it reaps, and the process is started while that lock is held.
//
// By default it only reaps the commands it started, so a process that also
// uses os/exec (the daemon, a test binary) keeps its other children's
// statuses. After ReapAll (the agent is pid 1 or a child subreaper) it
// reaps every child, orphans re-parented to it included.
//
// The process has one reaper: wait4 and SIGCHLD are process-wide.
type reaper struct {
	mu      sync.Mutex // guards the following and serialises starts with reaps
	all     bool
	log     *slog.Logger
	waiters map[int]chan unix.WaitStatus
}

var (
	reaperOnce sync.Once
	theReaper  *reaper
)

// processReaper returns the process's reaper, started on first use.
func processReaper() *reaper {
	reaperOnce.Do(func() {
		r := &reaper{log: slog.New(slog.DiscardHandler), waiters: make(map[int]chan unix.WaitStatus)}
		// Buffered: SIGCHLDs that arrive while a reap runs coalesce into
		// one more pass, which collects every child that exited.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, unix.SIGCHLD)
		go func() {
			for range sigs {
				r.reap()
			}
		}()
		theReaper = r
	})
	return theReaper
}

// ReapAll makes this process's reaper collect every child, not only the
// commands started here, orphans re-parented to it included, and collects
// any already waiting: the duty of a pid 1 or a child subreaper, whose
// zombies nobody else reaps. It cannot be undone, and it takes their exit
// statuses from children started any other way (os/exec). log receives a
// line for each orphan reaped; nil keeps the current logger.
func ReapAll(log *slog.Logger) { processReaper().reapAll(log) }

// KillAll sends SIGKILL to the process group of every command still
// running and returns how many there were: for an init about to go.
func KillAll() int { return processReaper().killAll() }

func (r *reaper) reapAll(log *slog.Logger) {
	r.mu.Lock()
	r.all = true
	if log != nil {
		r.log = log
	}
	r.mu.Unlock()
	r.reap()
}

// start forks and execs a command and registers it. The returned channel
// receives its wait status once it has exited and been reaped; by then
// whatever was left of its process group has been sent SIGKILL.
func (r *reaper) start(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		// ForkExec reaped the child that failed to exec itself.
		return 0, nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	r.waiters[pid] = ch
	return pid, ch, nil
}

// killGroup sends SIGKILL to the process group of the command whose leader
// is pid, if that leader has not been reaped yet: only then is the group id
// certain to still be the command's.
func (r *reaper) killGroup(pid int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.waiters[pid]; !ok {
		return nil // reaped: the reaper killed the group before that
	}
	if err := unix.Kill(-pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// killAll sends SIGKILL to the group of every running command and returns
// how many there were.
func (r *reaper) killAll() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid := range r.waiters {
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	return len(r.waiters)
}

// reap collects every child that has exited.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.all {
		for {
			pid := exitedChild(unix.P_ALL, 0)
			if pid <= 0 {
				return
			}
			r.reapOne(pid)
		}
	}
	for pid := range r.waiters {
		if exitedChild(unix.P_PID, pid) == pid {
			r.reapOne(pid)
		}
	}
}

// reapOne reaps the exited child pid. For a command, it first kills what
// is left of its process group: the leader is a zombie until reaped, so its
// id cannot have been reused for another group yet.
func (r *reaper) reapOne(pid int) {
	ch, isCommand := r.waiters[pid]
	if isCommand {
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if !isCommand {
		r.log.Debug("supervise: reaped an orphan", "pid", pid)
		return
	}
	delete(r.waiters, pid)
	ch <- ws
}

// exitedChild returns the pid of a child (of idType/id) that has exited
// and is waiting to be reaped, leaving it unreaped, or 0 when there is none.
func exitedChild(idType, id int) int {
	for {
		var info unix.Siginfo
		err := unix.Waitid(idType, id, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil: // ECHILD: no children at all
			return 0
		}
		// Linux zeroes the siginfo when WNOHANG finds nobody.
		return siginfoPid(&info)
	}
}

// siginfoPid reads si_pid from a SIGCHLD siginfo_t: its union follows three
// 32-bit ints (signo, errno, code) at pointer alignment, and starts with
// the pid.
func siginfoPid(info *unix.Siginfo) int {
	off := uintptr(12)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off))) //nolint:gosec // G103: x/sys/unix's Siginfo does not name si_pid; it is read at its fixed offset
}
