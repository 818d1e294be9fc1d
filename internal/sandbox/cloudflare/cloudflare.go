// Package cloudflare is the cloudflare:<sandbox-id> sandbox mode: the
// client of a bridge, a service that runs commands for hutch on another
// machine (a Cloudflare Worker in front of Cloudflare Sandboxes, or
// `hutch bridge serve`). docs/bridge.md is the protocol.
//
// The client speaks the protocol's base, which bridges written for the
// reference system already answer, and uses an extension (streamed
// output, cancel, exec ids, argv, stdin) only when the bridge's health
// answer advertises it. Every conversation has a remote runtime of its
// own, named <sandbox-id>-<office key>. Vault env travels with each
// command; vault files are refused by policy (the capability table), and
// the host workspace is not synced: the remote /workspace is the remote
// runtime's own.
//
// Robustness: a request that could not be sent (the dial failed) is
// retried with the same exec id; a request that was sent is never
// retried, so a command never runs twice. A bridge that goes away while a
// command runs ends that command with an error saying its end is unknown,
// and the next command checks the bridge's health again.
package cloudflare

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// The protocol's extensions, as a bridge lists them in its health answer.
const (
	ExtStream = protocol.ExtStream
	ExtCancel = protocol.ExtCancel
	ExtExecID = protocol.ExtExecID
	ExtArgv   = protocol.ExtArgv
	ExtStdin  = protocol.ExtStdin
)

const (
	// healthTimeout bounds one health check.
	healthTimeout = 10 * time.Second
	// cancelTimeout bounds the POST /cancel sent when a command is aborted
	// or the client gives up waiting for it.
	cancelTimeout = 5 * time.Second
	// defaultGrace is how long past a command's timeout the client waits
	// for the bridge to report it before giving up on the bridge.
	defaultGrace = 10 * time.Second
	// maxErrorBody bounds what is read of a non-2xx answer or a health body.
	maxErrorBody = 64 << 10
)

// defaultRetryDelays are the pauses before each retry of a request that
// could not be sent: two retries.
var defaultRetryDelays = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond}

// Runtime runs commands through one bridge. It is safe for concurrent use.
type Runtime struct {
	cfg     Config
	base    *url.URL
	display string // the URL as error texts name it (password redacted)
	client  *http.Client
	log     *slog.Logger
	// grace, retryDelays and stdinChunk are constants that tests shorten.
	grace       time.Duration
	retryDelays []time.Duration
	stdinChunk  int

	mu     sync.Mutex // guards the following
	health *Health    // the last good health answer; nil: check before the next command
}

var (
	_ sandbox.Runtime = (*Runtime)(nil)
	_ sandbox.Checker = (*Runtime)(nil)
)

// New returns the runtime of one cloudflare:<sandbox-id> mode. It checks
// the config and reads CAFile but does not reach the bridge: Health does,
// and Exec before the first command. Errors are of class
// errdefs.ErrInvalid (a bad URL, an unreadable CA file).
func New(cfg Config) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client := cfg.HTTPClient
	if client == nil {
		if client, err = newHTTPClient(cfg.CAFile); err != nil {
			return nil, err
		}
	}
	return &Runtime{
		cfg:         cfg,
		base:        base,
		display:     base.Redacted(),
		client:      client,
		log:         log.With("mode", "cloudflare", "bridge", base.Redacted()),
		grace:       defaultGrace,
		retryDelays: defaultRetryDelays,
		stdinChunk:  defaultStdinChunk,
	}, nil
}

// newHTTPClient is the default transport with the system roots plus
// those of caFile, and enough idle connections per host that concurrent
// warm commands do not dial each time.
func newHTTPClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("The bridge CA file %s (%s) cannot be read: %v", caFile, EnvCA, errors.Unwrap(err)))
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("The bridge CA file %s (%s) holds no PEM certificate", caFile, EnvCA))
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, nil
}

// Mode returns cloudflare:<sandbox-id>.
func (r *Runtime) Mode() sandbox.Mode {
	return sandbox.Mode{Kind: sandbox.KindCloudflare, Target: r.cfg.SandboxID}
}

// Capabilities returns what cloudflare mode declares in the capability table.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.CapabilitiesOf(sandbox.KindCloudflare)
}

// URL is the bridge's URL as messages name it.
func (r *Runtime) URL() string { return r.display }

// Health is what a bridge says about itself.
type Health struct {
	// Bridge and Version name the bridge's software ("hutch", "1.2.3");
	// empty for a base bridge.
	Bridge, Version string
	// Extensions are the protocol extensions the bridge advertises; empty
	// for a base bridge.
	Extensions []string
}

// Has reports whether the bridge advertises the extension ext.
func (h Health) Has(ext string) bool { return slices.Contains(h.Extensions, ext) }

