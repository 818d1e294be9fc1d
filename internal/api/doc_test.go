package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// example is one request/response pair from docs/api.md.
type example struct {
	method, path, body string
	status             int
	response           string
}

var fence = regexp.MustCompile("(?s)```request\n(.*?)```\n\n```response (\\d+)\n(.*?)```")

func examples(t *testing.T) []example {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	for _, m := range fence.FindAllStringSubmatch(string(data), -1) {
		first, body, _ := strings.Cut(m[1], "\n")
		method, path, _ := strings.Cut(first, " ")
		status, _ := strconv.Atoi(m[2])
		out = append(out, example{method: method, path: path, body: strings.TrimSpace(body), status: status, response: m[3]})
	}
	if len(out) < 5 {
		t.Fatalf("found %d examples in docs/api.md; the fence pattern no longer matches", len(out))
	}
	return out
}

// normalize parses JSON values (one per line for streams), replaces the
// state dir with $STATE and zeroes what varies between runs.
func normalize(t *testing.T, text, state string) []any {
	t.Helper()
	text = strings.ReplaceAll(text, state, "$STATE")
	var vals []any
	dec := json.NewDecoder(strings.NewReader(text))
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("invalid JSON %q: %v", text, err)
		}
		zero(v)
		vals = append(vals, v)
	}
	// stdout and stderr frames interleave as the streams race; only the
	// order within each stream is defined.
	sort.SliceStable(vals, func(i, j int) bool { return streamOf(vals[i]) < streamOf(vals[j]) })
	return vals
}

// streamOf orders output frames by stream, before the closing frame.
func streamOf(v any) string {
	if m, ok := v.(map[string]any); ok {
		if s, ok := m["stream"].(string); ok {
			return s
		}
	}
	return "~"
}

func zero(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if k == "durationSeconds" {
				x[k] = 0.0
				continue
			}
			zero(val)
		}
	case []any:
		for _, e := range x {
			zero(e)
		}
	}
}

func TestDocExamples(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: state, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	srv := &api.Server{Service: service.New(layout, nil), Mode: sandbox.Mode{Kind: sandbox.KindHost}, Version: "test"}
	ts := httptestServer(t, srv.Handler())
	for i, ex := range examples(t) {
		req, err := http.NewRequest(ex.method, ts+ex.path, strings.NewReader(ex.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			sb.WriteString(sc.Text() + "\n")
		}
		_ = resp.Body.Close()
		if resp.StatusCode != ex.status {
			t.Errorf("example %d (%s %s): status %d, want %d; body %s", i+1, ex.method, ex.path, resp.StatusCode, ex.status, sb.String())
			continue
		}
		if diff := cmp.Diff(normalize(t, ex.response, state), normalize(t, sb.String(), state)); diff != "" {
			t.Errorf("example %d (%s %s) answer differs from docs/api.md (-doc +got):\n%s", i+1, ex.method, ex.path, diff)
		}
	}
}
