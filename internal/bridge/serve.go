package bridge

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
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TokenName is the file in the state dir that holds a generated token.
const TokenName = "bridge-token"

// DefaultGrace is how long running commands may finish at shutdown.
const DefaultGrace = 30 * time.Second

// ServeOptions configure Serve.
type ServeOptions struct {
	Options
	// Listen is the TCP address to serve on ("127.0.0.1:7879", ":7879").
	Listen string
	// TLSCert and TLSKey (PEM files, both or neither) serve HTTPS.
	TLSCert, TLSKey string
	// Grace is how long running commands may finish at shutdown before
	// they are killed (default DefaultGrace).
	Grace time.Duration
	// TokenFrom says where the token is, for the banner: a file, or
	// "$HUTCH_BRIDGE_TOKEN". Never the token itself.
	TokenFrom string
	// Out receives the banner; nil discards.
	Out io.Writer
	// Ready, when set, is called with the bridge's URL once it answers.
	Ready func(url string)
}

// Serve checks the mode, then serves the bridge on o.Listen until ctx
// ends: it stops accepting, lets running commands finish for o.Grace,
// kills what is left, and returns nil. In image mode it first adopts the
// managed runtimes of known offices (as hutch serve does) and, while it
// runs, stops idle ones. The caller closes o.Service.
func Serve(ctx context.Context, o ServeOptions) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Listen == "" {
		return errdefs.New(errdefs.ErrInvalid, "Give the address to listen on, e.g. --listen 127.0.0.1:7879")
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return errdefs.New(errdefs.ErrInvalid, "Give --tls-cert and --tls-key together, or neither")
	}
	h, err := New(o.Options)
	if err != nil {
		return err
	}
	var tlsConf *tls.Config
	if o.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Cannot load the TLS certificate %s and key %s: %v", o.TLSCert, o.TLSKey, err))
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	svc := o.Service
	if err := svc.ValidateMode(ctx, o.Mode); err != nil {
		return fmt.Errorf("cannot serve sandbox %s: %w", o.Mode, err)
	}
	var idle time.Duration
	if sandbox.CapabilitiesOf(o.Mode.Kind).ManagedLifecycle {
		rep, err := svc.ReconcileMode(ctx, o.Mode)
		if err != nil {
			return fmt.Errorf("reconcile managed runtimes: %w", err)
		}
		o.Log.Info("reconciled", "adopted", len(rep.Adopted), "removed", len(rep.Removed))
		if idle, err = svc.IdleDuration(); err != nil {
			return err
		}
	}

	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Cannot listen on %s: %v", o.Listen, err))
	}
	// Requests live under reqCtx: when the grace period ends, cancelling
	// it aborts running commands (killing their process groups).
	reqCtx, abortRequests := context.WithCancel(context.Background())
	defer abortRequests()
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         tlsConf,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ErrorLog:          slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
		go func() { errc <- hs.ServeTLS(l, "", "") }()
	} else {
		go func() { errc <- hs.Serve(l) }()
	}
	url := scheme + "://" + l.Addr().String()
	// The banner's writes are best-effort: the server is up, and it does
	// not stop because its standard output went away.
	_, _ = fmt.Fprintf(o.Out, "hutch bridge: serving %s on %s (token in %s)\n", o.Mode, url, o.TokenFrom)
	if strings.HasPrefix(o.TokenFrom, "/") {
		_, _ = fmt.Fprintf(o.Out, "Read the token with: cat %s\n", o.TokenFrom)
	}
	if o.Ready != nil {
		o.Ready(url)
	}

	idleCtx, stopIdle := context.WithCancel(context.Background())
	idleDone := make(chan struct{})
	go func() {
		defer close(idleDone)
		if idle > 0 {
			idleLoop(idleCtx, o, idle)
		}
	}()
	defer func() {
		stopIdle()
		<-idleDone
	}()

	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("bridge server: %w", err)
	}
	o.Log.Info("shutting down: no new requests; running commands may finish", "grace", o.Grace)
	shutdown := func(d time.Duration) error {
		sctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return hs.Shutdown(sctx)
	}
	if err := shutdown(o.Grace); err != nil {
		o.Log.Warn("grace period over; killing running commands")
		abortRequests()
		if err := shutdown(5 * time.Second); err != nil {
			return errors.Join(err, hs.Close())
		}
	}
	return nil
}

// idleLoop stops idle managed runtimes until ctx ends.
func idleLoop(ctx context.Context, o ServeOptions, idle time.Duration) {
	t := time.NewTicker(min(max(idle/4, time.Second), 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lc, err := o.Service.ManagedFor(ctx, o.Mode)
		if err != nil {
			o.Log.Warn("idle stop", "error", err)
			continue
		}
		stopped, err := lc.StopIdle(ctx, idle)
		for _, k := range stopped {
			o.Log.Info("stopped idle runtime", "office_key", k)
		}
		if err != nil {
			o.Log.Warn("idle stop", "error", err)
		}
	}
}

// LoadOrCreateToken returns the token kept in path, generating one (32
// random bytes, hex) into it (0600) when there is none. A token file
// others can read is refused.
func LoadOrCreateToken(path string) (string, error) {
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		if fi.Mode().Perm()&0o077 != 0 {
			return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"Token file %s can be read by others (mode %04o); fix with: chmod 600 %s", path, fi.Mode().Perm(), path))
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("read the bridge token: %w", err)
		}
		if tok := strings.TrimSpace(string(data)); tok != "" {
			return tok, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("bridge token: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	if err := atomicfile.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the bridge token: %w", err)
	}
	return tok, nil
}
