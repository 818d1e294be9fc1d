package box

import "github.com/hutchsandbox/hutch/internal/project"

// BeforeStart makes f run between the pinning of a start's mount sources
// and the start, until restore: where a racing sandbox would swap one.
func BeforeStart(f func(project.Spec)) (restore func()) {
	testHookBeforeStart.Store(&f)
	return func() { testHookBeforeStart.Store(nil) }
}
