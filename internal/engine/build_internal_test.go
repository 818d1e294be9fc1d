package engine

import (
	"bytes"
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
