package project_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/project"
)

// npmProxyLog is what `npm install -g` prints behind a proxy that
// intercepts TLS with a CA the image does not trust.
const npmProxyLog = `Step 6/9 : RUN npm install -g @anthropic-ai/claude-code
 ---> Running in 4f2a
npm error code SELF_SIGNED_CERT_IN_CHAIN
npm error errno SELF_SIGNED_CERT_IN_CHAIN
npm error request to https://registry.npmjs.org/@anthropic-ai%2fclaude-code failed, reason: self-signed certificate in certificate chain
npm error A complete log of this run can be found in: /root/.npm/_logs/debug-0.log
`

// TestBuildAdvice pins what a failed image build says when npm does not
// trust the proxy's certificate, and that other failures get nothing.
func TestBuildAdvice(t *testing.T) {
	want := "npm does not trust the certificate chain the registry presented (SELF_SIGNED_CERT_IN_CHAIN), as happens behind a proxy that intercepts TLS. " +
		"To go on without agent CLIs in the image, run `hutch project settings set sandbox-agents '[]'`. " +
		"To keep them, make a base image that trusts your proxy's CA (copy it into /usr/local/share/ca-certificates/, run update-ca-certificates, and set ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt), then run `hutch project settings set sandbox-base <that image>`."
	if got := project.BuildAdvice(npmProxyLog); got != want {
		t.Errorf("BuildAdvice(npm behind a proxy) =\n%q\nwant\n%q", got, want)
	}
	for _, log := range []string{
		strings.ReplaceAll(npmProxyLog, "SELF_SIGNED_CERT_IN_CHAIN", "UNABLE_TO_GET_ISSUER_CERT_LOCALLY"),
	} {
		if got := project.BuildAdvice(log); !strings.Contains(got, "(UNABLE_TO_GET_ISSUER_CERT_LOCALLY)") || !strings.Contains(got, "sandbox-agents '[]'") {
			t.Errorf("BuildAdvice(%q) = %q", log, got)
		}
	}
	for _, log := range []string{"", "E: Unable to locate package jqq\n", "npm error code E404\n"} {
		if got := project.BuildAdvice(log); got != "" {
			t.Errorf("BuildAdvice(%q) = %q, want none", log, got)
		}
	}
}
