package admin

import (
	"context"
	"errors"
	"html"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/migrate/apply"
	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// signedIn is a browser of p with a session.
func signedIn(t *testing.T, p *portal) *browser {
	t.Helper()
	link, _, err := p.srv.Link("ada", 0)
	if err != nil {
		t.Fatal(err)
	}
	b := p.browser(t)
	b.signIn(link)
	return b
}

// TestMigrations_PendingWithFixes walks the raw-id layout into a blocked
// migration as hutch migrate does: a numeric id that telegram and
// discord both claim (needs-owner), and a move that was interrupted and
// whose directories are both gone (failed). The page shows each with the
// command that resolves it.
// pendMigrations leaves p's workspace with two blocked migrations: a
// numeric id that telegram and discord both claim (needs-owner), and a
// move whose directories are both gone (failed). It returns the
// workspace root, links resolved.
func pendMigrations(t *testing.T, p *portal) string {
	t.Helper()
	layout := p.svc.Layout()
	if err := legacytest.Populate(layout.Workspace, layout.StateDir, []legacytest.Conversation{{RawID: "12345"}}); err != nil {
		t.Fatal(err)
	}
	// A move journaled as under way whose source and target are both
	// gone: the next run marks it failed.
	ws, err := filepath.EvalSymlinks(layout.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	lost := office.Address{Platform: office.PlatformSlack, ConversationID: "C9LOST"}
	err = office.NewRegistry(layout.StateDir).Update(func(f *office.File) error {
		f.Migrations = append(f.Migrations, office.MigrationRecord{
			RawConversationID: lost.ConversationID, WorkspaceRoot: ws, SourceDir: filepath.Join(ws, lost.ConversationID),
			OwnerPlatform: lost.Platform, TargetDir: office.Dir(ws, lost.Key()), Status: office.MigrationMoving,
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.svc.Migrate(context.Background(), service.MigrateOptions{Platforms: []office.Platform{office.PlatformDiscord, office.PlatformSlack, office.PlatformTelegram}})
	var blocked *apply.Blocked
	if !errors.As(err, &blocked) {
		t.Fatalf("migrate: %v, want it blocked", err)
	}
	pending, err := p.svc.PendingMigrations()
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending %+v, %v", pending, err)
	}
	return ws
}

func TestMigrations_PendingWithFixes(t *testing.T) {
	p := newPortal(t)
	ws := pendMigrations(t, p)

	b := signedIn(t, p)
	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/migrations", nil)
	if code != http.StatusOK {
		t.Fatalf("migrations page: %d\n%s", code, body)
	}
	text := html.UnescapeString(body)
	for _, want := range []string{
		"<caption>Unfinished migrations, with what resolves each</caption>",
		`<th scope="col">Conversation id</th>`,
		"Enabled platforms: discord, slack, telegram",
		// needs-owner
		`<th scope="row"><code>12345</code></th>`,
		`<td><span class="nowrap">needs-owner</span></td>`,
		"With the daemon stopped, name its platform: <code>hutch office claim 12345 <platform></code>; the next start (or hutch migrate) moves it to its office.",
		// A path wraps after its slashes only.
		`<code class="path">` + string(wrapPath(filepath.Join(ws, "12345"))) + "</code>",
		// failed
		`<th scope="row"><code>C9LOST</code></th>`,
		`<td><span class="nowrap">failed</span></td>`,
		"<td>Neither legacy source nor office target exists</td>",
		"Fix the cause in the error, then with the daemon stopped claim it again: <code>hutch office claim C9LOST <platform></code>; the next start (or hutch migrate) retries the move.",
		`<a href="/admin/migrations">Migrations</a>`,
		`<a href="/admin/projects">Projects</a>`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("migrations page lacks %q\n%s", want, body)
		}
	}
	if strings.Contains(text, "No migration from the raw-id layout is pending") {
		t.Error("the empty state shows beside pending migrations")
	}
}

func TestMigrationFix_Statuses(t *testing.T) {
	for _, tc := range []struct {
		rec  office.MigrationRecord
		want string
	}{
		{office.MigrationRecord{RawConversationID: "12345", Status: office.MigrationNeedsOwner}, "With the daemon stopped, name its platform: hutch office claim 12345 <platform>; the next start (or hutch migrate) moves it to its office."},
		{office.MigrationRecord{RawConversationID: "C1", OwnerPlatform: office.PlatformSlack, Status: office.MigrationFailed, Error: "rename failed"}, "Fix the cause in the error, then with the daemon stopped claim it again: hutch office claim C1 slack; the next start (or hutch migrate) retries the move."},
		{office.MigrationRecord{RawConversationID: "C2", OwnerPlatform: office.PlatformSlack, Status: office.MigrationPrepared}, "hutch migrate (or the next hutch serve start) finishes it."},
		{office.MigrationRecord{RawConversationID: "C3", OwnerPlatform: office.PlatformSlack, Status: office.MigrationMoving}, "hutch migrate (or the next hutch serve start) finishes it."},
	} {
		r := migrationFix(tc.rec)
		got := r.Command + r.After
		if r.Do != "" {
			got = r.Do + " " + got
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.rec.Status, got, tc.want)
		}
	}
}

func TestMigrations_Empty(t *testing.T) {
	p := newPortal(t)
	b := signedIn(t, p)
	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/migrations", nil)
	if code != http.StatusOK || !strings.Contains(body, "<p>No migration from the raw-id layout is pending: every conversation directory is in its office.</p>") || strings.Contains(body, "<table>") {
		t.Errorf("empty migrations page: %d\n%s", code, body)
	}
}

func TestMigrationsProjects_NeedASession(t *testing.T) {
	p := newPortal(t)
	b := p.browser(t)
	for _, page := range []string{"/admin/migrations", "/admin/projects"} {
		code, body := b.do(http.MethodGet, p.ts.URL+page, nil)
		if code != http.StatusUnauthorized || !strings.Contains(body, "You are not signed in") || strings.Contains(body, "<table>") {
			t.Errorf("%s without a session: %d\n%s", page, code, body)
		}
	}
}

// TestProjects_NoEngine: with no engine answering, the page says so in a
// sentence, not an error page.
func TestProjects_NoEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	p := newPortal(t)
	b := signedIn(t, p)
	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/projects", nil)
	if code != http.StatusOK {
		t.Fatalf("projects page without an engine: %d\n%s", code, body)
	}
	for _, want := range []string{
		"<h1>Project sandboxes</h1>",
		`<p role="status">No container engine answers, so the project sandboxes cannot be listed. No container engine answers at unix://`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("projects page lacks %q\n%s", want, body)
		}
	}
	if strings.Contains(body, "<table>") {
		t.Errorf("a table without an engine:\n%s", body)
	}
}

// TestProjects_Listed creates a stopped project sandbox labelled as
// hutch project up labels one and finds it on the page.
func TestProjects_Listed(t *testing.T) {
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	dir := filepath.Join(t.TempDir(), "Shop Front")
	name := project.ContainerName(dir)
	labels := project.Labels(dir, "", "spec")
	testenv.CleanupContainers(t, cli, project.LabelProject+"="+dir)
	ctx := context.Background()
	if _, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name,
		Config: &container.Config{Image: img, Cmd: []string{"true"}, Labels: labels}}); err != nil {
		t.Fatal(err)
	}
	p := newPortal(t)
	b := signedIn(t, p)
	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/projects", nil)
	if code != http.StatusOK {
		t.Fatalf("projects page: %d\n%s", code, body)
	}
	for _, want := range []string{
		"<caption>Project sandboxes, by project folder</caption>",
		`<th scope="col">Project folder</th>`,
		`<th scope="row"><code>` + name + `</code></th>`,
		`<td><code class="path">` + string(wrapPath(dir)) + "</code></td>",
		"<td>created",
		"<code>" + img + "</code>",
		"<p>Engine: ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("projects page lacks %q\n%s", want, body)
		}
	}
}
