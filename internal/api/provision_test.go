package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestExec_ProvisioningFailureHasStatus: a daemon in image mode whose
// image does not exist cannot provision the conversation's container.
// That fails before any output, so /v1/exec answers it as an error
// response with the error's own status and class (what a client decides
// on: fix, retry or give up), not 200 with an error frame.
func TestExec_ProvisioningFailureHasStatus(t *testing.T) {
	cli := testenv.Docker(t)
	run, err := os.MkdirTemp("", "hp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) })
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(k string) string {
		if k == "HUTCH_RUN_DIR" {
			return run
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+layout.StateDir)
	svc := service.New(layout, nil)
	svc.SetAgentBinary(testenv.HutchBinary(t))
	m := metrics.New("")
	svc.SetMetrics(m)
	t.Cleanup(func() { _ = svc.Close() })
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "hutch-test-no-such-image:" + strings.ToLower(testenv.Name(t))}
	ts := httptest.NewServer((&api.Server{Service: svc, Mode: mode, Version: "test", Metrics: m.Handler()}).Handler())
	t.Cleanup(ts.Close)

	code, body := post(t, ts, "/v1/exec", `{"conversation":{"platform":"web","conversationId":"`+testenv.Name(t)+`"},"command":"echo never"}`)
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil || code == 200 || eb.Code == "" || !strings.Contains(eb.Error, "hutch-test-no-such-image") {
		t.Fatalf("exec with an image that does not exist: %d %s; want an error response naming the image", code, body)
	}
	if want := errdefs.HTTPStatus(errdefs.FromCode(eb.Code, eb.Error)); code != want {
		t.Errorf("status %d for code %s; want %d", code, eb.Code, want)
	}
	if strings.Contains(body, "never") {
		t.Errorf("the command ran: %s", body)
	}
	if got, want := scrape(t, ts), `hutch_commands_total{mode="image",outcome="error"} 1`; !strings.Contains(got, want) {
		t.Errorf("metrics lack %s:\n%s", want, grepLines(got, "hutch_commands_total"))
	}
}
