package cloudflare_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/bridge"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestConformance_ImageBridge runs the exec contract's suite through the
// client and hutch's own bridge backed by its default kind of mode,
// image:, with the busybox test image: every check, vault env included.
func TestConformance_ImageBridge(t *testing.T) {
	sandboxtest.Run(t, imageBridge(t))
}

// TestFiles_ImageBridge runs the files suite the same way: file
// operations as commands through the bridge, in the remote /workspace.
func TestFiles_ImageBridge(t *testing.T) {
	h := imageBridge(t)
	// The checks work in directories of their own: one conversation (one
	// remote container) serves them all.
	var once sync.Once
	var rt sandbox.Runtime
	var spec sandbox.Spec
	sandboxtest.RunFiles(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		once.Do(func() { rt, spec = h.New(t) })
		return rt, spec
	}})
}

// imageBridge serves hutch's bridge over image mode with the busybox
// test image, and returns the harness of a cloudflare: runtime that talks
// to it, a conversation of its own per check.
func imageBridge(t *testing.T) sandboxtest.Harness {
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	run, err := os.MkdirTemp("", "hcf-") // unix socket paths are short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	layout, err := service.ResolveLayout(service.LayoutOptions{
		StateDir:  filepath.Join(root, "state"),
		Workspace: filepath.Join(root, "workspace"),
		Getenv: func(k string) string {
			if k == "HUTCH_RUN_DIR" {
				return run
			}
			return ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+layout.StateDir)
	svc := service.New(layout, nil)
	svc.SetAgentBinary(testenv.HutchBinary(t))
	t.Cleanup(func() { _ = svc.Close() })
	const token = "conformance-image-token"
	h, err := bridge.New(bridge.Options{Service: svc, Mode: sandbox.Mode{Kind: sandbox.KindImage, Target: img}, Token: token, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	rt, err := cloudflare.New(cloudflare.Config{SandboxID: "conf", URL: srv.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return sandboxtest.Harness{
		New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
			var b [6]byte
			_, _ = rand.Read(b[:])
			key := "v1-web-c-" + hex.EncodeToString(b[:])
			// In image mode the bridge's office is /workspace/<its key>,
			// where pwd inside says commands start.
			remote := office.Address{Platform: bridge.Platform, ConversationID: cloudflare.RemoteSandboxID("conf", key)}.Key()
			return rt, sandbox.Spec{OfficeKey: key, OfficeRuntimePath: path.Join("/workspace", string(remote))}
		},
	}
}
