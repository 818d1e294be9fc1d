package httpstatus_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hutchsandbox/hutch/internal/httpstatus"
)

func TestRecorder(t *testing.T) {
	for name, tc := range map[string]struct {
		handle func(w http.ResponseWriter)
		status int
	}{
		"nothing":      {func(http.ResponseWriter) {}, 0},
		"body first":   {func(w http.ResponseWriter) { _, _ = w.Write([]byte("x")); w.WriteHeader(http.StatusTeapot) }, http.StatusOK},
		"status first": {func(w http.ResponseWriter) { w.WriteHeader(http.StatusForbidden); w.WriteHeader(http.StatusOK) }, http.StatusForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			r := &httpstatus.Recorder{ResponseWriter: rec}
			tc.handle(r)
			if r.Status != tc.status || r.Wrote() != (tc.status != 0) {
				t.Errorf("Status %d, Wrote %v; want %d", r.Status, r.Wrote(), tc.status)
			}
			if err := http.NewResponseController(r).Flush(); err != nil {
				t.Errorf("flush through the recorder: %v", err)
			}
		})
	}
}
