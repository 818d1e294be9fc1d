package agent

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The egress proxy may intercept TLS (to apply its policy to what goes
// inside), signing with a CA of its own. A command trusts that CA only if
// its TLS library does, and libraries read different places: so the agent
// writes one bundle, the system's roots plus the CA, and points the usual
// variables at it (see egressEnv).

// defaultEgressCABundle is where the bundle goes unless
// Options.EgressCABundle says otherwise.
const defaultEgressCABundle = "/etc/hutch-egress-ca-bundle.pem"

// systemCABundles are where distributions keep their roots (Debian,
// Ubuntu and Alpine; Fedora and RHEL; others; RHEL's extracted bundle);
// the first that exists is used.
var systemCABundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
}

// prepareEgressCA writes Options.EgressCAPEM to Options.EgressCA when it
// is set, then the trust bundle, and returns the bundle's path.
func prepareEgressCA(opts Options) (string, error) {
	if opts.EgressCAPEM != "" {
		if err := writeEgressCAFile(opts.EgressCA, opts.EgressCAPEM); err != nil {
			return "", err
		}
	}
	if opts.EgressCABundle != "" {
		if err := writeEgressCABundle(opts.EgressCABundle, opts.EgressCA, systemCABundles); err != nil {
			return "", err
		}
		return opts.EgressCABundle, nil
	}
	// An image whose user is not root, or whose root file system is
	// read-only, cannot take /etc: the bundle then goes where the agent
	// writes anyway (beside its socket, or the CA it wrote), then to the
	// temporary directory. Only the sandbox's own clients read it.
	candidates := []string{defaultEgressCABundle}
	if opts.Listen != "" {
		candidates = append(candidates, filepath.Join(filepath.Dir(opts.Listen), "egress-ca-bundle.pem"))
	}
	if opts.EgressCAPEM != "" {
		candidates = append(candidates, filepath.Join(filepath.Dir(opts.EgressCA), "egress-ca-bundle.pem"))
	}
	candidates = append(candidates, filepath.Join(os.TempDir(), "hutch-egress-ca-bundle.pem"))
	return firstWritable(candidates, func(bundle string) error {
		return writeEgressCABundle(bundle, opts.EgressCA, systemCABundles)
	})
}

// firstWritable writes the first of candidates that write takes, going on
// to the next only when one cannot be written for want of permission or
// of a writable file system; any other error, or the first one when none
// could be written, is returned.
func firstWritable(candidates []string, write func(string) error) (string, error) {
	var first error
	for _, c := range candidates {
		err := write(c)
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.EROFS) {
			return "", err
		}
	}
	return "", first
}

// checkEgressCAOptions checks the egress CA options before anything is
// written.
func checkEgressCAOptions(opts Options) error {
	switch {
	case opts.EgressCA == "" && opts.EgressCAPEM != "":
		return errdefs.New(errdefs.ErrInvalid, "Agent --egress-ca-pem needs --egress-ca, the file to write the certificate to")
	case opts.EgressCA == "" && opts.EgressCABundle != "":
		return errdefs.New(errdefs.ErrInvalid, "Agent egress CA bundle needs --egress-ca, the certificate it adds")
	case opts.EgressCA != "" && !filepath.IsAbs(opts.EgressCA):
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent --egress-ca must be an absolute path: %q", opts.EgressCA))
	case opts.EgressCABundle != "" && !filepath.IsAbs(opts.EgressCABundle):
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent egress CA bundle must be an absolute path: %q", opts.EgressCABundle))
	}
	return nil
}

// writeEgressCAFile writes the base64-encoded PEM b64 to path, atomically
// and readable by all (a CA certificate is public), once it has checked
// it. A missing directory is created.
func writeEgressCAFile(path, b64 string) error {
	pemBytes, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalid, "Agent --egress-ca-pem is not valid base64: "+err.Error())
	}
	if _, err := parseCAPEM("--egress-ca-pem", pemBytes); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // G301: holds a public certificate
		return fmt.Errorf("agent: egress CA: %w", err)
	}
	if err := atomicfile.WriteFile(path, pemBytes, 0o644); err != nil { //nolint:gosec // G306: a public certificate
		return fmt.Errorf("agent: egress CA: %w", err)
	}
	return nil
}

// writeEgressCABundle writes to out, atomically and mode 0644, the first
// of systemBundles that exists (none is fine: then the CA alone) followed
// by the certificates of caFile.
func writeEgressCABundle(out, caFile string, systemBundles []string) error {
	b, err := os.ReadFile(caFile) //nolint:gosec // G304: the path the host gave the agent
	if err != nil {
		return fmt.Errorf("agent: egress CA: %w", err)
	}
	certs, err := parseCAPEM(caFile, b)
	if err != nil {
		return err
	}
	var bundle bytes.Buffer
	for _, p := range systemBundles {
		sys, err := os.ReadFile(p) //nolint:gosec // G304: a fixed list of well-known paths
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("agent: egress CA: read the system bundle: %w", err)
		}
		bundle.Write(sys)
		if len(sys) > 0 && sys[len(sys)-1] != '\n' {
			bundle.WriteByte('\n')
		}
		break
	}
	for _, c := range certs {
		_ = pem.Encode(&bundle, c)
	}
	if err := atomicfile.WriteFile(out, bundle.Bytes(), 0o644); err != nil { //nolint:gosec // G306: public certificates
		return fmt.Errorf("agent: egress CA bundle: %w", err)
	}
	return nil
}

// parseCAPEM returns the CERTIFICATE blocks of b, named name in errors. It
// refuses b unless it holds at least one, each parses, and it holds
// nothing else: the bundle is readable by every command, and a private
// key given by mistake must not land there.
func parseCAPEM(name string, b []byte) ([]*pem.Block, error) {
	var certs []*pem.Block
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent egress CA %s holds a %q block: give the certificate alone", name, block.Type))
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent egress CA %s: certificate %d does not parse: %v", name, len(certs)+1, err))
		}
		certs = append(certs, &pem.Block{Type: block.Type, Bytes: block.Bytes})
	}
	if len(certs) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent egress CA %s holds no PEM certificate", name))
	}
	return certs, nil
}
