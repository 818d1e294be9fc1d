package image

import (
	"context"
	"encoding/json"
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
	defer res.Body.Close()
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

// decodeStats reads one stats answer of the Engine API.
func decodeStats(r io.Reader) (container.StatsResponse, error) {
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&st); err != nil {
		return st, fmt.Errorf("reading container stats: %w", err)
	}
	return st, nil
}

// usageOf turns a stats answer into a reading. Its clock is the host's
// CPU time over its online CPUs, so that the CPU use of two readings is
// docker stats' own figure.
func usageOf(st container.StatsResponse) sandbox.Usage {
	cpus := uint64(st.CPUStats.OnlineCPUs)
	if cpus == 0 {
		cpus = uint64(len(st.CPUStats.CPUUsage.PercpuUsage))
	}
	var clock time.Duration
	if cpus > 0 {
		clock = time.Duration(st.CPUStats.SystemUsage / cpus)
	}
	return sandbox.Usage{
		Instance: st.ID,
		CPU:      time.Duration(st.CPUStats.CPUUsage.TotalUsage),
		Clock:    clock,
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
