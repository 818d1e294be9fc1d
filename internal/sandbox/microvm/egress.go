package microvm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// A VM under sandbox.network allowlist has one network card, whose only
// peer is hutch's egress proxy (one per VM, on a unix socket in its run
// dir); under none it has no card at all. The card is what a boot
// decides: none and allowlist are different VMs, a new allowlist is not
// when Config.EgressPolicy is set (the proxy reads it per connection).
//
// With Config.EgressCA the guest trusts the office's CA, so the proxy
// can terminate TLS to substitute placeholder secrets: the guest gets the
// CA and a bundle of its own system roots plus the CA as files held in
// its memory, and every command the variables that name them, as the
// container agent's --egress-ca gives them (internal/agent/egressca.go).

// Where the guest holds the CA (NODE_EXTRA_CA_CERTS, which Node adds to
// its own roots) and the bundle (the variables of OpenSSL and Go, Python
// requests, curl and git, each of which replaces the system's roots with
// it). The bundle's path is the container agent's.
const (
	guestEgressCA     = "/etc/hutch-egress-ca.pem"
	guestEgressBundle = "/etc/hutch-egress-ca-bundle.pem"
)

// trustPaths are the trust files' paths, sorted, for the projected record.
var trustPaths = []string{guestEgressBundle, guestEgressCA}

// guestSystemRoots are where distributions keep their roots, as the
// agent looks for them: the first the guest has goes into the bundle.
var guestSystemRoots = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
}

// maxSystemRoots bounds a system bundle read from the guest (Debian's
// is about 200 KiB).
const maxSystemRoots = 4 << 20

// networked reports whether spec's VM gets a network card: under the
// allowlist mode, or with hosts listed and no mode given (callers from
// before sandbox.network). Under none the proxy would refuse every host,
// placeholders' included, so there is no card to refuse them on.
func networked(spec sandbox.Spec) bool {
	return spec.Network == netpolicy.ModeAllowlist || (spec.Network == "" && len(spec.NetworkAllow) > 0)
}

// network is desired.Network of spec and the CA its guest trusts: ""
// without a card; otherwise "allowlist", then the list when the proxy
// holds it fixed from boot, then a digest of the CA, so a new CA re-creates
// the VM. A spec with placeholders is refused when the proxy could not
// substitute them.
func (r *Runtime) network(spec sandbox.Spec) (string, *egress.CA, error) {
	if !networked(spec) {
		return "", nil, nil
	}
	n := string(netpolicy.ModeAllowlist)
	if r.cfg.EgressPolicy == nil {
		allow, err := netpolicy.ParseAllowlist(spec.NetworkAllow)
		if err != nil {
			return "", nil, err
		}
		n += " " + allow.String()
	}
	if spec.Placeholders && (r.cfg.EgressCA == nil || r.cfg.EgressSecrets == nil) {
		return "", nil, errdefs.New(errdefs.ErrFailedPrecondition,
			"This conversation's placeholder secrets need hutch's egress proxy to hold their values, which this microVM runtime was made without; run it through hutch exec, hutch serve or the daemon")
	}
	if r.cfg.EgressCA == nil {
		return n, nil, nil
	}
	ca, err := r.cfg.EgressCA(spec.OfficeKey)
	if err != nil {
		return "", nil, fmt.Errorf("egress CA of office %s: %w", spec.OfficeKey, err)
	}
	sum := sha256.Sum256(ca.CertPEM())
	return n + " egress-ca=" + hex.EncodeToString(sum[:8]), ca, nil
}

// egressPolicy is what spec's proxy enforces: Config.EgressPolicy read
// per connection, or the spec's allowlist. A policy other than allowlist
// refuses every host: under none the card is there until the next
// command re-creates the VM without it, and open is no mode of a
// microVM's (the next command is refused).
func (r *Runtime) egressPolicy(spec sandbox.Spec) (func() netpolicy.Policy, error) {
	if r.cfg.EgressPolicy == nil {
		allow, err := netpolicy.ParseAllowlist(spec.NetworkAllow)
		if err != nil {
			return nil, err
		}
		pol := netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: allow}
		return func() netpolicy.Policy { return pol }, nil
	}
	key := spec.OfficeKey
	return func() netpolicy.Policy {
		if pol := r.cfg.EgressPolicy(key); pol.Mode == netpolicy.ModeAllowlist {
			return pol
		}
		return netpolicy.Policy{Mode: netpolicy.ModeNone}
	}, nil
}

