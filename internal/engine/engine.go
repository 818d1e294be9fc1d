package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
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
//
// The engine's flavour and version come from the ping's headers (Server,
// and Libpod-Api-Version from Podman), not from GET /version: Podman
// answers that by asking dpkg which package holds each of its helpers,
// 1.8 s here, and it was asked on every connection of every hutch
// process (with GET /info, 1,468 dpkg-query processes and 4 minutes of
// CPU in one CI run). /version is asked only when the ping's Server
// header does not say (a proxy that drops it).
func Connect(ctx context.Context) (*Engine, error) {
	var seen pingHeaders
	cli, err := client.New(client.FromEnv, client.WithHTTPResponseHook(seen.record))
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Container engine address is not valid: %v. Check DOCKER_HOST.", err))
	}
	e := &Engine{Client: cli, Host: cli.DaemonHost()}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ping, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		_ = cli.Close()
		return nil, Unreachable(e.Host, err)
	}
	e.APIVersion = ping.APIVersion
	if flavor, version, ok := flavorOf(seen.get()); ok {
		e.Flavor, e.ServerVersion = flavor, version
		return e, nil
	}
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

// pingHeaders keeps the headers of the engine's first answer to a ping.
type pingHeaders struct {
	mu     sync.Mutex
	header http.Header
}

// record is the client's response hook: it sees every response, and
// keeps the headers of the first successful ping.
func (p *pingHeaders) record(resp *http.Response) {
	if resp.Request == nil || !strings.HasSuffix(resp.Request.URL.Path, "/_ping") || resp.StatusCode != http.StatusOK {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.header == nil {
		p.header = resp.Header.Clone()
	}
}

func (p *pingHeaders) get() http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.header
}

// flavorOf reads the engine's flavour and version from a ping's headers:
// Docker's Server header is "Docker/20.10.24+dfsg1 (linux)", Podman's
// "Libpod/4.3.1 (linux)" beside a Libpod-Api-Version header. ok is false
// when they do not say.
func flavorOf(h http.Header) (flavor Flavor, version string, ok bool) {
	name, rest, found := strings.Cut(h.Get("Server"), "/")
	if !found {
		return "", "", false
	}
	version, _, _ = strings.Cut(rest, " ")
	switch {
	case strings.EqualFold(name, "Libpod") || h.Get("Libpod-Api-Version") != "":
		return FlavorPodman, version, version != ""
	case strings.EqualFold(name, "Docker"):
		return FlavorDocker, version, version != ""
	}
	return "", "", false
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

// CanUpdateLimits reports whether the engine changes a running
// container's limits (POST /containers/{id}/update). Podman's
// Docker-compatible API has no such endpoint before Podman 5.1 (it answers
// 404), so there limits are fixed when the container is created.
func (e *Engine) CanUpdateLimits() bool {
	if e.Flavor != FlavorPodman {
		return true
	}
	var major, minor int
	if _, err := fmt.Sscanf(e.ServerVersion, "%d.%d", &major, &minor); err != nil {
		return true // an unknown version is taken to be a current one
	}
	return major > 5 || major == 5 && minor >= 1
}

// KillsBuildSteps reports whether the engine is a Podman before 4.6,
// which now and then kills a build step's runtime itself when the build
// runs beside other work (see killedStepText); hutch builds such a step
// again.
func (e *Engine) KillsBuildSteps() bool {
	if e.Flavor != FlavorPodman {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(e.ServerVersion, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major < 4 || major == 4 && minor < 6
}

// PodmanUntag removes every name of the image ref names and leaves the
// image, and any container made from it, alone. Docker does that for one
// name with a forced image removal; Podman's forced removal also removes
// every container that uses the image, and without force it refuses to
// remove an image's last name while a container uses it. So this calls
// Podman's own endpoint, which its Docker-compatible API lacks:
// POST /libpod/images/{name}/untag. (Every name, because the compatible
// API stored an unqualified name as docker.io/library/..., which the
// endpoint's repo parameter would read as localhost/....) A ref the
// engine does not know is an error that IsNotFound recognises.
func (e *Engine) PodmanUntag(ctx context.Context, ref string) error {
	u := "http://podman/v4.0.0/libpod/images/" + url.PathEscape(ref) + "/untag"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	dial := e.Client.Dialer()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("untag %s: %w", ref, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("untag %s: %s: %w", ref, bytes.TrimSpace(body), cerrdefs.ErrNotFound)
	}
	return fmt.Errorf("untag %s: %s: %s", ref, resp.Status, bytes.TrimSpace(body))
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
	case IsConflict(err):
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
func IsConflict(err error) bool {
	return cerrdefs.IsConflict(err) || cerrdefs.IsAlreadyExists(err) || podmanNameInUse(err)
}

// podmanNameInUse recognises Podman 4's answer to a create under a name
// that is taken: status 500, not Docker's 409, with containers/storage's
// ErrDuplicateName text.
func podmanNameInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "that name is already in use")
}
