package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestPlaceholders_EndToEnd drives placeholders as a user does, through
// separate hutch processes: set a secret, mark it, close the network to
// one host, and run curl in an image-mode container. The command sees
// the placeholder; the host receives the value; the office's journal
// records the substitution.
func TestPlaceholders_EndToEnd(t *testing.T) {
	e, _ := dockerEnv(t)
	cli := testenv.Docker(t)
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	base := func(ctx context.Context, w io.Writer) (string, error) {
		return imagebuild.ResolveBase(ctx, eng, imagebuild.DefaultBase, w)
	}
	mode := "image:" + testenv.DebianClientsImage(t, cli, base)
	up := testenv.TLSUpstream(t, cli, base, "")
	// The hutch processes verify the upstream against its own CA.
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(caFile, up.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	e.extra["SSL_CERT_FILE"] = caFile

	const value = "ghp_endToEndVALUEthatStaysOutside9"
	conv := "web/placeholders"
	host := up.IP + ":443"
	e.ok("vault", "set", conv, "GH_TOKEN="+value)
	if out := e.ok("vault", "placeholder", conv, "GH_TOKEN", host); !strings.Contains(out, "GH_TOKEN") {
		t.Errorf("vault placeholder said %q", out)
	}
	e.ok("sandbox", "network", conv, "allowlist", "--allow", host)

	exec := func(cmd string) string {
		t.Helper()
		out, err := e.hutchCmd("exec", "--sandbox", mode, "--conversation", conv, "--", cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("hutch exec %q: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	if out := exec(`echo "$GH_TOKEN"`); !strings.HasPrefix(out, "hutch-placeholder-") {
		t.Errorf("the command sees %q, want the placeholder", out)
	}
	if out := exec(`curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $GH_TOKEN" https://` + up.IP + `/e2e`); out != "200" {
		t.Errorf("curl through the proxy: %q", out)
	}
	var got string
	for _, r := range up.Requests() {
		got += r.Path + " " + r.Header.Get("Authorization") + "\n"
	}
	if !strings.Contains(got, "/e2e Bearer "+value) {
		t.Errorf("the upstream did not receive the value:\n%s", got)
	}
	addr, err := office.NewAddress("web", "placeholders")
	if err != nil {
		t.Fatal(err)
	}
	events, err := egress.ReadJournal(filepath.Join(office.StateDir(e.state, addr.Key()), "egress-events.jsonl"), 10)
	if err != nil || len(events) == 0 || events[0].Kind != egress.KindSubstituted || events[0].Secret != "GH_TOKEN" {
		t.Errorf("journal: %+v, %v", events, err)
	}
	if out := e.ok("vault", "ls", conv); strings.Contains(out, value) || !strings.Contains(out, "placeholder") {
		t.Errorf("vault ls:\n%s", out)
	}
}
