package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Flavor tells engines apart where they differ in behaviour.
type Flavor string

const (
	// FlavorDocker is Docker Engine.
	FlavorDocker Flavor = "docker"
	// FlavorPodman is Podman's Docker-compatible service.
	FlavorPodman Flavor = "podman"
)

// Engine is a connected engine.
type Engine struct {
	// Client is the negotiated Engine API client.
	Client *client.Client
	// Host is the address it talks to (DOCKER_HOST or the default socket).
	Host string
	// APIVersion is the negotiated API version.
	APIVersion string
	// Flavor is Docker or Podman.
	Flavor Flavor
	// ServerVersion is the engine's own version string.
	ServerVersion string
}

// Connect makes a client from the environment (DOCKER_HOST and friends),
// negotiates the API version and checks the engine answers. An engine
// that does not answer yields one ErrUnavailable error saying how to
// start one.
func Connect(ctx context.Context) (*Engine, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Container engine address is not valid: %v. Check DOCKER_HOST.", err))
	}
	e := &Engine{Client: cli, Host: cli.DaemonHost()}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ping, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		cli.Close()
		return nil, Unreachable(e.Host, err)
	}
	e.APIVersion = ping.APIVersion
	e.Flavor = FlavorDocker
	if v, err := cli.ServerVersion(pctx, client.ServerVersionOptions{}); err == nil {
		e.ServerVersion = v.Version
		for _, c := range v.Components {
			if strings.Contains(strings.ToLower(c.Name), "podman") {
				e.Flavor = FlavorPodman
			}
		}
	}
	return e, nil
}

// Close releases the client.
func (e *Engine) Close() error { return e.Client.Close() }

// HostGateway is the name a container on a bridge network uses to reach
// the host: Docker adds host.docker.internal on request, Podman serves
// host.containers.internal.
func (e *Engine) HostGateway() string {
	if e.Flavor == FlavorPodman {
		return "host.containers.internal"
	}
	return "host.docker.internal"
}

// Unreachable is the one message for an engine that does not answer.
func Unreachable(host string, cause error) error {
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	detail := cause.Error()
	if errors.Is(cause, os.ErrPermission) || strings.Contains(detail, "permission denied") {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
			"Permission denied on the container engine at %s. Run hutch as a user in the docker group, or as root.", host))
	}
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
		"No container engine answers at %s (%s). Start one: `sudo systemctl start docker` or `sudo dockerd &` "+
			"(install it with `sudo apt-get install docker.io`), or point DOCKER_HOST at Podman's socket: "+
			"`podman system service --time=0 unix:///run/podman/podman.sock &` then `export DOCKER_HOST=unix:///run/podman/podman.sock`.",
		host, firstLine(detail)))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Classify maps an engine error onto hutch's error classes, keeping the
// engine's text as context. A nil error stays nil.
func Classify(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%s: %w", what, Unreachable("", err))
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%s: %v: %w", what, err, errdefs.ErrNotFound)
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		return fmt.Errorf("%s: %v: %w", what, err, errdefs.ErrConflict)
	case cerrdefs.IsInvalidArgument(err):
		return fmt.Errorf("%s: %v: %w", what, err, errdefs.ErrInvalid)
	case cerrdefs.IsUnavailable(err), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %v: %w", what, err, errdefs.ErrUnavailable)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// IsNotFound reports whether an engine error means "no such object".
func IsNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// IsConflict reports whether an engine error means "already exists" or
// "in use", as a racing create or a remove of a busy object gets.
func IsConflict(err error) bool { return cerrdefs.IsConflict(err) || cerrdefs.IsAlreadyExists(err) }
