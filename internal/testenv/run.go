package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// RunContainer runs cmd (after the image's entrypoint, if any) in a fresh
// container from image, without network and labelled label ("key=value"),
// and returns its stdout, stderr and exit code; the container is removed
// before it returns.
func RunContainer(t testing.TB, cli *client.Client, image, label string, cmd ...string) (string, string, int64) {
	t.Helper()
	key, value, _ := strings.Cut(label, "=")
	return runContainer(t, cli, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Cmd: cmd, Labels: map[string]string{key: value}},
		HostConfig: &container.HostConfig{NetworkMode: network.NetworkNone},
	})
}

// runContainer is RunContainer with the container's options given whole
// (its name aside).
func runContainer(t testing.TB, cli *client.Client, opts client.ContainerCreateOptions) (string, string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts.Name = Name(t)
	created, err := cli.ContainerCreate(ctx, opts)
	if err != nil {
		t.Fatalf("ContainerCreate: %v", err)
	}
	defer func() {
		if _, err := cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("ContainerRemove: %v", err)
		}
	}()
	wait := cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("ContainerStart: %v", err)
	}
	var code int64
	select {
	case res := <-wait.Result:
		code = res.StatusCode
	case err := <-wait.Error:
		t.Fatalf("ContainerWait: %v", err)
	}
	logs, err := cli.ContainerLogs(ctx, created.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("ContainerLogs: %v", err)
	}
	defer func() { _ = logs.Close() }()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, logs); err != nil {
		t.Fatalf("reading logs: %v", err)
	}
	return stdout.String(), stderr.String(), code
}

// LoadImage loads an image archive (docker save format) into the engine,
// as docker load does, and returns the error the engine reports, if any.
func LoadImage(ctx context.Context, cli *client.Client, archive io.Reader) error {
	rc, err := cli.ImageLoad(ctx, archive)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	return engineStreamError(rc)
}

// engineStreamError reads an engine's JSON progress stream (image load,
// import, pull) to its end and returns the first error it carries.
func engineStreamError(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the engine's answer: %w", err)
		}
		if msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

// Serve starts `hutch serve` (bin, with args after "serve") in env and
// waits up to 30 s for its socket sock (daemon.SocketPath of its state
// dir). At the test's end it gets SIGTERM and is waited for; a failed
// test logs what it printed.
func Serve(t testing.TB, bin, sock string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	_ = os.Remove(sock)
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = env
	var log LockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			t.Logf("hutch serve (pid %d) said:\n%s", cmd.Process.Pid, log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("hutch serve made no socket within 30 s:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LockedBuffer is a bytes.Buffer that a process or goroutines write while
// a test reads it.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
