package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/service"
)

// spec is openapi.json, parsed, with its schemas compiled on demand by a
// draft 2020-12 validator (OpenAPI 3.1's schemas are that dialect).
type spec struct {
	doc map[string]any
	c   *jsonschema.Compiler
}

const specURL = "file:///openapi.json"

func loadSpec(t *testing.T) *spec {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.OpenAPI))
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.AssertContent()
	if err := c.AddResource(specURL, doc); err != nil {
		t.Fatal(err)
	}
	m, ok := doc.(map[string]any)
	if !ok || m["openapi"] != "3.1.0" {
		t.Fatalf("openapi.json is not an OpenAPI 3.1.0 document")
	}
	return &spec{doc: m, c: c}
}

// pointer is a JSON pointer of the given tokens.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return b.String()
}

// schema compiles the schema at a JSON pointer of the document.
func (s *spec) schema(t *testing.T, ptr string) *jsonschema.Schema {
	t.Helper()
	sch, err := s.c.Compile(specURL + "#" + ptr)
	if err != nil {
		t.Fatalf("schema %s: %v", ptr, err)
	}
	return sch
}

// at is the value at a JSON pointer of the document, following OpenAPI
// reference objects ($ref outside schemas) on the way; it returns the
// pointer it ended at.
func (s *spec) at(ptr string) (any, string) {
	var v any = s.doc
	cur := ""
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for _, tok := range toks {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := v.(map[string]any)
		if !ok {
			return nil, ""
		}
		if v, ok = m[tok]; !ok {
			return nil, ""
		}
		cur += pointer(tok)
		if r, ok := v.(map[string]any)["$ref"].(string); ok && !strings.Contains(cur, "/schema") {
			cur = strings.TrimPrefix(r, "#")
			v, _ = s.at(cur)
		}
	}
	return v, cur
}

// operations lists "METHOD /path" for every operation of the description.
func (s *spec) operations() []string {
	var out []string
	for path, item := range s.doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(out)
	return out
}

// operation finds the operation serving method and a concrete path
// (query aside), matching templated segments such as {name}; "" when the
// description has none.
func (s *spec) operation(method, rawPath string) string {
	path, _, _ := strings.Cut(rawPath, "?")
	for p, item := range s.doc["paths"].(map[string]any) {
		if _, ok := item.(map[string]any)[strings.ToLower(method)]; !ok {
			continue
		}
		re := "^" + regexp.MustCompile(`\\\{[^}]*\\\}`).ReplaceAllString(regexp.QuoteMeta(p), `[^/]+`) + "$"
		if regexp.MustCompile(re).MatchString(path) {
			return pointer("paths", p, strings.ToLower(method))
		}
	}
	return ""
}

// hasPath reports whether the description has the path under any method.
func (s *spec) hasPath(rawPath string) bool {
	for _, m := range []string{"GET", "POST", "DELETE"} {
		if s.operation(m, rawPath) != "" {
			return true
		}
	}
	return false
}

// validate checks one JSON text (one value, or one a line for a stream
// when stream is set) against the schema at ptr.
func (s *spec) validate(t *testing.T, what, ptr, text string, stream bool) {
	t.Helper()
	sch := s.schema(t, ptr)
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	n := 0
	for {
		var v any
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("%s: not JSON: %v\n%s", what, err, text)
			return
		}
		if n++; n > 1 && !stream {
			t.Errorf("%s: more than one JSON value:\n%s", what, text)
			return
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s does not match %s: %v\n%s", what, ptr, err, text)
		}
	}
	if n == 0 {
		t.Errorf("%s: no JSON value", what)
	}
}

