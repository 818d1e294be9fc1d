package kube

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// TestUpgradeFailed: the SPDY fallback is taken when an API server (or a
// proxy in front of it) answers the WebSocket exec without upgrading, as
// client-go's own executor reports it, and not for any other error.
func TestUpgradeFailed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no upgrades here", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	ws, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: srv.URL}, "GET", srv.URL+"/api/v1/namespaces/ns/pods/p/exec")
	if err != nil {
		t.Fatal(err)
	}
	err = ws.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard})
	if err == nil {
		t.Fatal("the WebSocket exec succeeded against a server that does not upgrade")
	}
	if !upgradeFailed(err) {
		t.Errorf("upgradeFailed(%v) = false, want true: the exec would not fall back to SPDY", err)
	}
	if upgradeFailed(errors.New("connection refused")) {
		t.Error("upgradeFailed takes any error for an upgrade failure")
	}
}
