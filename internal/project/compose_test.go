package project_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

// TestResolve_Compose: a devcontainer.json of a Docker Compose project is
// refused, saying why and what to do, unless sandbox-image names the
// service's image; then it is applied on that image, and a note says the
// services are not started.
func TestResolve_Compose(t *testing.T) {
	dc := &devcontainer.Config{Path: dcDir + "/devcontainer.json", Dir: dcDir, ComposeFiles: []string{"docker-compose.yml"}, Service: "app", RemoteUser: "vscode", ShutdownAction: "none", WorkspaceFolder: proj}
	in := input(t, `{}`)
	in.Devcontainer = dc
	_, err := project.Resolve(in)
	want := dc.Path + " describes a Docker Compose project (docker-compose.yml): an editor starts its services and works in the container of the service app. hutch runs one container per project and starts no compose services, so it cannot make the environment the file describes. Set sandbox-image to the image of the service app (hutch project settings set sandbox-image IMAGE) to have the file applied on it, or set sandbox-devcontainer to false to ignore the file."
	if !errdefs.IsFailedPrecondition(err) || err.Error() != want {
		t.Fatalf("Resolve: %v\nwant: %s", err, want)
	}

	in = input(t, `{"sandbox-image": "ruby:3"}`)
	in.Devcontainer = dc
	sp, err := project.Resolve(in)
	if err != nil {
		t.Fatal(err)
	}
	note := dc.Path + " describes a Docker Compose project (docker-compose.yml); hutch runs one container per project and does not start compose services: sandbox-image stands in for the image of the service app, and the other services are not started."
	if sp.Image != "ruby:3" || sp.User != "vscode" || !containsNote(sp.Notes, note) {
		t.Errorf("with sandbox-image: image %s, user %s, notes:\n%s", sp.Image, sp.User, strings.Join(sp.Notes, "\n"))
	}
}
