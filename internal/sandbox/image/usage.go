package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

var _ sandbox.UsageReader = (*Runtime)(nil)

// Usage reads the office's container's resource use from the engine's
// one-shot stats. The engine reads the container's cgroup; nothing runs
// in the container.
func (r *Runtime) Usage(ctx context.Context, key string) (sandbox.Usage, error) {
	return containerUsage(ctx, r.api, ContainerName(key))
}

// statsAPI is the engine call Usage makes; engineAPI has it.
type statsAPI interface {
	ContainerStats(ctx context.Context, container string, options client.ContainerStatsOptions) (client.ContainerStatsResult, error)
}

// containerUsage reads one container's stats once.
func containerUsage(ctx context.Context, api statsAPI, name string) (sandbox.Usage, error) {
	res, err := api.ContainerStats(ctx, name, client.ContainerStatsOptions{})
	if err != nil {
		return sandbox.Usage{}, engine.Classify(err, "stats of "+name)
	}
	defer func() { _ = res.Body.Close() }()
	st, err := decodeStats(res.Body)
	if err != nil {
		return sandbox.Usage{}, err
	}
	// The engine answers for a container that is not running too, with
	// nothing read.
	if st.Read.IsZero() {
		return sandbox.Usage{}, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("Container %s is not running.", name))
	}
	return usageOf(st), nil
}

// decodeStats reads one stats answer of the Engine API. Podman answers
// an empty body for a container that is not running.
func decodeStats(r io.Reader) (container.StatsResponse, error) {
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&st); err != nil {
		if errors.Is(err, io.EOF) {
			return st, errdefs.New(errdefs.ErrNotFound, "The engine has no stats of the container: it is not running.")
		}
		return st, fmt.Errorf("reading container stats: %w", err)
	}
	return st, nil
}

// usageOf turns a stats answer into a reading. Its clock is when the
// engine read the cgroup: the host CPU time docker stats divides by
// (system_cpu_usage) is not counted alike by every engine (Podman's moves
// at a fraction of the wall clock's pace), and over the seconds between
// two readings the two clocks agree.
func usageOf(st container.StatsResponse) sandbox.Usage {
	return sandbox.Usage{
		Instance: st.ID,
		CPU:      time.Duration(st.CPUStats.CPUUsage.TotalUsage),
		Clock:    time.Duration(st.Read.UnixNano()),
		Memory:   memUsed(st.MemoryStats), MemoryLimit: st.MemoryStats.Limit,
		Pids: st.PidsStats.Current, PidsLimit: st.PidsStats.Limit,
	}
}

// memUsed is memory in use less the inactive file cache, which the kernel
// drops before it runs out, as docker stats computes it: total_inactive_file
// on cgroup v1, inactive_file on v2.
func memUsed(m container.MemoryStats) uint64 {
	if v, ok := m.Stats["total_inactive_file"]; ok {
		if v < m.Usage {
			return m.Usage - v
		}
		return m.Usage
	}
	if v := m.Stats["inactive_file"]; v < m.Usage {
		return m.Usage - v
	}
	return m.Usage
}
