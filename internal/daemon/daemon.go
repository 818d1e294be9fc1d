// Package daemon wires hutch serve: it validates the mode, reconciles the
// managed runtimes, serves the API on a unix socket in the state dir (and
// on TCP behind a bearer token when asked), stops idle runtimes, and on
// SIGINT/SIGTERM stops accepting work, lets running commands finish for a
// grace period, kills what is left, and returns.
package daemon

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/admin"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/httpstatus"
	"github.com/hutchsandbox/hutch/internal/mcpserver"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// SocketName is the API socket inside the state dir.
const SocketName = "hutch.sock"

// TokenName is where a generated TCP token is kept (0600).
const TokenName = "api-token"

// Options configure one daemon.
type Options struct {
	Service *service.Service
	Mode    sandbox.Mode
	// TCP, when set, also serves the API on that address; a bearer token
	// is then mandatory: Token, or one generated into <state>/api-token.
	TCP   string
	Token string
	// Grace is how long running commands may finish at shutdown (default 30 s).
	Grace time.Duration
	// Version is reported by /v1/health.
	Version string
	// Out receives what the daemon chose at start; Log the rest.
	Out io.Writer
	Log *slog.Logger
	// Ready, when set, is called once the API answers.
	Ready func(socket string)
	// Admin, when set, serves the admin portal on that TCP address
	// (default of hutch serve: a free port on 127.0.0.1); AdminURL is
	// where browsers reach it, when not at that address (a proxy, TLS).
	Admin, AdminURL string
	// TLSCert and TLSKey, when set, are the PEM files the TCP listeners
	// (the API and the admin portal) serve TLS with. Without them a TCP
	// listener must be on a loopback address: the bearer token and the
	// portal's session cookie would cross the network in clear.
	TLSCert, TLSKey string
}

// idleTimeout closes keep-alive connections that carry nothing for this
// long; the header timeout bounds a client that never finishes its
// request line. Bodies have no deadline: an exec's stdin may stream for
// as long as its command runs.
const (
	idleTimeout       = 2 * time.Minute
	readHeaderTimeout = 10 * time.Second
)

// tlsConfig loads the certificate the TCP listeners serve, or returns nil
// when none is configured.
func (o Options) tlsConfig() (*tls.Config, error) {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, errdefs.New(errdefs.ErrInvalid, "TLS needs both a certificate and its key (--tls-cert and --tls-key)")
	}
	if o.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Cannot load the TLS certificate %s with key %s: %v", o.TLSCert, o.TLSKey, err))
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// listenTCP listens on addr for what (the API, the admin portal): with
// TLS when tc is set; without, only on a loopback address, judged by
// the address actually bound (a host name, an empty host or 0.0.0.0
// bind wider than they read). It returns the listener and its URL.
func listenTCP(addr, what string, tc *tls.Config) (net.Listener, string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Cannot serve %s on %s: %v", what, addr, err))
	}
	if tc != nil {
		return tls.NewListener(l, tc), "https://" + l.Addr().String(), nil
	}
	if ta, ok := l.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		_ = l.Close()
		return nil, "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
			"Serving %s on %s (not a loopback address) needs TLS, or its secrets cross the network in clear: give --tls-cert and --tls-key, or listen on 127.0.0.1 behind a proxy that terminates TLS.", what, addr))
	}
	return l, "http://" + l.Addr().String(), nil
}

// SocketPath is where a state dir's daemon listens.
func SocketPath(stateDir string) string { return filepath.Join(stateDir, SocketName) }

