package agent

// The files that count the OOM kills of the sandbox's memory cgroup, as
// the sandbox sees its own cgroup: cgroup v2 first, then v1.
var oomCounterPaths = []string{
	"/sys/fs/cgroup/memory.events",
	"/sys/fs/cgroup/memory/memory.oom_control",
}

// detectOOMCounter returns the first counter file that can be read, or ""
// when the sandbox has none (OOM kills are then reported as plain SIGKILLs).
func detectOOMCounter() string {
	for _, p := range oomCounterPaths {
		if _, ok := readOOMKills(p); ok {
			return p
		}
	}
	return ""
}

// readOOMKills reads the "oom_kill N" line of a memory.events or
// memory.oom_control file.
func readOOMKills(path string) (int64, bool) {
	if path == "" {
		return 0, false
	}
	n, found, err := keyedValue(path, "oom_kill")
	if err != nil || !found {
		return 0, false
	}
	return int64(n), true
}
