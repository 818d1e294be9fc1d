package image

import (
	"context"

	"github.com/moby/moby/client"
)

// engineAPI is the part of the Engine API client the image mode uses. A
// real *client.Client satisfies it; tests below the engine boundary may
// pass a fake to produce faults a real engine cannot produce on demand.
type engineAPI interface {
	ContainerInspect(ctx context.Context, id string, o client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerCreate(ctx context.Context, o client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerStart(ctx context.Context, id string, o client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerStop(ctx context.Context, id string, o client.ContainerStopOptions) (client.ContainerStopResult, error)
	ContainerRemove(ctx context.Context, id string, o client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerPause(ctx context.Context, id string, o client.ContainerPauseOptions) (client.ContainerPauseResult, error)
	ContainerUnpause(ctx context.Context, id string, o client.ContainerUnpauseOptions) (client.ContainerUnpauseResult, error)
	ContainerRename(ctx context.Context, id string, o client.ContainerRenameOptions) (client.ContainerRenameResult, error)
	ContainerUpdate(ctx context.Context, id string, o client.ContainerUpdateOptions) (client.ContainerUpdateResult, error)
	ContainerCommit(ctx context.Context, id string, o client.ContainerCommitOptions) (client.ContainerCommitResult, error)
	ContainerList(ctx context.Context, o client.ContainerListOptions) (client.ContainerListResult, error)
	ContainerLogs(ctx context.Context, id string, o client.ContainerLogsOptions) (client.ContainerLogsResult, error)
	ImageInspect(ctx context.Context, ref string, o ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageRemove(ctx context.Context, ref string, o client.ImageRemoveOptions) (client.ImageRemoveResult, error)
	ImagePull(ctx context.Context, ref string, o client.ImagePullOptions) (client.ImagePullResponse, error)
	NetworkInspect(ctx context.Context, id string, o client.NetworkInspectOptions) (client.NetworkInspectResult, error)
	NetworkCreate(ctx context.Context, name string, o client.NetworkCreateOptions) (client.NetworkCreateResult, error)
	NetworkRemove(ctx context.Context, id string, o client.NetworkRemoveOptions) (client.NetworkRemoveResult, error)
	NetworkList(ctx context.Context, o client.NetworkListOptions) (client.NetworkListResult, error)
	NetworkConnect(ctx context.Context, id string, o client.NetworkConnectOptions) (client.NetworkConnectResult, error)
	NetworkDisconnect(ctx context.Context, id string, o client.NetworkDisconnectOptions) (client.NetworkDisconnectResult, error)
	ContainerStats(ctx context.Context, container string, options client.ContainerStatsOptions) (client.ContainerStatsResult, error)
}
