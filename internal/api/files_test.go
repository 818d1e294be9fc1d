package api_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// filesServer is a host-mode daemon whose conversation api-1 may use the
// workspace, with file bodies capped at maxFile bytes.
func filesServer(t *testing.T, maxFile int64) *httptest.Server {
	t.Helper()
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	srv := &api.Server{Service: service.New(layout, nil), Mode: sandbox.Mode{Kind: sandbox.KindHost}, Version: "test", MaxBody: 64 << 10, MaxFileBody: maxFile}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	if code, body := post(t, ts, "/v1/door", `{`+conv+`,"policy":"shared"}`); code != 200 {
		t.Fatalf("door: %d %s", code, body)
	}
	return ts
}

// putFile writes body to path through /v1/files/write.
func putFile(t *testing.T, ts *httptest.Server, path string, body io.Reader, extra url.Values) (int, string) {
	t.Helper()
	q := url.Values{"platform": {"web"}, "conversationId": {"api-1"}, "path": {path}}
	for k, v := range extra {
		q[k] = v
	}
	resp, err := ts.Client().Post(ts.URL+"/v1/files/write?"+q.Encode(), "application/octet-stream", body)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// getFile reads path through /v1/files/read.
func getFile(t *testing.T, ts *httptest.Server, path string) (int, []byte, http.Header) {
	t.Helper()
	b, _ := json.Marshal(api.FileRequest{Conversation: api.Conversation{Platform: "web", ConversationID: "api-1"}, Path: path})
	resp, err := ts.Client().Post(ts.URL+"/v1/files/read", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data, resp.Trailer
}

// TestFiles_Bytes: a file's bytes go in and come out unchanged, past the
// 8 MiB a JSON body may hold, with their mode; a name that is not UTF-8
// is listed with its exact bytes.
func TestFiles_Bytes(t *testing.T) {
	ts := filesServer(t, 0)
	content := make([]byte, 9<<20+17)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	copy(content, []byte("\x00\xff\xfe\xc3\x28"))
	code, body := putFile(t, ts, "data/blob.bin", bytes.NewReader(content), url.Values{"mode": {"0600"}})
	var wa api.WriteAnswer
	if code != 200 || json.Unmarshal([]byte(body), &wa) != nil || wa.Bytes != int64(len(content)) || !strings.HasSuffix(wa.Path, "/data/blob.bin") {
		t.Fatalf("write: %d %s", code, body)
	}
	code, got, trailer := getFile(t, ts, "data/blob.bin")
	if code != 200 || !bytes.Equal(got, content) || trailer.Get(api.TrailerError) != "" {
		t.Fatalf("read: %d, %d bytes (want %d, unchanged), trailer %v", code, len(got), len(content), trailer)
	}
	code, body = post(t, ts, "/v1/files/stat", `{`+conv+`,"path":"data/blob.bin"}`)
	var fi sandbox.FileInfo
	if code != 200 || json.Unmarshal([]byte(body), &fi) != nil || fi.Size != int64(len(content)) || fi.Mode != 0o600 {
		t.Errorf("stat: %d %s", code, body)
	}
	// An empty file is an empty body, not an error.
	if code, body := putFile(t, ts, "empty", strings.NewReader(""), nil); code != 200 {
		t.Fatalf("write empty: %d %s", code, body)
	}
	if code, got, _ := getFile(t, ts, "empty"); code != 200 || len(got) != 0 {
		t.Errorf("read empty: %d %q", code, got)
	}
	// The read tool answers a binary file with its bytes (base64 in the
	// JSON), not text.
	small := []byte("\x00\x01\xff\xfe binary")
	if code, body := putFile(t, ts, "small.bin", bytes.NewReader(small), nil); code != 200 {
		t.Fatalf("write small.bin: %d %s", code, body)
	}
	code, body = post(t, ts, "/v1/tools/read", `{`+conv+`,"input":{"path":"small.bin"}}`)
	var ta struct {
		Output struct {
			Binary struct {
				MIMEType string
				Data     []byte
			}
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &ta) != nil || !bytes.Equal(ta.Output.Binary.Data, small) {
		t.Errorf("tools/read of a binary file: %d %s", code, body)
	}
	name := "caf\xe9.txt"
	if code, body := putFile(t, ts, name, strings.NewReader("latin-1 name"), nil); code != 200 {
		t.Fatalf("write %q: %d %s", name, code, body)
	}
	code, body = post(t, ts, "/v1/files/list", `{`+conv+`}`)
	var list []sandbox.FileInfo
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("list: %d %s", code, body)
	}
	var found bool
	for _, e := range list {
		found = found || e.Name == name
	}
	if !found {
		t.Errorf("list %s: no entry named %q", body, name)
	}
}

// TestFiles_Refusals: what the file endpoints refuse, with their codes.
func TestFiles_Refusals(t *testing.T) {
	ts := filesServer(t, 1<<20)
	for _, tc := range []struct {
		name string
		do   func() (int, string)
		code int
		want string
	}{
		{"too_large", func() (int, string) {
			return putFile(t, ts, "big.bin", bytes.NewReader(make([]byte, 1<<20+1)), nil)
		}, 400, `Request body is larger than 1048576 bytes`},
		{"outside", func() (int, string) { return putFile(t, ts, "/etc/hutch-api-test", strings.NewReader("x"), nil) }, 412, `Path /etc/hutch-api-test is outside the sandbox's workspace`},
		{"escape", func() (int, string) { return putFile(t, ts, "../../x", strings.NewReader("x"), nil) }, 412, `Path ../../x is outside the sandbox's workspace`},
		{"bad_mode", func() (int, string) {
			return putFile(t, ts, "a", strings.NewReader("x"), url.Values{"mode": {"999"}})
		}, 400, `File mode is not valid: 999`},
		{"unknown_param", func() (int, string) {
			return putFile(t, ts, "a", strings.NewReader("x"), url.Values{"owner": {"root"}})
		}, 400, `Unknown query parameter \"owner\"`},
		{"no_path", func() (int, string) { return putFile(t, ts, "", strings.NewReader("x"), nil) }, 400, `Give the file's path as the query parameter path`},
		{"read_missing", func() (int, string) {
			code, body, _ := getFile(t, ts, "missing.bin")
			return code, string(body)
		}, 404, `File not found: `},
		{"read_dir", func() (int, string) {
			code, body, _ := getFile(t, ts, ".")
			return code, string(body)
		}, 400, `Path is a directory: `},
		{"read_outside", func() (int, string) {
			code, body, _ := getFile(t, ts, "/etc/passwd")
			return code, string(body)
		}, 412, `Path /etc/passwd is outside the sandbox's workspace`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := tc.do()
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%d %s; want %d containing %s", code, body, tc.code, tc.want)
			}
		})
	}
	// A refused write left nothing behind.
	if code, _, _ := getFile(t, ts, "big.bin"); code != 404 {
		t.Errorf("the oversized write left big.bin (read: %d)", code)
	}
}
