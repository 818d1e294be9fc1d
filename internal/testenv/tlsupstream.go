package testenv

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	_ "embed" // the server's script
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// tlsUpstreamScript is the server TLSUpstream runs.
//
//go:embed tlsupstream.py
var tlsUpstreamScript []byte

// tlsUpstreamTimeout bounds starting the server, the image's build aside.
const tlsUpstreamTimeout = 2 * time.Minute

// TLSServer is an HTTPS server TLSUpstream started.
type TLSServer struct {
	// Container is the name of the server's container.
	Container string
	// IP is the container's address on its network; the server listens
	// on port 443.
	IP string
	// CAPEM is the PEM certificate of the CA that signed the server's
	// certificate, a CA of the server's own; Roots trusts it and nothing
	// else.
	CAPEM []byte
	Roots *x509.CertPool
	// Requests returns the requests the server has answered, oldest
	// first. It ends the test with t.Fatal when they cannot be read, so
	// it must be called from the test's goroutine.
	Requests func() []RecordedRequest
}

// RecordedRequest is a request as TLSUpstream's server received it. The
// server answers each request with the request's JSON, which
// json.Unmarshal reads into a RecordedRequest.
type RecordedRequest struct {
	Method string
	// Path is the request's path, without the query; Query the raw query,
	// without '?'.
	Path, Query string
	// Header holds every header line, names canonicalised.
	Header http.Header
	// Body is the body (Content-Length or chunked) as UTF-8, invalid
	// bytes replaced with U+FFFD.
	Body string
	// SNI is the server name the client's TLS handshake asked for, ""
	// when it sent none (curl sends none for an IP address).
	SNI string
	// Remote is the client's address as the server saw it.
	Remote string
}

// UnmarshalJSON reads one line of what the server recorded.
func (r *RecordedRequest) UnmarshalJSON(data []byte) error {
	var wire struct {
		Method, Path, Query, Body, SNI, Remote string
		Headers                                [][2]string
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		return err
	}
	*r = RecordedRequest{Method: wire.Method, Path: wire.Path, Query: wire.Query, Header: http.Header{}, Body: wire.Body, SNI: wire.SNI, Remote: wire.Remote}
	for _, kv := range wire.Headers {
		r.Header.Add(kv[0], kv[1])
	}
	return nil
}

// TLSUpstream starts an HTTPS server on port 443 in a container of its
// own, from DebianClientsImage (base is passed on to it), on the Docker
// network named network (made by the caller; "" is the engine's default
// bridge). Its certificate, for names and the container's IP, is signed
// by a CA made for this server alone. On a network other than the
// default, names are also the container's aliases there, so other
// containers of the network resolve them through the engine's DNS.
//
// The server answers every request (GET, HEAD, POST, PUT, PATCH, DELETE,
// OPTIONS) with 200 and a JSON description of it (see RecordedRequest),
// and records it for Requests. The container is removed when the test
// ends; a failed test logs what the server printed.
func TLSUpstream(t testing.TB, cli *client.Client, base DebianBase, network string, names ...string) TLSServer {
	t.Helper()
	img := DebianClientsImage(t, cli, base)
	ctx, cancel := context.WithTimeout(context.Background(), tlsUpstreamTimeout)
	defer cancel()
	name := Name(t)
	ca, err := newTestCA("hutch test CA " + name)
	if err != nil {
		t.Fatalf("TLSUpstream: making its CA: %v", err)
	}
	if err := startTLSUpstream(ctx, t, cli, img, name, network, names); err != nil {
		t.Fatalf("TLSUpstream: %v", err)
	}
	ip, err := containerIP(ctx, cli, name, network)
	if err != nil {
		t.Fatalf("TLSUpstream: %v", err)
	}
	certPEM, keyPEM, err := ca.issue(names, []net.IP{net.ParseIP(ip)})
	if err != nil {
		t.Fatalf("TLSUpstream: issuing its certificate: %v", err)
	}
	if err := serveTLSUpstream(ctx, cli, name, certPEM, keyPEM); err != nil {
		t.Fatalf("TLSUpstream: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	return TLSServer{
		Container: name,
		IP:        ip,
		CAPEM:     ca.pem,
		Roots:     roots,
		Requests: func() []RecordedRequest {
			t.Helper()
			reqs, err := recordedRequests(cli, name)
			if err != nil {
				t.Fatalf("TLSUpstream %s: reading its requests: %v", name, err)
			}
			return reqs
		},
	}
}

// Where in the server's container its files go; the shell waits for
// tlsUpstreamReady, copied last, before it starts the server.
const (
	tlsUpstreamDir   = "/srv"
	tlsUpstreamReady = tlsUpstreamDir + "/ready"
	tlsUpstreamLog   = tlsUpstreamDir + "/requests.jsonl"
)

// startTLSUpstream creates and starts the server's container, which
// waits for its files; its removal is a cleanup of t.
func startTLSUpstream(ctx context.Context, t testing.TB, cli *client.Client, img, name, netName string, names []string) error {
	opts := client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:  img,
			Cmd:    []string{"sh", "-c", "until [ -e " + tlsUpstreamReady + " ]; do sleep 0.05; done; exec python3 " + tlsUpstreamDir + "/upstream.py"},
			Labels: map[string]string{"org.hutchsandbox.test": name},
		},
		HostConfig: &container.HostConfig{},
	}
	if netName != "" {
		var aliases []string
		for _, n := range names {
			if !strings.Contains(n, "*") {
				aliases = append(aliases, n)
			}
		}
		opts.HostConfig.NetworkMode = container.NetworkMode(netName)
		opts.NetworkingConfig = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{netName: {Aliases: aliases}}}
	}
	if _, err := cli.ContainerCreate(ctx, opts); err != nil {
		return fmt.Errorf("creating its container: %w", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if t.Failed() {
			t.Logf("TLSUpstream %s printed:\n%s", name, ContainerOutput(ctx, cli, name))
		}
		if _, err := cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("TLSUpstream: removing %s: %v", name, err)
		}
	})
	if _, err := cli.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	return nil
}