// healthBody is the health answer of a bridge with extensions
// (protocol.Health, with an "ok" that may be missing).
type healthBody struct {
	OK         *bool    `json:"ok"`
	Bridge     string   `json:"bridge"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

// Health asks the bridge whether it can run commands (GET /health) and
// remembers the answer for the commands that follow. An unreachable
// bridge, a non-2xx answer or an answer saying "ok": false is an error of
// class errdefs.ErrUnavailable naming the URL.
func (r *Runtime) Health(ctx context.Context) (Health, error) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	resp, _, err := r.send(ctx, http.MethodGet, protocol.PathHealth, nil)
	if err != nil {
		r.forgetHealth()
		if errors.Is(err, context.DeadlineExceeded) {
			return Health{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The bridge at %s did not answer its health check within %v", r.display, healthTimeout))
		}
		return Health{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The bridge at %s is not reachable: %s", r.display, r.scrub(transportCause(err))))
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		r.forgetHealth()
		return Health{}, errdefs.New(errdefs.ErrUnavailable, r.refusalText(resp.StatusCode, body, "is not healthy"))
	}
	var h Health
	var hb healthBody
	if json.Unmarshal(body, &hb) == nil {
		if hb.OK != nil && !*hb.OK {
			r.forgetHealth()
			return Health{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The bridge at %s is not healthy: it answered \"ok\": false", r.display))
		}
		h = Health{Bridge: hb.Bridge, Version: hb.Version, Extensions: hb.Extensions}
	} // else a base bridge: any 2xx body means healthy.
	r.mu.Lock()
	r.health = &h
	r.mu.Unlock()
	r.log.Debug("bridge healthy", "bridge_software", h.Bridge, "version", h.Version, "extensions", h.Extensions)
	return h, nil
}

// Check verifies the bridge answers its health check.
func (r *Runtime) Check(ctx context.Context) error {
	_, err := r.Health(ctx)
	return err
}

// cachedHealth returns the remembered health answer, asking the bridge
// when there is none.
func (r *Runtime) cachedHealth(ctx context.Context) (Health, error) {
	r.mu.Lock()
	h := r.health
	r.mu.Unlock()
	if h != nil {
		return *h, nil
	}
	return r.Health(ctx)
}

// forgetHealth makes the next command check the bridge again: after a
// connection failure the bridge may have restarted, with other extensions.
func (r *Runtime) forgetHealth() {
	r.mu.Lock()
	r.health = nil
	r.mu.Unlock()
}

// send makes one request, retrying (with the same body) only while no
// connection could be made, so the bridge never saw it. sent reports
// whether the request may have reached the bridge. The caller closes the
// response body.
func (r *Runtime) send(ctx context.Context, method, path string, body []byte) (resp *http.Response, sent bool, err error) {
	for attempt := 0; ; attempt++ {
		var connected bool
		trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected = true }}
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, r.base.String()+path, rd)
		if err != nil {
			return nil, false, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Cannot make a request to the bridge at %s: %v", r.display, err))
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, application/x-ndjson")
		if r.cfg.Token != "" {
			req.Header.Set("Authorization", "Bearer "+r.cfg.Token)
		}
		resp, err := r.client.Do(req)
		if err == nil {
			return resp, true, nil
		}
		if connected || ctx.Err() != nil || attempt >= len(r.retryDelays) || !retryable(err) {
			return nil, connected, err
		}
		r.log.Debug("bridge not reached; retrying", "path", path, "attempt", attempt+1, "err", transportCause(err))
		t := time.NewTimer(r.retryDelays[attempt])
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		case <-t.C:
		}
	}
}

// retryable reports whether a failure to connect may pass: not one of
// a certificate the client will never trust.
func retryable(err error) bool {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	return !errors.As(err, &unknown) && !errors.As(err, &hostname) && !errors.As(err, &verify)
}

// transportCause strips the url.Error wrapper (its text repeats the
// method and URL, which the messages name themselves).
func transportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// errorBody is the body of a bridge's non-2xx answer.
type errorBody struct {
	Error  string `json:"error"`
	Stderr string `json:"stderr"`
}

// bridgeMessage is what a non-2xx answer says: its error, else its
// stderr, else its status.
func bridgeMessage(status int, body []byte) string {
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil {
		if s := strings.TrimSpace(eb.Error); s != "" {
			return s
		}
		if s := strings.TrimSpace(eb.Stderr); s != "" {
			return s
		}
	}
	return fmt.Sprintf("bridge returned HTTP %d", status)
}

// refusalText renders a non-2xx answer for a person: what the bridge
// said, with the token scrubbed should a bridge echo it.
func (r *Runtime) refusalText(status int, body []byte, what string) string {
	msg := r.scrub(bridgeMessage(status, body))
	if status == http.StatusUnauthorized {
		if r.cfg.Token == "" {
			return fmt.Sprintf("The bridge at %s requires a token (%s): set %s (or %s)", r.display, msg, EnvToken, EnvCloudflareToken)
		}
		return fmt.Sprintf("The bridge at %s refused the token (%s): check %s (or %s)", r.display, msg, EnvToken, EnvCloudflareToken)
	}
	return fmt.Sprintf("The bridge at %s %s: %s", r.display, what, msg)
}

// minScrubbed is the shortest token scrub looks for: replacing a
// shorter one would mangle ordinary words, and hide nothing worth hiding.
const minScrubbed = 8

// scrub removes the token from a text that may quote a bridge or a
// transport error.
func (r *Runtime) scrub(v any) string {
	s := fmt.Sprint(v)
	if len(r.cfg.Token) >= minScrubbed {
		s = strings.ReplaceAll(s, r.cfg.Token, "[token]")
	}
	return s
}
