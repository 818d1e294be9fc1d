package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// pathUsage answers the resource use of the cgroup commands run in, as a
// JSON Usage.
const pathUsage = "/v1/usage"

// ownCgroup is where a sandbox sees its own cgroup: a container's or a
// pod's private cgroup namespace puts it at the mount's root.
const ownCgroup = "/sys/fs/cgroup"

// Usage is what the cgroup v2 files of the cgroup commands run in say,
// and when they were read.
type Usage struct {
	// CPUUsec is cpu.stat's usage_usec: CPU time used since the cgroup
	// was made. cgroup v2 keeps it whatever controllers are enabled.
	CPUUsec uint64 `json:"cpuUsec"`
	// MonotonicNs is CLOCK_MONOTONIC when the files were read.
	MonotonicNs int64 `json:"monotonicNs"`
	// MemoryCurrent is memory.current; InactiveFile memory.stat's
	// inactive_file, the file cache the kernel drops first; MemoryMax
	// memory.max, 0 for "max". All 0 without the memory controller.
	MemoryCurrent uint64 `json:"memoryCurrent"`
	InactiveFile  uint64 `json:"inactiveFile"`
	MemoryMax     uint64 `json:"memoryMax"`
	// PidsCurrent is pids.current, PidsMax pids.max (0 for "max"). Both 0
	// without the pids controller.
	PidsCurrent uint64 `json:"pidsCurrent"`
	PidsMax     uint64 `json:"pidsMax"`
}

// usageCgroup is the cgroup whose use is read: CommandCgroup when set,
// else the sandbox's own.
func (s *Server) usageCgroup() string {
	if s.usageDir != "" {
		return s.usageDir
	}
	if s.CommandCgroup != "" {
		return s.CommandCgroup
	}
	return ownCgroup
}

// handleUsage reads the use of the cgroup commands run in.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	u, err := readUsage(s.usageCgroup())
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	_ = json.NewEncoder(w).Encode(u)
}

// readUsage reads dir's cgroup files: cgroup v2's when dir has them,
// else cgroup v1's, one hierarchy per controller under dir (a container
// on a v1 host sees its own cgroups there). CPU time must be there; memory
// and process counts are read where their controllers are.
func readUsage(dir string) (Usage, error) {
	var u Usage
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return u, fmt.Errorf("read the monotonic clock: %w", err)
	}
	u.MonotonicNs = ts.Nano()
	v2, _, err := keyedValue(filepath.Join(dir, "cpu.stat"), "usage_usec")
	switch {
	case err == nil:
		u.CPUUsec = v2
		return u, readValues(dir, []cgroupValue{
			{"memory.current", &u.MemoryCurrent, singleValue},
			{"memory.max", &u.MemoryMax, singleValue},
			{"memory.stat", &u.InactiveFile, keyed("inactive_file")},
			{"pids.current", &u.PidsCurrent, singleValue},
			{"pids.max", &u.PidsMax, singleValue},
		})
	case !errors.Is(err, fs.ErrNotExist):
		return u, err
	}
	v1, err := singleValue(filepath.Join(dir, "cpuacct", "cpuacct.usage"))
	switch {
	case err == nil:
		u.CPUUsec = v1 / 1000 // nanoseconds
	case errors.Is(err, fs.ErrNotExist):
		return u, errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf("Resource use cannot be read: %s has neither cgroup v2's cpu.stat nor cgroup v1's cpuacct.usage", dir))
	default:
		return u, err
	}
	if err := readValues(dir, []cgroupValue{
		{"memory/memory.usage_in_bytes", &u.MemoryCurrent, singleValue},
		{"memory/memory.limit_in_bytes", &u.MemoryMax, singleValue},
		{"memory/memory.stat", &u.InactiveFile, keyed("total_inactive_file")},
		{"pids/pids.current", &u.PidsCurrent, singleValue},
		{"pids/pids.max", &u.PidsMax, singleValue},
	}); err != nil {
		return u, err
	}
	if u.MemoryMax >= unlimitedV1 {
		u.MemoryMax = 0
	}
	return u, nil
}

// unlimitedV1 is where cgroup v1's memory.limit_in_bytes means no limit:
// it reads the largest page-aligned int64 then.
const unlimitedV1 = 1 << 62

// cgroupValue is a number read from a cgroup file, optional: a file that
// is not there (its controller is not enabled) reads 0.
type cgroupValue struct {
	name string
	to   *uint64
	read func(string) (uint64, error)
}

func readValues(dir string, values []cgroupValue) error {
	for _, v := range values {
		n, err := v.read(filepath.Join(dir, v.name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		*v.to = n
	}
	return nil
}

// keyed reads key's number in a "key value" file; a file without it
// reads 0.
func keyed(key string) func(string) (uint64, error) {
	return func(p string) (uint64, error) {
		n, _, err := keyedValue(p, key)
		return n, err
	}
}

// singleValue reads a cgroup file holding one number, or "max" (0).
func singleValue(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %q is not a number", path, s)
	}
	return v, nil
}

// keyedValue reads the number of key in a cgroup file of "key value"
// lines; found is false when the file has no such line.
func keyedValue(path, key string) (n uint64, found bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("read %s: %s %q is not a number", path, key, v)
		}
		return n, true, nil
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, false, nil
}

// Usage reads the resource use of the cgroup the agent's commands run in.
// It runs nothing in the sandbox. Errors: ErrNotSupported where the
// sandbox has no cgroup v2.
func (c *Client) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	err := c.getJSON(ctx, pathUsage, url.Values{}, maxErrorBody, &u)
	return u, err
}

// Reading is u as a sandbox.Usage of the runtime instance, its memory
// use without the file cache the kernel drops first.
func (u Usage) Reading(instance string) sandbox.Usage {
	mem := u.MemoryCurrent
	if u.InactiveFile < mem {
		mem -= u.InactiveFile
	}
	return sandbox.Usage{
		Instance: instance,
		CPU:      time.Duration(u.CPUUsec) * time.Microsecond,
		Clock:    time.Duration(u.MonotonicNs),
		Memory:   mem, MemoryLimit: u.MemoryMax,
		Pids: u.PidsCurrent, PidsLimit: u.PidsMax,
	}
}
