package box

import (
	"errors"
	"strings"
	"testing"
)

// TestExplainBuild: a failed image build whose output shows npm refusing
// a proxy's certificate says how to go on; other failures pass unchanged.
func TestExplainBuild(t *testing.T) {
	t.Parallel()
	failed := errors.New("image build failed at Step 6/9 : RUN npm install -g @anthropic-ai/claude-code: The command '/bin/sh -c npm install -g @anthropic-ai/claude-code' returned a non-zero code: 1")
	var out tail
	_, _ = out.Write([]byte(strings.Repeat("x", 100<<10) + "\nnpm error code SELF_SIGNED_CERT_IN_CHAIN\n"))
	err := explainBuild(failed, out.String())
	if !errors.Is(err, failed) || !strings.HasPrefix(err.Error(), "could not build the sandbox image: "+failed.Error()+". npm does not trust the certificate chain") {
		t.Errorf("explainBuild = %v", err)
	}
	if err := explainBuild(failed, "E: Unable to locate package jqq\n"); err.Error() != "could not build the sandbox image: "+failed.Error() {
		t.Errorf("explainBuild(other failure) = %v", err)
	}
}
