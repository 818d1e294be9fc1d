package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// hostService is a service in host mode over a fresh state dir under dir.
func hostService(dir string) (*service.Service, error) {
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(dir, "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		return nil, err
	}
	return service.New(layout, nil), nil
}

// tcpDaemon serves the real API handler in host mode over TCP behind
// token, as hutch serve --listen does, and returns a client of it (with
// the token) and a function that stops it and removes its state.
func tcpDaemon(token string) (*client.Client, func(), error) {
	dir, err := os.MkdirTemp("", "hutch-client-")
	if err != nil {
		return nil, nil, err
	}
	svc, err := hostService(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	srv := &api.Server{Service: svc, Mode: sandbox.Mode{Kind: sandbox.KindHost}, Token: token, Version: "example"}
	ts := httptest.NewServer(srv.Handler())
	return client.Remote(ts.URL, token), func() {
		ts.Close()
		_ = svc.Close()
		_ = os.RemoveAll(dir)
	}, nil
}

// unixDaemon runs hutch's daemon (daemon.Run, host mode) on the unix
// socket of a fresh state dir under dir, and returns that state dir and a
// function that stops the daemon and returns what Run returned.
func unixDaemon(dir string) (string, func() error, error) {
	svc, err := hostService(dir)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{Service: svc, Mode: sandbox.Mode{Kind: sandbox.KindHost}, Grace: time.Second, Version: "test", Out: io.Discard, Ready: func(sock string) { ready <- sock }})
	}()
	stop := func() error {
		cancel()
		err := <-done
		_ = svc.Close()
		return err
	}
	select {
	case <-ready:
		return svc.Layout().StateDir, stop, nil
	case err := <-done:
		cancel()
		_ = svc.Close()
		return "", nil, fmt.Errorf("daemon.Run returned before ready: %v", err)
	case <-time.After(60 * time.Second):
		return "", nil, fmt.Errorf("daemon not ready within 60 s: %v", stop())
	}
}
