package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Podman before 4.6 kills the runtime of a build's RUN step itself now
// and then, when the build runs beside other requests to the same
// service (containers/podman#17918; fixed by containers/buildah#4790):
// Buildah started the runtime with a parent-death signal, which the
// kernel sends when the thread that started it ends, and Podman's Go
// runtime ends threads at will, most often while making a network
// namespace for a container created at the same moment. Buildah then
// reports the step as failed with this text. Debian 12 ships Podman 4.3,
// and hutch's daemon samples and creates containers while it builds, so
// such a step is built again: the steps before it come from the cache.
// A step whose own process is killed (out of memory, say) reports the
// process's exit status instead, so it is not taken for this.
const killedStepText = "while running runtime: signal: killed"

// KilledStepAttempts bounds the builds of one image that Podman's fault
// may cost.
const KilledStepAttempts = 3

// killedStep is a build that failed only because Podman killed a step's
// runtime: the engine's message ends with killedStepText, Buildah's own
// words for the runtime's end, after the step it quotes. A RUN line that
// holds the text itself leaves it inside the quote, not at the end.
type killedStep struct{ error }

func (e killedStep) Unwrap() error { return e.error }

// retryKilledStep runs build, and again while it fails only because
// Podman killed a step's runtime (see above), at most KilledStepAttempts
// times in all, saying so on out. kills says the engine is a Podman that
// does that (Engine.KillsBuildSteps); on any other, build runs once.
func retryKilledStep(ctx context.Context, kills bool, out io.Writer, build func() error) error {
	for attempt := 1; ; attempt++ {
		err := build()
		var killed killedStep
		if !kills || err == nil || attempt == KilledStepAttempts || ctx.Err() != nil || !errors.As(err, &killed) {
			return err
		}
		_, _ = fmt.Fprintf(out, "Podman killed the runtime of that step itself, which Podman before 4.6 does to a build beside other work (containers/podman#17918); building again from its cache (attempt %d of %d).\n", attempt+1, KilledStepAttempts)
	}
}
