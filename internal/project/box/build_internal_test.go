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

// TestMissingUser: the user a runtime could not find, from runc's and
// crun's words as Docker and Podman pass them on.
func TestMissingUser(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"Error response from daemon: unable to find user node: no matching entries in passwd file":             "node",
		"crun: unable to find user vscode: no matching entries in passwd file: OCI runtime error":              "vscode",
		"Error response from daemon: OCI runtime create failed: exec: \"/hutch/bin/hutch\": permission denied": "",
	} {
		if got := missingUser(errors.New(msg)); got != want {
			t.Errorf("missingUser(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestPulled: the engines' words for an image that could not be pulled.
func TestPulled(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]bool{
		`failed to solve with frontend dockerfile.v0: failed to create LLB definition: failed to do request: Head "https://registry-1.docker.io/v2/library/node/manifests/22": dial tcp: lookup registry-1.docker.io: no such host`: true,
		"pull access denied for hutch-nope, repository does not exist or may require 'docker login'":                                                                                                                                true,
		`initializing source docker://mcr.microsoft.com/devcontainers/base:bookworm: pinging container registry mcr.microsoft.com`:                                                                                                  true,
		"The command '/bin/sh -c make' returned a non-zero code: 2":                                                                                                                                                                 false,
	} {
		if got := pulled(text); got != want {
			t.Errorf("pulled(%q) = %v", text, got)
		}
	}
}
