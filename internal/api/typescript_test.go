package api_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// tsClientDir is the TypeScript client generated from openapi.json;
// hack/ts-client installs its node_modules and checks that schema.d.ts is
// what the description generates.
const tsClientDir = "../../clients/typescript"

// requireTSClient returns the node executable, once the client's packages
// are installed. A missing node or package skips the test, and fails it
// when CI is set.
func requireTSClient(t *testing.T) string {
	t.Helper()
	return testenv.RequireNode(t, tsClientDir, "openapi-fetch/package.json", "the TypeScript client", "hack/ts-client")
}

// TestTypeScriptClient: the client generated from openapi.json, in Node,
// talks to a real daemon (hutch serve, host mode) over TCP with its bearer
// token: health and version, exec with its output and result, a file's
// bytes written and read back, a typed error for a bad request and 401
// without the token (clients/typescript/test/e2e.mjs). The description
// must lint clean (Redocly's structural rules), and the generated types
// be what it generates now.
func TestTypeScriptClient(t *testing.T) {
	node := requireTSClient(t)
	hutch := testenv.HutchBinary(t)
	state := filepath.Join(t.TempDir(), "state")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	const token = "ts-client-test-token"
	env := append(os.Environ(), "HUTCH_STATE_DIR="+state, "HUTCH_API_TOKEN="+token)
	testenv.Serve(t, hutch, daemon.SocketPath(state), env, "--sandbox", "host", "--listen-tcp", addr, "--admin-listen", "off")
	// The socket comes first; wait for the TCP listener too.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hutch serve does not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The description's structure is OpenAPI 3.1's, as Redocly checks it.
	lint := exec.CommandContext(ctx, node, "scripts/lint-openapi.mjs", "../../internal/api/openapi.json")
	lint.Dir = tsClientDir
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("openapi.json does not lint clean: %v\n%s", err, out)
	}
	// The committed types are what the description generates now.
	generated := filepath.Join(t.TempDir(), "schema.d.ts")
	gen := exec.CommandContext(ctx, node, "node_modules/openapi-typescript/bin/cli.js", "../../internal/api/openapi.json", "--output", generated)
	gen.Dir = tsClientDir
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, out)
	}
	want, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(tsClientDir, "schema.d.ts")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("clients/typescript/schema.d.ts is not what openapi.json generates (%v): run hack/ts-client generate", err)
	}
	cmd := exec.CommandContext(ctx, node, "test/e2e.mjs")
	cmd.Dir = tsClientDir
	cmd.Env = append(os.Environ(), "HUTCH_URL=http://"+addr, "HUTCH_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	t.Logf("node test/e2e.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v", err)
	}
}