// containerIP returns the address of container id on netName, or on its
// only network when netName is "".
func containerIP(ctx context.Context, cli *client.Client, id, netName string) (string, error) {
	res, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspecting %s: %w", id, err)
	}
	var nets map[string]*network.EndpointSettings
	if ns := res.Container.NetworkSettings; ns != nil {
		nets = ns.Networks
	}
	ep := nets[netName]
	if netName == "" && len(nets) == 1 {
		for _, e := range nets {
			ep = e
		}
	}
	if ep == nil || !ep.IPAddress.IsValid() {
		return "", fmt.Errorf("%s has no address on network %q (its networks: %v)", id, netName, nets)
	}
	return ep.IPAddress.String(), nil
}

// serveTLSUpstream copies the server's script, certificate and key into
// its container, and waits until it listens.
func serveTLSUpstream(ctx context.Context, cli *client.Client, name string, certPEM, keyPEM []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// The engine writes the entries in order: ready, last, tells the
	// container's shell that the others are whole.
	for _, f := range []struct {
		name string
		body []byte
	}{{"upstream.py", tlsUpstreamScript}, {"cert.pem", certPEM}, {"key.pem", keyPEM}, {"ready", nil}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Now()}); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := cli.CopyToContainer(ctx, name, client.CopyToContainerOptions{DestinationPath: tlsUpstreamDir, Content: &buf}); err != nil {
		return fmt.Errorf("copying its files into %s: %w", name, err)
	}
	// The server makes its log once it listens.
	for {
		_, err := cli.ContainerStatPath(ctx, name, client.ContainerStatPathOptions{Path: tlsUpstreamLog})
		if err == nil {
			return nil
		}
		if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("waiting for %s to listen: %w", name, err)
		}
		res, err := cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("waiting for %s to listen: %w", name, err)
		}
		if st := res.Container.State; st == nil || !st.Running {
			return fmt.Errorf("%s stopped before it listened:\n%s", name, ContainerOutput(ctx, cli, name))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not listen: %w\n%s", name, ctx.Err(), ContainerOutput(ctx, cli, name))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// recordedRequests reads the server's log out of its container.
func recordedRequests(cli *client.Client, name string) ([]RecordedRequest, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cli.CopyFromContainer(ctx, name, client.CopyFromContainerOptions{SourcePath: tlsUpstreamLog})
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Content.Close() }()
	tr := tar.NewReader(res.Content)
	if _, err := tr.Next(); err != nil {
		return nil, fmt.Errorf("reading the archive of %s: %w", tlsUpstreamLog, err)
	}
	var reqs []RecordedRequest
	sc := bufio.NewScanner(tr)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r RecordedRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("line %d of %s: %w", len(reqs)+1, tlsUpstreamLog, err)
		}
		reqs = append(reqs, r)
	}
	return reqs, sc.Err()
}

// ContainerOutput returns what container id wrote to stdout and stderr,
// interleaved, or why it could not be read.
func ContainerOutput(ctx context.Context, cli *client.Client, id string) string {
	logs, err := cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return fmt.Sprintf("(its output: %v)", err)
	}
	defer func() { _ = logs.Close() }()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(&out, "(reading its output: %v)", err)
	}
	return out.String()
}