// checkResponse validates an answer of the operation at op: its status
// must be described, and its body match the schema of its content type.
func (s *spec) checkResponse(t *testing.T, what, op string, status int, contentType, body string) {
	t.Helper()
	if op == "" {
		// A path asked with a method it lacks, or no path at all: the
		// API's error shape all the same.
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d from no operation of the description", what, status)
		}
		s.validate(t, what, "/components/schemas/ErrorBody", body, false)
		return
	}
	resp, rptr := s.at(op + pointer("responses", fmt.Sprint(status)))
	if resp == nil {
		t.Errorf("%s: status %d is not among the operation's responses (%s)", what, status, op)
		return
	}
	media, _, _ := mime.ParseMediaType(contentType)
	content, _ := resp.(map[string]any)["content"].(map[string]any)
	mt, ok := content[media].(map[string]any)
	if !ok {
		t.Errorf("%s: content type %q is not among %v (%s)", what, media, slices.Sorted(maps.Keys(content)), rptr)
		return
	}
	switch {
	case media == "application/json":
		s.validate(t, what, rptr+pointer("content", media, "schema"), body, false)
	case mt["x-itemSchema"] != nil:
		s.validate(t, what, rptr+pointer("content", media, "x-itemSchema"), body, true)
	}
}

// checkRequest validates a JSON request body against the operation's.
func (s *spec) checkRequest(t *testing.T, what, op, body string) {
	t.Helper()
	rb, ptr := s.at(op + "/requestBody")
	if rb == nil {
		if strings.TrimSpace(body) != "" {
			t.Errorf("%s: a body, and the operation takes none (%s)", what, op)
		}
		return
	}
	if _, ok := rb.(map[string]any)["content"].(map[string]any)["application/json"]; ok {
		s.validate(t, what, ptr+pointer("content", "application/json", "schema"), body, false)
	}
}

// TestOpenAPI_Routes: the description has an operation for every route
// of Handler() (with /metrics and /mcp served), and none the server lacks.
// /mcp takes every method; MCP's streamable HTTP uses GET, POST and DELETE.
func TestOpenAPI_Routes(t *testing.T) {
	s := loadSpec(t)
	srv := &api.Server{Metrics: http.NotFoundHandler(), MCP: http.NotFoundHandler()}
	var routes []string
	for _, pattern := range srv.Routes() {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			for _, m := range []string{"DELETE", "GET", "POST"} {
				routes = append(routes, m+" "+pattern)
			}
			continue
		}
		routes = append(routes, method+" "+path)
	}
	slices.Sort(routes)
	ops := s.operations()
	for _, r := range routes {
		if !slices.Contains(ops, r) {
			t.Errorf("route %s is missing from openapi.json", r)
		}
	}
	for _, op := range ops {
		if !slices.Contains(routes, op) {
			t.Errorf("openapi.json describes %s, which the server does not serve", op)
		}
	}
	// Every operation is named (the TypeScript client's method names).
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		o, _ := s.at(pointer("paths", path, strings.ToLower(method)))
		if id, _ := o.(map[string]any)["operationId"].(string); id == "" {
			t.Errorf("%s has no operationId", op)
		}
	}
}

// TestOpenAPI_Schemas: every schema of the description compiles.
func TestOpenAPI_Schemas(t *testing.T) {
	s := loadSpec(t)
	for name := range s.doc["components"].(map[string]any)["schemas"].(map[string]any) {
		s.schema(t, pointer("components", "schemas", name))
	}
}

// TestOpenAPI_DocExamples: every example of docs/api.md matches the
// description: a request's body the schema of its operation's body, an
// answer the schema of its status; each ```json block is an instance of
// one of the description's schemas.
func TestOpenAPI_DocExamples(t *testing.T) {
	s := loadSpec(t)
	for i, ex := range examples(t) {
		what := fmt.Sprintf("example %d (%s %s)", i+1, ex.method, ex.path)
		op := s.operation(ex.method, ex.path)
		if op == "" && !s.hasPath(ex.path) {
			t.Errorf("%s: no such path in openapi.json", what)
		}
		if op != "" {
			s.checkRequest(t, what+" request", op, ex.body)
		}
		ct := "application/json"
		if ex.method == "POST" && strings.HasPrefix(ex.path, "/v1/exec") && ex.status == 200 {
			ct = "application/x-ndjson"
		}
		s.checkResponse(t, what+" answer", op, ex.status, ct, ex.response)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(data), -1)
	if len(blocks) == 0 {
		t.Fatal("no ```json block in docs/api.md; the pattern no longer matches")
	}
	names := slices.Sorted(maps.Keys(s.doc["components"].(map[string]any)["schemas"].(map[string]any)))
	for _, b := range blocks {
		var v any
		dec := json.NewDecoder(strings.NewReader(b[1]))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Errorf("```json block is not JSON: %v\n%s", err, b[1])
			continue
		}
		matched := false
		for _, n := range names {
			if s.schema(t, pointer("components", "schemas", n)).Validate(v) == nil {
				matched = true
				break
			}
		}
		if !matched {
			t.Errorf("```json block matches no schema of openapi.json:\n%s", b[1])
		}
	}
}