// startEgress starts the VM's egress proxy on a unix socket in its run
// dir and returns the command QEMU runs for each guest connection (this
// hutch binary, piping the connection to the socket) and the proxy's stop.
// ca, when set, lets the proxy intercept TLS for placeholder secrets.
func (r *Runtime) startEgress(dir string, spec sandbox.Spec, ca *egress.CA) (string, func(), error) {
	key := spec.OfficeKey
	policy, err := r.egressPolicy(spec)
	if err != nil {
		return "", nil, err
	}
	sock := filepath.Join(dir, "egress.sock")
	// QEMU splits the command into words and the -netdev option on
	// commas: neither path may hold a separator or a quote.
	if strings.ContainsAny(r.cfg.Agent.Path+sock, " \t\n'\"\\,") {
		return "", nil, errdefs.New(errdefs.ErrInvalid, "The hutch binary's path or the run dir contains a space, quote or comma, which QEMU's per-connection command cannot hold")
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return "", nil, fmt.Errorf("egress proxy: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		_ = l.Close()
		return "", nil, fmt.Errorf("egress proxy: %w", err)
	}
	p := &egress.Proxy{
		Policy:        policy,
		Log:           r.log,
		Office:        key,
		Dial:          r.cfg.EgressDial,
		CA:            ca,
		UpstreamRoots: r.cfg.EgressUpstreamRoots,
	}
	if r.cfg.EgressDenied != nil {
		p.Denied = r.cfg.EgressDenied(key)
	}
	if r.cfg.EgressSecrets != nil {
		p.Secrets = func() []egress.Secret { return r.cfg.EgressSecrets(key) }
	}
	if r.cfg.EgressRecord != nil {
		p.Record = r.cfg.EgressRecord(key)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.Serve(ctx, l); err != nil {
			r.log.Warn("egress proxy ended", "office_key", key, "error", err)
		}
	}()
	r.log.Info("microVM network: egress through hutch's proxy only", "office_key", key,
		"allow", policy().Allow.String(), "live_allowlist", r.cfg.EgressPolicy != nil, "trusts_ca", ca != nil)
	return r.cfg.Agent.Path + " microvm egress-pipe " + sock, func() { cancel(); <-done }, nil
}

// guestTrust returns the trust files of ca for the guest: the CA and a
// bundle of the guest's system roots (read from its disk now) followed by
// the CA. A guest without readable roots gets the CA alone, and its
// commands then reach only what the proxy intercepts: that is logged.
func (r *Runtime) guestTrust(ctx context.Context, v *vm, ca *egress.CA) []agent.GuestFile {
	caPEM := ca.CertPEM()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var bundle bytes.Buffer
	for _, p := range guestSystemRoots {
		var b bytes.Buffer
		err := v.client.ReadFile(ctx, p, &capped{w: &b, left: maxSystemRoots})
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			r.log.Warn("cannot read the guest's system roots; looking further", "office_key", v.key, "path", p, "error", err)
			continue
		}
		bundle.Write(b.Bytes())
		if b.Len() > 0 && !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
			bundle.WriteByte('\n')
		}
		break
	}
	if bundle.Len() == 0 {
		r.log.Warn("the guest has no system roots: its commands trust the egress CA alone", "office_key", v.key)
	}
	bundle.Write(caPEM)
	return []agent.GuestFile{
		{Path: guestEgressCA, Mode: 0o644, Data: caPEM, ReadOnly: true},
		{Path: guestEgressBundle, Mode: 0o644, Data: bundle.Bytes(), ReadOnly: true},
	}
}

// trustEnv is env with the variables that name the trust files added
// (those env sets itself are kept), when spec's VM trusts a CA.
func (r *Runtime) trustEnv(spec sandbox.Spec, env map[string]string) map[string]string {
	if !networked(spec) || r.cfg.EgressCA == nil {
		return env
	}
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	add := map[string]string{"NODE_EXTRA_CA_CERTS": guestEgressCA}
	for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"} {
		add[k] = guestEgressBundle
	}
	for k, v := range add {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out
}

// capped passes at most left bytes to w and fails past them.
type capped struct {
	w    *bytes.Buffer
	left int
}

var errTooLarge = errors.New("larger than 4 MiB")

func (c *capped) Write(p []byte) (int, error) {
	if len(p) > c.left {
		return 0, errTooLarge
	}
	c.left -= len(p)
	return c.w.Write(p)
}