// Run serves until ctx ends, then shuts down in order.
func Run(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
	}
	svc := o.Service
	layout := svc.Layout()
	m := metrics.New(o.Version)
	svc.SetMetrics(m)
	// Changes no caller names (idle stops, the disk ceiling's) are the
	// daemon's own.
	svc.SetSurface(events.SurfaceDaemon)
	if err := validate(ctx, svc, o.Mode); err != nil {
		return err
	}
	var idle time.Duration
	if sandbox.CapabilitiesOf(o.Mode.Kind).ManagedLifecycle {
		rep, err := svc.ReconcileMode(ctx, o.Mode)
		if err != nil {
			return fmt.Errorf("reconcile managed runtimes: %w", err)
		}
		o.Log.Info("reconciled", "adopted", len(rep.Adopted), "removed", len(rep.Removed))
		m.Event(o.Mode.Kind, metrics.EventReconciled, len(rep.Removed))
		m.WatchRuntimes(o.Mode.Kind, func(ctx context.Context) (metrics.Runtimes, error) {
			return svc.ManagedFor(ctx, o.Mode)
		})
		if idle, err = svc.IdleDuration(); err != nil {
			return err
		}
	}
	tc, err := o.tlsConfig()
	if err != nil {
		return err
	}
	sock := SocketPath(layout.StateDir)
	ul, err := listenUnix(sock)
	if err != nil {
		return err
	}
	srv := &api.Server{Service: svc, Mode: o.Mode, Version: o.Version, Log: o.Log, Metrics: m.Handler(),
		MCP: mcpserver.HTTPHandler(svc, o.Mode, o.Log)}
	var (
		portal *http.Server
		pl     net.Listener
		pURL   string
	)
	if o.Admin != "" {
		var listenURL string
		if pl, listenURL, err = listenTCP(o.Admin, "the admin portal", tc); err != nil {
			_ = ul.Close()
			return err
		}
		pURL = o.AdminURL
		if pURL == "" {
			pURL = listenURL
		}
		ad, err := admin.New(admin.Options{Service: svc, Mode: o.Mode, BaseURL: pURL, Log: o.Log})
		if err != nil {
			_ = pl.Close()
			return err
		}
		srv.AdminLink = ad.Link
		portal = &http.Server{Handler: countPortalRefusals(svc, ad.Handler()), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}
	}
	// Requests live under reqCtx: when the grace period ends, cancelling
	// it aborts running commands (killing their process groups) and lets
	// their handlers still write the "aborted" result before closing.
	reqCtx, abortRequests := context.WithCancel(context.Background())
	defer abortRequests()
	base := func(net.Listener) context.Context { return reqCtx }
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, BaseContext: base}
	// Clients that follow the event log do not hold the shutdown up.
	hs.RegisterOnShutdown(srv.EndStreams)
	errc := make(chan error, 3)
	go func() { errc <- hs.Serve(ul) }()
	if portal != nil {
		go func() { errc <- portal.Serve(pl) }()
	}
	var ths *http.Server
	if o.TCP != "" {
		token := o.Token
		if token == "" {
			if token, err = loadOrMakeToken(filepath.Join(layout.StateDir, TokenName)); err != nil {
				return err
			}
		}
		tl, tURL, err := listenTCP(o.TCP, "the API", tc)
		if err != nil {
			_ = ul.Close()
			if pl != nil {
				_ = pl.Close()
			}
			return err
		}
		tsrv := *srv
		tsrv.Token = token
		ths = &http.Server{Handler: tsrv.Handler(), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, BaseContext: base}
		ths.RegisterOnShutdown(tsrv.EndStreams)
		go func() { errc <- ths.Serve(tl) }()
		// The banner's writes are best-effort: the servers are up, and a
		// daemon does not stop because its standard output went away.
		_, _ = fmt.Fprintf(o.Out, "  TCP:         %s (bearer token in %s)\n", tURL, filepath.Join(layout.StateDir, TokenName))
	}
	_, _ = fmt.Fprintf(o.Out, "hutch serve: ready\n  Sandbox:     %s\n  State dir:   %s\n  Workspace:   %s\n  Socket:      %s\n", o.Mode, layout.StateDir, layout.Workspace, sock)
	if idle > 0 {
		_, _ = fmt.Fprintf(o.Out, "  Idle stop:   after %s\n", idle)
	}
	if o.Mode.Kind == sandbox.KindImage {
		_, _ = fmt.Fprintf(o.Out, "  Warm pool:   %s\n", svc.PoolBanner(ctx, o.Mode))
	}
	if portal != nil {
		_, _ = fmt.Fprintf(o.Out, "  Admin:       %s/admin/ (sign in with a link from hutch admin link)\n", pURL)
	}
	_, _ = fmt.Fprintf(o.Out, "Try: curl --unix-socket %s -d '{\"conversation\":{\"platform\":\"web\",\"conversationId\":\"hello\"},\"command\":\"echo hello\"}' http://hutch/v1/exec\n", sock)
	if o.Ready != nil {
		o.Ready(sock)
	}
	idleDone := make(chan struct{})
	idleCtx, stopIdle := context.WithCancel(context.Background())
	go func() {
		defer close(idleDone)
		var wg sync.WaitGroup
		wg.Go(func() { diskLoop(idleCtx, svc, o.Mode, o.Log) })
		wg.Go(func() { svc.KeepPool(idleCtx, o.Mode) })
		if idle > 0 {
			idleLoop(idleCtx, svc, o.Mode, idle, o.Log, m)
		}
		wg.Wait()
	}()

	select {
	case <-ctx.Done():
	case err := <-errc:
		stopIdle()
		<-idleDone
		return fmt.Errorf("API server: %w", err)
	}
	o.Log.Info("shutting down: no new work; running commands may finish", "grace", o.Grace)
	stopIdle()
	<-idleDone
	var errs []error
	servers := []*http.Server{hs}
	if ths != nil {
		servers = append(servers, ths)
	}
	if portal != nil {
		servers = append(servers, portal)
	}
	shutdown := func(d time.Duration) error {
		sctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var errs []error
		for _, s := range servers {
			errs = append(errs, s.Shutdown(sctx))
		}
		return errors.Join(errs...)
	}
	if err := shutdown(o.Grace); err != nil {
		// Grace is over: abort what still runs (its process groups are
		// killed), give the handlers a moment to report it, then close.
		o.Log.Warn("grace period over; killing running commands")
		abortRequests()
		if err := shutdown(5 * time.Second); err != nil {
			for _, s := range servers {
				errs = append(errs, s.Close())
			}
		}
	}
	_ = os.Remove(sock)
	_ = svc.Close()
	return errors.Join(errs...)
}

