package testenv

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
)

// pingTimeout bounds how long Docker waits for the engine to answer.
const pingTimeout = 15 * time.Second

// cleanupTimeout bounds one sweep of CleanupContainers.
const cleanupTimeout = 2 * time.Minute

// Docker returns a client for the engine named by the environment
// (DOCKER_HOST and friends, else /var/run/docker.sock), its API version
// negotiated by a ping. When no engine answers, the test is skipped, except
// when the CI environment variable is set (to anything but a false boolean
// such as "false" or "0"): Docker-backed tests must never skip in CI, so
// there it fails. The client is closed when the test ends.
func Docker(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		unreachable(t, err)
		return nil // not reached: unreachable ends the test
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		unreachable(t, err)
		return nil
	}
	return cli
}

// unreachable ends a test whose engine does not answer.
func unreachable(t testing.TB, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("docker engine not reachable: %v (CI is set, and Docker-backed tests must not skip in CI: start dockerd, e.g. with hack/docker-up)", err)
	}
	t.Skipf("docker engine not reachable: %v", err)
}

// InCI reports whether the CI environment variable is set to something
// other than a false boolean: then what a test needs must be there, and a
// test that would skip without it fails instead.
func InCI() bool {
	v := strings.TrimSpace(os.Getenv("CI"))
	if v == "" {
		return false
	}
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	return true
}

// CleanupContainers removes every container (with its anonymous volumes),
// image, network and volume carrying label, written "key=value" (a bare "key"
// matches any value): once now, so that leftovers of an earlier, killed run
// cannot get in the way, and again when the test ends. Containers are
// force-removed, running or not. A resource that cannot be removed fails
// the test.
func CleanupContainers(t testing.TB, cli *client.Client, label string) {
	t.Helper()
	if strings.TrimSpace(label) == "" || strings.HasPrefix(label, "=") {
		t.Fatalf("CleanupContainers: label %q is not key=value", label)
	}
	sweep(t, cli, label)
	t.Cleanup(func() { sweep(t, cli, label) })
}

// sweep removes what carries label, reporting failures with t.Errorf.
func sweep(t testing.TB, cli *client.Client, label string) {
	t.Helper()
	// Not t.Context(): it is already cancelled when cleanups run.
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	filters := make(client.Filters).Add("label", label)
	if err := removeContainers(ctx, cli, filters); err != nil {
		t.Errorf("cleanup of label %s: %v", label, err)
		return
	}
	// Images with the label: the snapshots image mode commits when it
	// re-creates a container, which outlive their container otherwise.
	imgs, err := listImages(ctx, cli, filters)
	if err != nil {
		t.Errorf("cleanup of label %s: listing images: %v", label, err)
	}
	// A snapshot committed from a container that ran from an earlier
	// snapshot is that one's child, and a parent with children cannot be
	// removed: the newest go first, and what still has a child is tried
	// again once the others are gone.
	pending := imgs.Items
	slices.SortFunc(pending, func(a, b image.Summary) int { return cmp.Compare(b.Created, a.Created) })
	for pass := 0; len(pending) > 0; pass++ {
		var again []image.Summary
		for _, im := range pending {
			_, err := cli.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true})
			switch {
			case err == nil || cerrdefs.IsNotFound(err):
			case cerrdefs.IsConflict(err) && pass < 3:
				again = append(again, im)
			default:
				t.Errorf("cleanup of label %s: removing image %s: %v", label, im.ID, err)
			}
		}
		pending = again
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: filters})
	if err != nil {
		t.Errorf("cleanup of label %s: listing networks: %v", label, err)
	}
	for _, n := range nets.Items {
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cleanup of label %s: removing network %s: %v", label, n.Name, err)
		}
	}
	vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: filters})
	if err != nil {
		t.Errorf("cleanup of label %s: listing volumes: %v", label, err)
	}
	for _, v := range vols.Items {
		if _, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cleanup of label %s: removing volume %s: %v", label, v.Name, err)
		}
	}
}

// listAttempts is how often listImages asks before it reports a failure.
const listAttempts = 5

// listImages lists the images matching filters, asking again after a
// failure: Podman fails a whole listing when another client is creating or
// removing an image at that moment (its record exists without the manifest
// yet or any more: "locating item named "manifest" for image with ID ...:
// file does not exist"), and tests on other packages do that in parallel.
// A failure that persists is reported.
func listImages(ctx context.Context, cli *client.Client, filters client.Filters) (client.ImageListResult, error) {
	for attempt := 1; ; attempt++ {
		imgs, err := cli.ImageList(ctx, client.ImageListOptions{All: true, Filters: filters})
		if err == nil || attempt == listAttempts {
			return imgs, err
		}
		select {
		case <-ctx.Done():
			return imgs, err
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// removeContainers force-removes the containers matching filters and waits
// until none is listed any more (a removal another process started counts
// once it has finished).
func removeContainers(ctx context.Context, cli *client.Client, filters client.Filters) error {
	for first := true; ; first = false {
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
		if err != nil {
			return fmt.Errorf("listing containers: %w", err)
		}
		if len(list.Items) == 0 {
			return nil
		}
		if !first {
			select {
			case <-ctx.Done():
				return fmt.Errorf("containers still listed after removal: %s: %w", containerName(list.Items[0].Names, list.Items[0].ID), ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		for _, c := range list.Items {
			_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			switch {
			case err == nil, cerrdefs.IsNotFound(err):
			case cerrdefs.IsConflict(err):
				// "removal already in progress": the next listing tells.
			default:
				return fmt.Errorf("removing container %s: %w", containerName(c.Names, c.ID), err)
			}
		}
	}
}

func containerName(names []string, id string) string {
	if len(names) > 0 {
		return strings.TrimPrefix(names[0], "/")
	}
	return id
}
