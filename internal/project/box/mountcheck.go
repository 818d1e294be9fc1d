package box

import (
	"path/filepath"

	"github.com/hutchsandbox/hutch/internal/project"
)

// checkResolvedMounts judges every bind source again after resolving its
// symlinks: the spec judged the paths as written, and a harmless-looking
// ~/link pointing at /var/run/docker.sock must be refused all the same.
func checkResolvedMounts(mounts []project.Mount, home string) error {
	for _, m := range mounts {
		if m.Type != project.MountBind {
			continue
		}
		real, err := filepath.EvalSymlinks(m.Source)
		if err != nil || real == m.Source {
			continue // a missing source is reported when the container is made
		}
		r := m
		r.Source = real
		if err := project.CheckMount(r, home); err != nil {
			return err
		}
	}
	return nil
}
