package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/mcpserver"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// tsSDKDir holds the Node script that drives hutch's MCP server with the
// official TypeScript SDK, and its package.json and lockfile;
// hack/mcp-ts-sdk installs its node_modules.
const tsSDKDir = "testdata/ts-sdk"

// requireTSSDK returns the node executable, once the SDK is installed. A
// missing node or SDK skips the test, and fails it when CI is set.
func requireTSSDK(t *testing.T) string {
	t.Helper()
	return testenv.RequireNode(t, tsSDKDir, "@modelcontextprotocol/sdk/package.json", "the MCP TypeScript SDK", "hack/mcp-ts-sdk")
}

// runTSSDK runs the script with env added to this process's environment.
func runTSSDK(t *testing.T, node string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "progress-cancel.mjs")
	cmd.Dir = tsSDKDir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node progress-cancel.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript SDK client failed: %v", err)
	}
}

// TestTSSDK: the official TypeScript SDK, as a Node MCP client, sees
// bash's progress with growing byte counts, and its AbortSignal kills the
// command's process group (testdata/ts-sdk/progress-cancel.mjs), over
// streamable HTTP (the daemon's /mcp) and over stdio (hutch mcp, the
// binary), in host mode.
func TestTSSDK(t *testing.T) {
	node := requireTSSDK(t)
	t.Run("http", func(t *testing.T) {
		e := newHostEnv(t)
		ts := httptest.NewServer(mcpserver.HTTPHandler(e.svc, sandbox.DefaultMode, nil))
		t.Cleanup(ts.Close)
		q := url.Values{"platform": {"web"}, "conversationId": {e.addr.ConversationID}}
		runTSSDK(t, node, "HUTCH_MCP_URL="+ts.URL+"/mcp?"+q.Encode())
	})
	t.Run("stdio", func(t *testing.T) {
		hutch := testenv.HutchBinary(t)
		state := filepath.Join(t.TempDir(), "state")
		conv := "web/ts-sdk-stdio"
		door := exec.Command(hutch, "door", "set", conv, "shared")
		door.Env = append(os.Environ(), "HUTCH_STATE_DIR="+state)
		if out, err := door.CombinedOutput(); err != nil {
			t.Fatalf("hutch door set: %v\n%s", err, out)
		}
		args, err := json.Marshal([]string{"mcp", "--conversation", conv, "--sandbox", "host"})
		if err != nil {
			t.Fatal(err)
		}
		runTSSDK(t, node, "HUTCH_MCP_COMMAND="+hutch, "HUTCH_MCP_ARGS="+string(args), "HUTCH_STATE_DIR="+state)
	})
}
