// Package httpstatus keeps the status an HTTP handler answered, for the
// middleware that acts on it once the handler returns: the daemon counts
// the portal's refusals by it, and the bridge tells whether an answer
// began before an error.
package httpstatus

import "net/http"

// Recorder is a ResponseWriter that keeps the first status written
// (http.StatusOK when the body came first; 0 while nothing was).
type Recorder struct {
	http.ResponseWriter
	Status int
}

// WriteHeader keeps the first status and passes it on.
func (r *Recorder) WriteHeader(status int) {
	if r.Status == 0 {
		r.Status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

// Write passes p on; a body written first is an answer of 200.
func (r *Recorder) Write(p []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Wrote reports whether the answer began.
func (r *Recorder) Wrote() bool { return r.Status != 0 }

// Unwrap lets http.ResponseController reach the connection's writer (to
// flush, or set deadlines).
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
