package egress_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func parseCAPEM(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("CertPEM is not a PEM certificate: %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestLoadOrCreateCA_CreatesThenLoads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	ca, err := egress.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCAPEM(t, ca.CertPEM())
	if cert.Subject.CommonName != "hutch egress CA" || !cert.IsCA || !cert.MaxPathLenZero || cert.MaxPathLen != 0 {
		t.Errorf("CA certificate: CN %q, IsCA %v, MaxPathLenZero %v, MaxPathLen %d",
			cert.Subject.CommonName, cert.IsCA, cert.MaxPathLenZero, cert.MaxPathLen)
	}
	if cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA key usage %v lacks cert sign", cert.KeyUsage)
	}
	if cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA key is %v, want ECDSA", cert.PublicKeyAlgorithm)
	}
	if life := time.Until(cert.NotAfter); life < 9*365*24*time.Hour {
		t.Errorf("CA valid for %v more, want about ten years", life)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}
	for file, want := range map[string]os.FileMode{egress.CACertFile: 0o644, egress.CAKeyFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", file, fi.Mode().Perm(), want)
		}
	}
	onDisk, _ := os.ReadFile(filepath.Join(dir, egress.CACertFile))
	if !bytes.Equal(onDisk, ca.CertPEM()) {
		t.Error("CertPEM differs from the file on disk")
	}

	again, err := egress.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
		t.Error("a second LoadOrCreateCA made a new CA instead of loading the one on disk")
	}

	other, err := egress.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if o := parseCAPEM(t, other.CertPEM()); o.SerialNumber.Cmp(cert.SerialNumber) == 0 {
		t.Error("two offices' CAs have the same serial")
	}
}

// TestLoadOrCreateCA_Race creates one CA from several goroutines at once:
// each opens its own lock file, as separate processes would.
func TestLoadOrCreateCA_Race(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	pems := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ca, err := egress.LoadOrCreateCA(dir)
			errs[i] = err
			if err == nil {
				pems[i] = ca.CertPEM()
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("LoadOrCreateCA %d: %v", i, errs[i])
		}
		if !bytes.Equal(pems[i], pems[0]) {
			t.Fatalf("LoadOrCreateCA %d returned another CA than 0", i)
		}
	}
	// The pair on disk is that CA, and its key matches (loading checks).
	ca, err := egress.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca.CertPEM(), pems[0]) {
		t.Error("the CA on disk is not the one every caller got")
	}
}

func TestLoadOrCreateCA_Broken(t *testing.T) {
	t.Run("key_does_not_match", func(t *testing.T) {
		a, b := t.TempDir(), t.TempDir()
		for _, dir := range []string{a, b} {
			if _, err := egress.LoadOrCreateCA(dir); err != nil {
				t.Fatal(err)
			}
		}
		key, _ := os.ReadFile(filepath.Join(b, egress.CAKeyFile))
		if err := os.WriteFile(filepath.Join(a, egress.CAKeyFile), key, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := egress.LoadOrCreateCA(a)
		if err == nil {
			t.Fatal("LoadOrCreateCA accepted a key of another CA")
		}
		for _, want := range []string{filepath.Join(a, egress.CAKeyFile), filepath.Join(a, egress.CACertFile), "does not match"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
		if !errdefs.IsFailedPrecondition(err) {
			t.Errorf("error %v is not a failed precondition", err)
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("error %q quotes the key", err)
		}
	})

	t.Run("certificate_without_key", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := egress.LoadOrCreateCA(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, egress.CAKeyFile)); err != nil {
			t.Fatal(err)
		}
		_, err := egress.LoadOrCreateCA(dir)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, egress.CAKeyFile)) || !errdefs.IsFailedPrecondition(err) {
			t.Errorf("LoadOrCreateCA with the key gone: %v, want a failed precondition naming the key file", err)
		}
	})

	// A key alone is what a creation that died between its two writes
	// leaves: no guest trusts it, so a new pair replaces it.
	t.Run("key_without_certificate", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, egress.CAKeyFile), []byte("left over"), 0o600); err != nil {
			t.Fatal(err)
		}
		ca, err := egress.LoadOrCreateCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		again, err := egress.LoadOrCreateCA(dir)
		if err != nil || !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
			t.Errorf("reloading the new pair: %v", err)
		}
	})
}
