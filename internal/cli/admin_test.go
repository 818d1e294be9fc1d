package cli

import (
	"net/http"
	"strings"
	"testing"
)

// TestAdminLink: `hutch admin link` asks the running daemon for a link,
// prints it on stdout (its expiry on stderr), and the link opens the
// portal's sign-in page; without a daemon it says what to start.
func TestAdminLink(t *testing.T) {
	e := newEnv(t)
	out, errOut, code := e.run("", "admin", "link")
	if code != 1 || !strings.Contains(errOut, "No hutch serve answers for this state dir: the admin portal is part of the daemon, start it first") || out != "" {
		t.Errorf("without a daemon: %d %q %q", code, out, errOut)
	}
	startServe(t, e)
	out, errOut, code = e.run("", "admin", "link", "--ttl", "10m")
	link := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(link, "http://127.0.0.1:") || !strings.Contains(link, "/admin/login?token=") || !strings.HasPrefix(errOut, "Good once, until ") {
		t.Fatalf("hutch admin link: %d %q %q", code, out, errOut)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the link's page: %d", resp.StatusCode)
	}
	if _, errOut, code := e.run("", "admin", "link", "--ttl", "30s"); code == 0 || !strings.Contains(errOut, "a link lasts between 1m and 24h0m0s, not 30s") {
		t.Errorf("a 30s link: %d %q", code, errOut)
	}
}
