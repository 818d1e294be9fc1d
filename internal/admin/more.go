package admin

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/project"
)

// moreRoutes adds the read-only pages of migrations and project sandboxes.
func (s *Server) moreRoutes(mux *http.ServeMux) {
	mux.Handle("GET /admin/migrations", s.authed(s.migrationsPage))
	mux.Handle("GET /admin/projects", s.authed(s.projectsPage))
}

// migrationRow is one unfinished migration of the raw-id layout and what
// resolves it.
type migrationRow struct {
	office.MigrationRecord
	// Do leads to Command, the command that resolves it; After
	// follows it.
	Do, Command, After string
}

// migrationsPage shows the migrations `hutch office list` shows as
// pending (needs-owner, prepared, moving, failed), each with its fix.
func (s *Server) migrationsPage(w http.ResponseWriter, r *request) error {
	pending, err := s.svc.PendingMigrations()
	if err != nil {
		return err
	}
	enabled, err := s.svc.Platforms()
	if err != nil {
		return err
	}
	rows := make([]migrationRow, 0, len(pending))
	for _, m := range pending {
		rows = append(rows, migrationFix(m))
	}
	names := make([]string, 0, len(enabled))
	for _, p := range enabled {
		names = append(names, string(p))
	}
	s.render(w, http.StatusOK, "migrations.html", map[string]any{
		"Page": s.page(r, "Migrations"), "Migrations": rows, "Platforms": strings.Join(names, ", "),
	})
	return nil
}

// migrationFix says how to resolve m, in the words of `hutch migrate`
// and `hutch office claim`.
func migrationFix(m office.MigrationRecord) migrationRow {
	row := migrationRow{MigrationRecord: m}
	owner := "<platform>"
	if m.OwnerPlatform != "" {
		owner = string(m.OwnerPlatform)
	}
	switch m.Status {
	case office.MigrationNeedsOwner:
		row.Do = "With the daemon stopped, name its platform:"
		row.Command = "hutch office claim " + m.RawConversationID + " <platform>"
		row.After = "; the next start (or hutch migrate) moves it to its office."
	case office.MigrationFailed:
		row.Do = "Fix the cause in the error, then with the daemon stopped claim it again:"
		row.Command = "hutch office claim " + m.RawConversationID + " " + owner
		row.After = "; the next start (or hutch migrate) retries the move."
	default: // prepared, moving
		row.Command = "hutch migrate"
		row.After = " (or the next hutch serve start) finishes it."
	}
	return row
}

// projectRow is one project sandbox: the container a checkout's
// developer and agents share.
type projectRow struct {
	Name, Project, State, Status, Image string
	Created                             time.Time
}

// engineTimeout bounds how long the projects page waits for an engine.
const engineTimeout = 5 * time.Second

// projectsPage lists the project sandboxes on this machine: the
// containers `hutch project up` made (labelled hutch.sandbox=project),
// read from the container engine. With no engine answering it says so.
func (s *Server) projectsPage(w http.ResponseWriter, r *request) error {
	data := map[string]any{"Page": s.page(r, "Project sandboxes")}
	rows, eng, err := listProjects(r.Context())
	if err != nil {
		data["NoEngine"] = err.Error()
		s.log.Warn("admin: project sandboxes not listed", "error", err)
	} else {
		data["Engine"], data["Projects"] = eng, rows
	}
	s.render(w, http.StatusOK, "projects.html", data)
	return nil
}

// listProjects connects to the engine of the environment (DOCKER_HOST, as
// hutch project does) and lists the project sandboxes, sorted by project
// path; it also returns the engine's description.
func listProjects(ctx context.Context) ([]projectRow, string, error) {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	eng, err := engine.Connect(ctx)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = eng.Close() }()
	res, err := eng.Client.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", project.LabelSandbox+"="+project.SandboxProject)})
	if err != nil {
		return nil, "", engine.Classify(err, "list project sandboxes")
	}
	rows := make([]projectRow, 0, len(res.Items))
	for _, c := range res.Items {
		name := c.ID
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		status := c.Status
		if strings.EqualFold(status, string(c.State)) {
			status = "" // "created (Created)" says it twice
		}
		rows = append(rows, projectRow{
			Name: name, Project: c.Labels[project.LabelProject], State: string(c.State), Status: status,
			// Podman reports short names fully qualified.
			Image:   strings.TrimPrefix(c.Image, "docker.io/library/"),
			Created: time.Unix(c.Created, 0),
		})
	}
	slices.SortFunc(rows, func(a, b projectRow) int {
		if c := strings.Compare(a.Project, b.Project); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	desc := string(eng.Flavor)
	if eng.ServerVersion != "" {
		desc += " " + eng.ServerVersion
	}
	return rows, desc + " at " + eng.Host, nil
}
