package engine

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestStreamBuildNamesFailedStep(t *testing.T) {
	stream := `{"stream":"Step 1/2 : FROM x\n"}
{"stream":" ---\u003e abc\n"}
{"stream":"Step 2/2 : RUN false\n"}
{"stream":" ---\u003e Running in 123\n"}
{"errorDetail":{"code":1,"message":"The command '/bin/sh -c false' returned a non-zero code: 1"},"error":"The command '/bin/sh -c false' returned a non-zero code: 1"}
`
	var out bytes.Buffer
	err := streamBuild(strings.NewReader(stream), &out)
	if err == nil || !strings.Contains(err.Error(), "Step 2/2 : RUN false") || !strings.Contains(err.Error(), "returned a non-zero code: 1") {
		t.Fatalf("err = %v, want it to name step 2/2 and the engine's message", err)
	}
	if !strings.Contains(out.String(), "Step 1/2 : FROM x\n") {
		t.Errorf("progress = %q", out.String())
	}
}

// TestStreamBuild_LongStep: an error quotes a long step and the command
// in the engine's message cut short; the progress has them whole.
func TestStreamBuild_LongStep(t *testing.T) {
	script := "set -e; " + strings.Repeat("echo step; ", 40)
	stream := `{"stream":"Step 4/6 : RUN ` + script + `\n"}
{"errorDetail":{"message":"The command '/bin/sh -c ` + script + `' returned a non-zero code: 100"}}
`
	err := streamBuild(strings.NewReader(stream), io.Discard)
	if err == nil {
		t.Fatal("no error")
	}
	if len(err.Error()) > 400 || !strings.HasPrefix(err.Error(), "image build failed at Step 4/6 : RUN set -e; echo step;") || !strings.HasSuffix(err.Error(), "…' returned a non-zero code: 100") {
		t.Errorf("err = %q", err)
	}
	if got := shortenCommands("executor failed running [/bin/sh -c " + script + "]: exit code: 2"); len(got) > 200 || !strings.HasSuffix(got, "…]: exit code: 2") {
		t.Errorf("BuildKit's message: %q", got)
	}
}
