package teammcp

import (
	"context"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// memberSandbox is the tools.Sandbox of one member (or of the project
// root): commands and file operations go to the agent in the project's
// container, and file operations are confined to the project.
type memberSandbox struct {
	sandbox.Files
	t *box.Target
	// dir is where the member works (the project root for no member), and
	// project the project, both as the container sees them.
	dir, project string
}

var _ tools.Sandbox = (*memberSandbox)(nil)

func newMemberSandbox(t *box.Target, dir, project string) *memberSandbox {
	return &memberSandbox{Files: t.Files(dir, []string{project}), t: t, dir: dir, project: project}
}

// Exec runs req in the container with the target's environment (the
// request's own on top), through a login shell so the image's PATH
// applies, as `hutch project exec` does. A single-element Argv is a shell
// string, run with sh -c.
func (s *memberSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	env := map[string]string{}
	for _, kv := range s.t.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for k, v := range req.Env {
		env[k] = v
	}
	req.Env = env
	argv := req.Argv
	if len(argv) == 1 {
		argv = []string{"sh", "-c", argv[0]}
	}
	// The arguments never go through the login shell's parser.
	req.Argv = append([]string{"/bin/sh", "-lc", `exec "$@"`, "sh"}, argv...)
	switch {
	case req.Dir == "":
		req.Dir = s.dir
	case !path.IsAbs(req.Dir):
		req.Dir = path.Join(s.dir, req.Dir)
	}
	return s.t.Agent().Exec(ctx, req)
}