// countPortalRefusals counts in hutch_refusals_total the portal's
// refusals of whoever asks, which it answers before any page runs: 401
// (no session) as unauthorized, 403 (a request from another site, a
// stale form, a sign-in link that is not valid) as forbidden. The portal
// counts the refusals of what is asked itself, where it answers them.
func countPortalRefusals(svc *service.Service, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &httpstatus.Recorder{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		switch sw.Status {
		case http.StatusUnauthorized:
			svc.CountRefused(r.Context(), metrics.SurfacePortal, metrics.ReasonUnauthorized)
		case http.StatusForbidden:
			svc.CountRefused(r.Context(), metrics.SurfacePortal, metrics.ReasonForbidden)
		}
	})
}

// validate refuses to start in a mode that cannot work here, with the
// reason and a hint.
func validate(ctx context.Context, svc *service.Service, m sandbox.Mode) error {
	switch m.Kind {
	case sandbox.KindHost:
		return nil
	case sandbox.KindContainer, sandbox.KindImage, sandbox.KindCloudflare, sandbox.KindGondolin, sandbox.KindKube:
		return svc.ValidateMode(ctx, m)
	}
	return sandbox.NotImplemented(m)
}

// listenUnix listens on the socket (0600), replacing a stale one but
// refusing when another daemon answers there.
func listenUnix(path string) (net.Listener, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return nil, errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Another hutch serve already listens on %s; stop it first", path))
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}

// every runs fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

// idleLoop stops idle runtimes until ctx ends.
func idleLoop(ctx context.Context, svc *service.Service, mode sandbox.Mode, idle time.Duration, log *slog.Logger, m *metrics.Set) {
	every(ctx, min(max(idle/4, time.Second), 30*time.Second), func() {
		lc, err := svc.ManagedFor(ctx, mode)
		if err != nil {
			log.Warn("idle stop", "error", err)
			return
		}
		stopped, err := lc.StopIdle(ctx, idle)
		m.Event(mode.Kind, metrics.EventIdleStop, len(stopped))
		for _, k := range stopped {
			log.Info("stopped idle runtime", "office_key", k)
		}
		if err != nil {
			log.Warn("idle stop", "error", err)
		}
	})
}

// diskTick is how often the daemon counts what runtimes hold outside
// their mounts where the engine cannot cap it: at a host disk's write
// speed a runtime may overshoot its ceiling by this much time's writes
// before it is stopped.
const diskTick = 15 * time.Second

// diskLoop stops runtimes over the disk ceiling until ctx ends
// (Service.EnforceDisk; modes whose engine caps the disk do nothing).
func diskLoop(ctx context.Context, svc *service.Service, mode sandbox.Mode, log *slog.Logger) {
	switch mode.Kind {
	case sandbox.KindImage, sandbox.KindGondolin, sandbox.KindKube:
	default:
		return
	}
	every(ctx, diskTick, func() {
		stopped, err := svc.EnforceDisk(ctx, mode)
		for _, k := range stopped {
			log.Warn("stopped a runtime over the disk ceiling", "office_key", k)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("disk ceiling", "error", err)
		}
	})
}

func loadOrMakeToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(data))) >= 32 {
		return strings.TrimSpace(string(data)), nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	if err := atomicfile.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", err
	}
	return tok, nil
}
