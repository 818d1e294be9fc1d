package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
)

// Podman's build endpoints (its Docker-compatible one and its own) run a
// build's RUN steps in the host's network namespace unless the request
// says otherwise with a parameter of Podman's own, nsoptions: its handler
// makes the host's namespace the default when nsoptions is absent.
// Measured on Podman 4.3: a RUN step then sees the host's interfaces and
// can reach whatever listens on the host's loopback, whichever
// networkmode is asked (Docker's "none" included; Buildah reads only its
// own numbers). The Docker client sends no nsoptions, so builds through
// Podman are started here, with the namespace private and networkmode as
// Buildah reads it: 1 no network but loopback, 2 the engine's default
// network.
const (
	podmanNetworkDisabled = "1"
	podmanNetworkEnabled  = "2"
)

// startBuild starts a build of the tar context body: through the Docker
// client, or on Podman with a private network namespace (see above). The
// caller closes the stream it returns.
func (e *Engine) startBuild(ctx context.Context, body io.Reader, opts client.ImageBuildOptions, offline bool) (io.ReadCloser, error) {
	if offline {
		opts.NetworkMode = "none"
	}
	if e.Flavor != FlavorPodman {
		res, err := e.Client.ImageBuild(ctx, body, opts)
		if err != nil {
			return nil, err
		}
		return res.Body, nil
	}
	q := url.Values{}
	for _, t := range opts.Tags {
		q.Add("t", t)
	}
	q.Set("dockerfile", opts.Dockerfile)
	q.Set("rm", "1")
	q.Set("forcerm", "1")
	if opts.Target != "" {
		q.Set("target", opts.Target)
	}
	if len(opts.BuildArgs) > 0 {
		b, err := json.Marshal(opts.BuildArgs)
		if err != nil {
			return nil, err
		}
		q.Set("buildargs", string(b))
	}
	q.Set("nsoptions", `[{"Name":"network","Host":false}]`)
	q.Set("networkmode", podmanNetworkEnabled)
	if offline {
		q.Set("networkmode", podmanNetworkDisabled)
	}
	version := e.APIVersion
	if version == "" {
		version = "1.41"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://podman/v"+version+"/build?"+q.Encode(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	dial := e.Client.Dialer()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer tr.CloseIdleConnections()
		defer func() { _ = resp.Body.Close() }()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(msg, &m) == nil && m.Message != "" {
			msg = []byte(m.Message)
		}
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return &closeAll{ReadCloser: resp.Body, tr: tr}, nil
}

// closeAll closes a response body and the transport it came through.
type closeAll struct {
	io.ReadCloser
	tr *http.Transport
}

func (c *closeAll) Close() error {
	err := c.ReadCloser.Close()
	c.tr.CloseIdleConnections()
	return err
}

// BuildFile builds dockerfile, with no context besides it, as tag with
// the classic builder (args as build args), streaming the build's lines
// to out (nil discards them), as BuildDockerfile does, and on Podman with
// a network namespace of the build's own (see above). Offline builds with
// no network but loopback. A failure names the step that failed and
// carries the engine's message.
func (e *Engine) BuildFile(ctx context.Context, dockerfile []byte, tag string, args map[string]*string, offline bool, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	buildCtx, err := contextTar(dockerfile)
	if err != nil {
		return fmt.Errorf("making the build context: %w", err)
	}
	return retryKilledStep(ctx, e.KillsBuildSteps(), out, func() error {
		body, err := e.startBuild(ctx, bytes.NewReader(buildCtx), client.ImageBuildOptions{
			Tags:        []string{tag},
			Dockerfile:  "Dockerfile",
			Remove:      true,
			ForceRemove: true,
			BuildArgs:   args,
			Version:     build.BuilderV1,
		}, offline)
		if err != nil {
			return fmt.Errorf("starting the image build: %w", err)
		}
		defer func() { _ = body.Close() }()
		return streamBuild(body, out)
	})
}