// call is one request to a test server and what it answered.
type call struct {
	method, path, body string
	header             []string
}

func (c call) do(t *testing.T, base string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(c.header); i += 2 {
		req.Header.Set(c.header[i], c.header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

const openapiToken = "openapi-test-token"

// openapiServers are, behind a token, with an admin portal link: a
// host-mode server (with metrics), a managed one whose runtimes are a
// mock, and a managed one whose engine fails: status unavailable, stop
// a conflict.
func openapiServers(t *testing.T) (host, managed, failing string) {
	t.Helper()
	serve := func(mode sandbox.Mode, fail map[string]error) string { return openapiServer(t, mode, fail) }
	image := sandbox.Mode{Kind: sandbox.KindImage, Target: "busybox"}
	return serve(sandbox.Mode{Kind: sandbox.KindHost}, nil), serve(image, nil),
		serve(image, map[string]error{
			mock.OpStatus: errdefs.New(errdefs.ErrUnavailable, "The engine did not answer"),
			mock.OpStop:   errdefs.New(errdefs.ErrConflict, "The runtime is being re-created"),
		})
}

// openapiServer is one server of openapiServers: in mode, its runtimes a
// mock failing as fail says unless mode is host.
func openapiServer(t *testing.T, mode sandbox.Mode, fail map[string]error) string {
	t.Helper()
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, nil)
	m := metrics.New("")
	svc.SetMetrics(m)
	if mode.Kind != sandbox.KindHost {
		svc.SetRuntime(mode, mock.New(mock.Config{Mode: mode, Fail: fail}))
	}
	srv := &api.Server{Service: svc, Mode: mode, Version: "test", Token: openapiToken, MaxBody: 64 << 10, Metrics: m.Handler(),
		AdminLink: func(string, time.Duration) (string, time.Time, error) {
			return "http://127.0.0.1:9/admin/login?t=x", time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), nil
		}}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

var bearer = []string{"Authorization", "Bearer " + openapiToken}

// TestOpenAPI_CutShort: the two errors that come after an answer began,
// triggered: a command whose runtime goes away once its output went out
// ends its stream with an error frame, which matches the frame schema,
// and a file read cut after its first byte sends the bytes it had and
// the Hutch-Error trailer, an ErrorBody, as the description says.
func TestOpenAPI_CutShort(t *testing.T) {
	s := loadSpec(t)
	gone := errdefs.New(errdefs.ErrUnavailable, "The runtime went away")
	base := openapiServer(t, sandbox.Mode{Kind: sandbox.KindImage, Target: "busybox"}, map[string]error{
		mock.OpExecAfterOutput: gone,
		mock.OpReadAfterBytes:  gone,
	})
	c := `"conversation":{"platform":"web","conversationId":"openapi-cut"}`

	ex := call{"POST", "/v1/exec", `{` + c + `,"command":"echo out; echo more > f.txt"}`, bearer}
	status, ct, body := ex.do(t, base)
	if status != http.StatusOK {
		t.Fatalf("exec: %d %s", status, body)
	}
	s.checkResponse(t, "exec cut short", s.operation(ex.method, ex.path), status, ct, body)
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	var last api.Frame
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Error == nil ||
		last.Error.Code != "unavailable" || last.Error.Error != gone.Error() || last.Result != nil || len(lines) < 2 {
		t.Errorf("exec's frames: %s; want the output, then an error frame of code unavailable", body)
	}

	req, err := http.NewRequest("POST", base+"/v1/files/read", strings.NewReader(`{`+c+`,"path":"f.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(bearer[0], bearer[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || string(data) != "m" {
		t.Errorf("files/read cut short: %d %q; want 200 and the one byte sent", resp.StatusCode, data)
	}
	trailer := resp.Trailer.Get(api.TrailerError)
	s.validate(t, "the Hutch-Error trailer", "/components/schemas/ErrorBody", trailer, false)
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(trailer), &eb); err != nil || eb.Code != "unavailable" || !strings.HasSuffix(eb.Error, ": "+gone.Error()) {
		t.Errorf("the Hutch-Error trailer: %q (%v); want the runtime's error, code unavailable", trailer, err)
	}
	if ok, _ := s.at(s.operation("POST", "/v1/files/read") + pointer("responses", "200")); !strings.Contains(fmt.Sprint(ok.(map[string]any)["description"]), api.TrailerError) {
		t.Errorf("files/read's description does not name the %s trailer", api.TrailerError)
	}
}

// TestOpenAPI_Errors: each kind of error the API answers, triggered for
// real, is described by its operation and has the error shape.
func TestOpenAPI_Errors(t *testing.T) {
	s := loadSpec(t)
	host, managed, failing := openapiServers(t)
	c := `"conversation":{"platform":"web","conversationId":"openapi-errors"}`
	cases := []struct {
		name, base string
		call       call
		status     int
		code       string
	}{
		{"no token", host, call{"GET", "/v1/health", "", nil}, 401, "unauthorized"},
		{"wrong token", host, call{"POST", "/v1/exec", `{}`, []string{"Authorization", "Bearer nope"}}, 401, "unauthorized"},
		{"bad JSON", host, call{"POST", "/v1/exec", `{`, bearer}, 400, "invalid"},
		{"unknown field", host, call{"POST", "/v1/policy", `{` + c + `,"nope":1}`, bearer}, 400, "invalid"},
		{"no conversation", host, call{"POST", "/v1/exec", `{"command":"true"}`, bearer}, 400, "invalid"},
		{"unknown platform", host, call{"POST", "/v1/chat", `{"conversation":{"platform":"irc","conversationId":"x"},"message":"/sandbox"}`, bearer}, 400, "invalid"},
		{"body too large", host, call{"POST", "/v1/vault/set", `{` + c + `,"vars":{"A":"` + strings.Repeat("x", 65<<10) + `"}}`, bearer}, 400, "invalid"},
		{"refused", host, call{"POST", "/v1/exec", `{` + c + `,"command":"true"}`, bearer}, 412, "failed_precondition"},
		{"refused tool", host, call{"POST", "/v1/tools/bash", `{` + c + `,"input":{"command":"true"}}`, bearer}, 412, "failed_precondition"},
		{"unknown tool", host, call{"POST", "/v1/tools/nope", `{` + c + `,"input":{}}`, bearer}, 404, "not_found"},
		{"unknown endpoint", host, call{"GET", "/v1/nothing", "", bearer}, 404, "not_found"},
		{"wrong method", host, call{"GET", "/v1/exec", "", bearer}, 405, "method_not_allowed"},
		{"not managed", host, call{"POST", "/v1/sandbox/status", `{` + c + `}`, bearer}, 501, "not_supported"},
		{"no runtimes", host, call{"GET", "/v1/sandbox/runtimes", "", bearer}, 501, "not_supported"},
		{"not running", managed, call{"POST", "/v1/sandbox/boost", `{` + c + `}`, bearer}, 412, "failed_precondition"},
		{"no limits", managed, call{"POST", "/v1/sandbox/limits", `{` + c + `}`, bearer}, 400, "invalid"},
		{"bad write mode", host, call{"POST", "/v1/files/write?platform=web&conversationId=x&path=a&mode=9", "", bearer}, 400, "invalid"},
		{"missing file", managed, call{"POST", "/v1/files/stat", `{` + c + `,"path":"nope"}`, bearer}, 404, "not_found"},
		{"read a directory", managed, call{"POST", "/v1/files/read", `{` + c + `,"path":"."}`, bearer}, 400, "invalid"},
		{"no vault entry", host, call{"POST", "/v1/vault/remove", `{"user":"U1","name":"NOPE"}`, bearer}, 404, "not_found"},
		{"bad door policy", host, call{"POST", "/v1/door", `{` + c + `,"policy":"open"}`, bearer}, 400, "invalid"},
		{"no admin who", host, call{"POST", "/v1/admin/link", `{"who":" "}`, bearer}, 400, "invalid"},
		{"engine unavailable", failing, call{"POST", "/v1/sandbox/status", `{` + c + `}`, bearer}, 503, "unavailable"},
		{"conflict", failing, call{"POST", "/v1/sandbox/stop", `{` + c + `}`, bearer}, 409, "conflict"},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			status, ct, body := tc.call.do(t, tc.base)
			if status != tc.status {
				t.Fatalf("%s %s: %d %s; want %d", tc.call.method, tc.call.path, status, body, tc.status)
			}
			var eb api.ErrorBody
			if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Code != tc.code {
				t.Errorf("body %s; want code %s", body, tc.code)
			}
			s.checkResponse(t, tc.name, s.operation(tc.call.method, tc.call.path), status, ct, body)
		})
	}
}

// TestOpenAPI_Answers: real answers of the routes match their schemas, in
// host mode (a trusted conversation) and in a managed mode whose
// runtimes are a mock.
func TestOpenAPI_Answers(t *testing.T) {
	s := loadSpec(t)
	host, managed, _ := openapiServers(t)
	c := `"conversation":{"platform":"web","conversationId":"openapi"}`
	q := url.Values{"platform": {"web"}, "conversationId": {"openapi"}}
	steps := []struct {
		base string
		call call
		// want is in the answer, when set: the case the step is for.
		want string
	}{
		{host, call{"GET", "/v1/health", "", nil}, ""},
		{host, call{"GET", "/v1/version", "", nil}, ""},
		{host, call{"GET", "/v1/openapi.json", "", nil}, ""},
		{host, call{"POST", "/v1/door", `{"global":true,"policy":"default"}`, nil}, ""},
		{host, call{"POST", "/v1/door", `{` + c + `,"policy":"shared"}`, nil}, ""},
		{host, call{"POST", "/v1/policy", `{` + c + `}`, nil}, ""},
		{host, call{"POST", "/v1/channel-kind", `{"conversation":{"platform":"slack","conversationId":"C1","channelKind":"im"}}`, nil}, ""},
		{host, call{"POST", "/v1/exec", `{` + c + `,"command":"printf out; printf err >&2; exit 2","stdin":"x","timeoutSeconds":5}`, nil}, ""},
		{host, call{"POST", "/v1/exec", `{` + c + `,"argv":["sleep","5"],"timeoutSeconds":0.2}`, nil}, `"timedOut":true`},
		{host, call{"POST", "/v1/files/write?" + q.Encode() + "&path=dir/a.txt&mode=0600", "hello\n", nil}, ""},
		{host, call{"POST", "/v1/files/list", `{` + c + `,"path":"dir"}`, nil}, ""},
		{host, call{"POST", "/v1/files/stat", `{` + c + `,"path":"dir/a.txt"}`, nil}, ""},
		{host, call{"POST", "/v1/files/read", `{` + c + `,"path":"dir/a.txt"}`, nil}, ""},
		{host, call{"POST", "/v1/tools/bash", `{` + c + `,"input":{"command":"echo hi"}}`, nil}, ""},
		{host, call{"POST", "/v1/tools/bash", `{` + c + `,"input":{"command":"exit 1"}}`, nil}, `"isError":true`},
		{host, call{"POST", "/v1/tools/write", `{` + c + `,"input":{"path":"b.txt","content":"one\n"}}`, nil}, ""},
		{host, call{"POST", "/v1/tools/edit", `{` + c + `,"input":{"path":"b.txt","oldText":"one","newText":"two"}}`, nil}, ""},
		{host, call{"POST", "/v1/tools/read", `{` + c + `,"input":{"path":"b.txt"}}`, nil}, ""},
		// A binary file, and a name that is not UTF-8 (nameBytes).
		{host, call{"POST", "/v1/exec", `{` + c + `,"command":"printf '\\000\\001\\377' > bin.dat; mkdir -p odd; : > odd/$(printf 'n\\377')"}`, nil}, ""},
		{host, call{"POST", "/v1/tools/read", `{` + c + `,"input":{"path":"bin.dat"}}`, nil}, `"binary":{`},
		{host, call{"POST", "/v1/files/list", `{` + c + `,"path":"odd"}`, nil}, `"nameBytes":"bv8="`},
		{host, call{"GET", "/metrics", "", nil}, "# TYPE"},
		{host, call{"POST", "/v1/vault/set", `{` + c + `,"vars":{"TOKEN":"secret"}}`, nil}, ""},
		{host, call{"POST", "/v1/vault/list", `{` + c + `}`, nil}, ""},
		{host, call{"POST", "/v1/vault/remove", `{` + c + `,"name":"TOKEN"}`, nil}, ""},
		{host, call{"POST", "/v1/chat", `{` + c + `,"message":"/sandbox"}`, nil}, ""},
		{host, call{"GET", "/v1/offices", "", nil}, ""},
		{host, call{"POST", "/v1/admin/link", `{"who":"U1","ttl":"10m"}`, nil}, ""},
		{managed, call{"POST", "/v1/sandbox/status", `{` + c + `}`, nil}, ""},
		{managed, call{"POST", "/v1/exec", `{` + c + `,"command":"true"}`, nil}, ""},
		{managed, call{"POST", "/v1/sandbox/boost", `{` + c + `,"cpus":"1.5"}`, nil}, ""},
		{managed, call{"POST", "/v1/sandbox/limits", `{` + c + `,"memory":"512m","pids":"100"}`, nil}, ""},
		{managed, call{"GET", "/v1/sandbox/runtimes", "", nil}, ""},
		{managed, call{"POST", "/v1/sandbox/stop", `{` + c + `}`, nil}, ""},
		{managed, call{"POST", "/v1/sandbox/remove", `{` + c + `}`, nil}, ""},
	}
	for _, st := range steps {
		st.call.header = bearer
		what := st.call.method + " " + st.call.path
		op := s.operation(st.call.method, st.call.path)
		if op == "" {
			t.Errorf("%s: no operation in openapi.json", what)
			continue
		}
		if !strings.Contains(st.call.path, "/files/write") {
			s.checkRequest(t, what+" request", op, st.call.body)
		}
		status, ct, body := st.call.do(t, st.base)
		if status != http.StatusOK {
			t.Errorf("%s: %d %s", what, status, body)
			continue
		}
		s.checkResponse(t, what, op, status, ct, body)
		if st.want != "" && !strings.Contains(body, st.want) {
			t.Errorf("%s: %s; want it to hold %s", what, body, st.want)
		}
	}
}

// TestOpenAPI_StatusSchema: a status with every field set (as
// TestStatus_RoundTrip fills it) matches the Status schema, so a field
// added to the API's Status and not described fails here.
func TestOpenAPI_StatusSchema(t *testing.T) {
	s := loadSpec(t)
	var st sandbox.Status
	fill(t, reflect.ValueOf(&st).Elem(), 1)
	st.State = sandbox.StateRunning
	a := api.StatusOf(st)
	a.Mode = "image"
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	s.validate(t, "a full status", "/components/schemas/Status", string(b), false)
}
