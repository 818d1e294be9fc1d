package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/api"
)

// TestVersion: with no daemon one line says so, and the exit is 0; with
// one answering, its build is shown, from GET /v1/version.
func TestVersion(t *testing.T) {
	e := newEnv(t)
	out := e.ok("version")
	if !strings.HasPrefix(out, "Client:\n  Version:    "+Version+"\n") || !strings.HasSuffix(out, "Daemon:       none (no state dir at "+e.state+" yet)\n") {
		t.Errorf("version with no state dir:\n%s", out)
	}
	if _, err := os.Stat(e.state); err == nil {
		t.Errorf("hutch version created the state dir")
	}
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("version"); !strings.HasSuffix(out, "Daemon:       none answers on "+filepath.Join(e.state, "hutch.sock")+"\n") {
		t.Errorf("version with no daemon:\n%s", out)
	}
	var rep api.VersionReport
	if err := json.Unmarshal([]byte(e.ok("version", "--json")), &rep); err != nil || rep.Daemon != nil || rep.Client.Version != Version || rep.Client.GoVersion == "" {
		t.Errorf("version --json with no daemon: %+v, %v", rep, err)
	}
	startServe(t, e)
	out = e.ok("version")
	if !strings.Contains(out, "\nDaemon ("+filepath.Join(e.state, "hutch.sock")+"):\n  Version:    "+Version+"\n") || !strings.Contains(out, "  Go:         ") {
		t.Errorf("version with a daemon:\n%s", out)
	}
	rep = api.VersionReport{}
	if err := json.Unmarshal([]byte(e.ok("version", "--json")), &rep); err != nil || rep.Daemon == nil || *rep.Daemon != rep.Client {
		// The daemon is this test binary too: the same build.
		t.Errorf("version --json with a daemon: %+v, %v", rep, err)
	}
}

// TestVersion_JSON pins hutch version --json: a report of two builds,
// and the command's own with no daemon.
func TestVersion_JSON(t *testing.T) {
	e := newEnv(t)
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/hutchsandbox/hutch", Version: "v0.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "5791841d0c8e2f7a1b3c4d5e6f708192a3b4c5d6"}, {Key: "vcs.time", Value: "2026-12-03T12:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	v := api.VersionOf("0.4.0", bi)
	var out bytes.Buffer
	if err := printJSON(&out, api.VersionReport{Client: v, Daemon: &v}); err != nil {
		t.Fatal(err)
	}
	jsonGolden(t, "version", out.String())
	// And as the command prints it, with no daemon.
	jsonGolden(t, "version_no_daemon", e.ok("version", "--json"))
}

// TestDaemonVersion_OlderDaemon: a daemon without GET /v1/version (one
// from before it) is asked its health instead, which names its version;
// a socket nobody answers on gives none.
func TestDaemonVersion_OlderDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "hutch.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/health" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"No such endpoint","code":"not_found"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok","version":"0.3.0","mode":"host"}`))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	if v := daemonVersion(context.Background(), &client.Client{Socket: sock}); v == nil || *v != (api.Version{Version: "0.3.0"}) {
		t.Errorf("an older daemon's version: %+v, want 0.3.0 alone", v)
	}
	_ = srv.Close()
	if v := daemonVersion(context.Background(), &client.Client{Socket: sock}); v != nil {
		t.Errorf("no daemon answering: %+v, want none", v)
	}
}
