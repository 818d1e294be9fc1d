package admin

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestNetworkShown (in a mode with per-conversation vaults and no
// runtimes to list): the portal shows each conversation's egress policy
// (open as plainly as the others), which vault entries are placeholders
// and for which hosts, and the placeholder uses the proxy recorded,
// refusals marked; never a value or a placeholder.
func TestNetworkShown(t *testing.T) {
	p := newPortalIn(t, sandbox.Mode{Kind: sandbox.KindCloudflare, Target: "sb"})
	addr, _ := office.NewAddress("web", "net")
	const value = "hutch-secret-value-91c3aa"
	if err := p.svc.SetChannelKind(addr, "im"); err != nil {
		t.Fatal(err)
	}
	key := string(addr.Key())
	if err := p.svc.Vaults().SetEnv(key, map[string]string{"GH_TOKEN": value}); err != nil {
		t.Fatal(err)
	}
	mark, err := p.svc.Vaults().SetPlaceholder(key, "GH_TOKEN", []string{"api.github.com"}, time.Time{}, false)
	if err != nil {
		t.Fatal(err)
	}
	allow := "github.com"
	if err := p.svc.SetNetwork(&addr, "allowlist", &allow); err != nil {
		t.Fatal(err)
	}
	j := egress.OpenJournal(p.svc.EgressJournal(key))
	j.Record(egress.Event{Time: time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC), Office: key, Secret: "GH_TOKEN", Host: "api.github.com", Port: 443, Kind: egress.KindSubstituted})
	j.Record(egress.Event{Time: time.Date(2026, 12, 3, 7, 1, 0, 0, time.UTC), Office: key, Secret: "GH_TOKEN", Host: "evil.example", Port: 443, Kind: egress.KindRefused, Reason: egress.ReasonNotListed})

	link, _, _ := p.srv.Link("ada", 0)
	b := p.browser(t)
	b.signIn(link)
	code, home := b.do(http.MethodGet, p.ts.URL+"/admin/", nil)
	if code != http.StatusOK || !strings.Contains(home, "<th scope=\"col\">Network</th>") || !strings.Contains(home, "<td>allowlist</td>") {
		t.Errorf("home does not show the network: %d\n%s", code, home)
	}
	code, page := b.do(http.MethodGet, p.ts.URL+"/admin/office?platform=web&conversation=net", nil)
	if code != http.StatusOK {
		t.Fatalf("office page: %d", code)
	}
	for _, want := range []string{
		"<dt>Network</dt><dd>allowlist (github.com), from the conversation&#39;s settings</dd>",
		"<code>GH_TOKEN</code> (env), a placeholder for api.github.com",
		"Placeholder secrets sent out",
		"<td><code>evil.example:443</code></td><td class=\"error\">refused: host not listed for this secret</td>",
		"<td><code>api.github.com:443</code></td><td>substituted</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the office page lacks %q:\n%s", want, page)
		}
	}
	for _, page := range []string{home, page} {
		if strings.Contains(page, value) || strings.Contains(page, mark.Token) {
			t.Error("a page shows the value or the placeholder")
		}
	}
}
