package cloudflare

import "time"

// SetTimings replaces the grace past a command's timeout and the pauses
// between retries, so tests of the failure paths run in a moment.
func (r *Runtime) SetTimings(grace time.Duration, retryDelays []time.Duration) {
	r.grace = grace
	r.retryDelays = retryDelays
}

// SetStdinChunk replaces the most content one exec of a write carries as
// standard input, so that a test of a write of several execs moves
// kilobytes, not tens of megabytes, through the race detector.
func (r *Runtime) SetStdinChunk(n int) { r.stdinChunk = n }
