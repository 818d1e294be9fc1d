package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/client"
)

var errBroken = errors.New("broken pipe")

// brokenWriter fails every write and counts them.
type brokenWriter struct{ writes int }

func (w *brokenWriter) Write(p []byte) (int, error) {
	w.writes++
	return 0, errBroken
}

// daemon answers every exec with frames.
func daemon(t *testing.T, frames ...api.Frame) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enc := json.NewEncoder(w)
		for _, f := range frames {
			if err := enc.Encode(f); err != nil {
				t.Errorf("sending a frame: %v", err)
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return &client.Client{BaseURL: srv.URL}
}

// TestExec_WriterFails: a writer that fails is given nothing more, the
// answer is read to its end (the other stream still written) and Exec
// returns the command's result with the writer's error.
func TestExec_WriterFails(t *testing.T) {
	c := daemon(t,
		api.Frame{Stream: "stdout", Data: []byte("one\n")},
		api.Frame{Stream: "stdout", Data: []byte("two\n")},
		api.Frame{Stream: "stderr", Data: []byte("warn\n")},
		api.Frame{Result: &api.ExecResult{ExitCode: 3}},
	)
	stdout := &brokenWriter{}
	var stderr bytes.Buffer
	res, err := c.Exec(context.Background(), api.ExecRequest{Command: "x"}, stdout, &stderr)
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want the command's 3", res.ExitCode)
	}
	if !errors.Is(err, errBroken) || err.Error() != "writing the command's standard output: broken pipe" {
		t.Errorf("error %v, want the stdout writer's", err)
	}
	if stdout.writes != 1 {
		t.Errorf("the failed writer was given %d writes, want 1", stdout.writes)
	}
	if stderr.String() != "warn\n" {
		t.Errorf("stderr %q, want %q", stderr.String(), "warn\n")
	}
}

// TestExec_Streams: both streams are written as they come, and the result
// comes without an error.
func TestExec_Streams(t *testing.T) {
	c := daemon(t,
		api.Frame{Stream: "stdout", Data: []byte("one\n")},
		api.Frame{Stream: "stderr", Data: []byte("warn\n")},
		api.Frame{Stream: "stdout", Data: []byte("two\n")},
		api.Frame{Result: &api.ExecResult{ExitCode: 0}},
	)
	var stdout, stderr bytes.Buffer
	res, err := c.Exec(context.Background(), api.ExecRequest{Command: "x"}, &stdout, &stderr)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	if stdout.String() != "one\ntwo\n" || stderr.String() != "warn\n" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// TestGetTo_CopiesTheBodyOrReturnsTheError: the body arrives as sent,
// undecoded; an error answer is an error of its class, nothing copied.
func TestGetTo_CopiesTheBodyOrReturnsTheError(t *testing.T) {
	body := bytes.Repeat([]byte(`{"officeKey":"k"},`), 10000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" {
			t.Errorf("method %s; want GET", r.Method)
		}
		if r.URL.Path == "/v1/missing" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: "No such thing", Code: "not_found"})
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	c := &client.Client{BaseURL: srv.URL}
	var got bytes.Buffer
	n, err := c.GetTo(context.Background(), "/v1/offices", &got)
	if err != nil || n != int64(len(body)) || !bytes.Equal(got.Bytes(), body) {
		t.Errorf("GetTo: %d bytes, %v; want the %d bytes sent", n, err, len(body))
	}
	got.Reset()
	if _, err := c.GetTo(context.Background(), "/v1/missing", &got); err == nil || err.Error() != "No such thing" || got.Len() != 0 {
		t.Errorf("GetTo of an error answer: %v, %d bytes copied; want the daemon's error and nothing", err, got.Len())
	}
}
