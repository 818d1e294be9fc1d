package client_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadme_ShowsTheExample: the README's Go snippet is ExampleLocal's
// body, which go test compiles, so the README's cannot rot.
func TestReadme_ShowsTheExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "\t// README begin\n")
	body, _, ok2 := strings.Cut(rest, "\t// README end\n")
	if !ok || !ok2 {
		t.Fatal("example_test.go has no README begin/end markers")
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+want.String()+"```\n") {
		t.Errorf("README.md does not show ExampleLocal's code; want a go block of:\n%s", want.String())
	}
}
