package cloudflare

import "time"

// SetTimings replaces the grace past a command's timeout and the pauses
// between retries, so tests of the failure paths run in a moment.
func (r *Runtime) SetTimings(grace time.Duration, retryDelays []time.Duration) {
	r.grace = grace
	r.retryDelays = retryDelays
}
