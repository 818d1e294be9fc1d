package project

import (
	"fmt"
	"strings"
)

// untrustedCA are the codes npm (Node's TLS) gives when it does not trust
// the certificate chain it was shown: what a proxy intercepting TLS with
// its own CA causes.
var untrustedCA = []string{
	"SELF_SIGNED_CERT_IN_CHAIN",
	"UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
	"UNABLE_TO_VERIFY_LEAF_SIGNATURE",
	"DEPTH_ZERO_SELF_SIGNED_CERT",
}

// BuildAdvice says how to go on after an image build whose output is
// output failed, when the output shows why in a way a user can act on
// (npm refusing a TLS-intercepting proxy's certificate), else "".
func BuildAdvice(output string) string {
	for _, code := range untrustedCA {
		if strings.Contains(output, "npm error code "+code) || strings.Contains(output, "npm ERR! code "+code) {
			return fmt.Sprintf("npm does not trust the certificate chain the registry presented (%s), as happens behind a proxy that intercepts TLS. "+
				"To go on without agent CLIs in the image, run `hutch project settings set %s '[]'`. "+
				"To keep them, make a base image that trusts your proxy's CA (copy it into /usr/local/share/ca-certificates/, run update-ca-certificates, and set ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt), then run `hutch project settings set %s <that image>`.",
				code, KeyAgents, KeyBase)
		}
	}
	return ""
}
