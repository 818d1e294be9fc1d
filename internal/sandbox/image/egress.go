package image

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/moby/moby/api/types/mount"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// A relaying runtime (sandbox.network allowlist or none, or placeholder
// secrets under any policy) reaches the network only through hutch's
// egress proxy. Under a proxied policy its container is on no network at
// all ("none": a loopback interface and nothing else), so a process that
// ignores HTTPS_PROXY, resolves names itself or sends raw TCP, UDP or
// IPv6 gets nowhere. Its agent listens on egressAddr inside and relays
// each connection over the agent channel the host already holds, where
// the office's proxy (egress.Relays) decides on it. Under open with
// placeholders the container keeps its own network, and commands are
// pointed at the same proxy so that placeholders get substituted.
const (
	// egressAddr is the proxy's address inside the container.
	egressAddr = "127.0.0.1:3128"
	// egressCAPath is where the office's egress CA certificate is
	// mounted read-only, for the agent to add to the trust store.
	egressCAPath = "/hutch/egress-ca.pem"
)

// relays reports whether spec's runtime goes out through hutch's proxy.
func relays(spec sandbox.Spec) bool {
	return spec.Network.Proxied() || spec.Placeholders
}

// egressCAFile is the host copy of the office's CA certificate, mounted
// at egressCAPath: beside its socket dir, like its key file.
func egressCAFile(runDir, officeKey string) string {
	return socketDir(runDir, officeKey) + ".ca.pem"
}

// egressCA returns the office's CA certificate, refusing a relaying spec
// when this runtime was configured without a proxy.
func (r *Runtime) egressCA(officeKey string) ([]byte, error) {
	if r.cfg.Egress == nil || r.cfg.EgressCA == nil {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition,
			"This conversation's sandbox.network (or its placeholder secrets) needs hutch's egress proxy, which this image-mode runtime was made without; run it through hutch exec, hutch serve or the daemon")
	}
	ca, err := r.cfg.EgressCA(officeKey)
	if err != nil {
		return nil, err
	}
	return ca.CertPEM(), nil
}

// egressNetwork is desired.Network of a relaying spec: "none" or the
// office's network, and a digest of the CA the container trusts, so a
// new CA re-creates it.
func (r *Runtime) egressNetwork(spec sandbox.Spec) (string, error) {
	pem, err := r.egressCA(spec.OfficeKey)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(pem)
	n := NetworkName(spec.OfficeKey)
	if spec.Network.Proxied() {
		n = "none"
	}
	return n + " egress-ca=" + hex.EncodeToString(sum[:8]), nil
}

// egressMount writes the office's CA certificate to the run dir and
// returns its mount and the agent's arguments that use it.
func (r *Runtime) egressMount(spec sandbox.Spec) (mount.Mount, []string, error) {
	pem, err := r.egressCA(spec.OfficeKey)
	if err != nil {
		return mount.Mount{}, nil, err
	}
	file := egressCAFile(r.cfg.RunDir, spec.OfficeKey)
	if err := atomicfile.WriteFile(file, pem, 0o644); err != nil {
		return mount.Mount{}, nil, err
	}
	m := mount.Mount{Type: mount.TypeBind, Source: file, Target: egressCAPath, ReadOnly: true}
	return m, []string{"--egress", egressAddr, "--egress-ca", egressCAPath}, nil
}

// relay keeps the office's relay pump running on cl: the agent's relayed
// connections reach the office's proxy while this process holds the
// channel (a daemon always; a CLI process while its command runs).
// s.mu is held.
func (r *Runtime) relay(s *session, cl *agent.Client) {
	s.egress.Run(cl, r.cfg.Egress.Handler(s.Key), r.log.With("office_key", s.Key))
}
