package egress

import (
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The files of an office's CA, in the directory given to LoadOrCreateCA.
const (
	CACertFile = "egress-ca.pem"
	CAKeyFile  = "egress-ca-key.pem"
	caLockFile = "egress-ca.lock"
)

const (
	caValidity = 10 * 365 * 24 * time.Hour
	// A leaf lives a day, and is back-dated an hour for guests whose
	// clock runs behind the host's.
	leafValidity = 24 * time.Hour
	leafBackdate = time.Hour
	// A cached leaf is made again this long before it expires, so none
	// is handed out that a slow client would see expire mid-connection.
	leafRefresh = time.Hour
	// maxLeaves bounds the leaf cache: a guest that connects to ever new
	// names must not grow the proxy's memory without end.
	maxLeaves = 512
)

// CA is an office's certificate authority for intercepted TLS: the guest
// trusts its certificate, and the proxy signs with its key a certificate
// for each host the guest connects to. The key never leaves the host. A
// CA is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte

	// mu guards the following: the leaf cache, oldest first.
	mu     sync.Mutex
	leaves map[string]*list.Element // of *leafEntry, by normalised host
	order  *list.List
}

type leafEntry struct {
	host string
	cert *tls.Certificate
}

// LoadOrCreateCA loads the CA kept in dir as CACertFile (0644) and
// CAKeyFile (0600), or creates it there: an ECDSA P-256 self-signed CA
// named "hutch egress CA" with a random serial, valid for ten years,
// that may sign leaf certificates only. Each file is written atomically
// (temporary file, fsync, rename), under a lock file, so processes
// creating the CA at once end with one pair that all of them use. A key
// that does not match the certificate, or a certificate without its key,
// is an errdefs.ErrFailedPrecondition error naming the files: replacing
// a CA the guests may trust is left to a person.
func LoadOrCreateCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	// The common case needs no lock: a certificate is written only after
	// its key, so a certificate on disk has its final key beside it.
	if ca, err := loadCA(certPath, keyPath); err == nil {
		return ca, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, caLockFile))
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	defer unlock()
	// Under the lock nobody is creating: what is on disk now is final.
	switch _, err := os.Stat(certPath); {
	case err == nil:
		return loadCA(certPath, keyPath)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	// A key without a certificate is what a creation that died between
	// its two writes leaves; no guest can trust it yet, so it is replaced.
	return createCA(certPath, keyPath)
}

// lockFile takes an exclusive flock on path, which the kernel releases
// if the process dies. Locks are per open file, so two goroutines of one
// process exclude each other as two processes do.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

func createCA(certPath, keyPath string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	serial := randomSerial()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// The serial in the subject tells two offices' CAs apart in a
		// trust store that files certificates by subject.
		Subject:               pkix.Name{CommonName: "hutch egress CA", SerialNumber: serial.Text(16)},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	// The key first: a certificate on disk always has its key (see
	// LoadOrCreateCA's lock-free read).
	if err := atomicfile.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := atomicfile.WriteFile(certPath, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return newCA(cert, key, certPEM), nil
}

func loadCA(certPath, keyPath string) (*CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("egress CA: %s holds no PEM certificate", certPath))
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %s: %w", certPath, err)
	}
	if !cert.IsCA {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("egress CA: %s is not a CA certificate", certPath))
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errdefs.New(errdefs.ErrFailedPrecondition,
				fmt.Sprintf("egress CA: %s has no key: %s does not exist", certPath, keyPath))
		}
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("egress CA: %s: %v", keyPath, err))
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition,
			fmt.Sprintf("egress CA: the key in %s does not match the certificate in %s", keyPath, certPath))
	}
	return newCA(cert, key, certPEM), nil
}

// parseKey reads a PKCS #8 or SEC 1 (EC) private key. Its errors never
// quote the file's bytes.
func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("holds no PEM private key")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("holds a %q block, not a private key", block.Type)
	}
	if err != nil {
		return nil, errors.New("the private key does not parse")
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	return signer, nil
}

func newCA(cert *x509.Certificate, key crypto.Signer, certPEM []byte) *CA {
	return &CA{cert: cert, key: key, certPEM: certPEM, leaves: map[string]*list.Element{}, order: list.New()}
}

// CertPEM is the CA's certificate in PEM form, for the guest's trust store.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// randomSerial is a positive 128-bit serial number.
func randomSerial() *big.Int {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	b[0] &= 0x7f
	b[0] |= 0x40 // never a short serial
	return new(big.Int).SetBytes(b)
}

// normHost is host as a certificate names it: lower case, without a
// trailing dot or the brackets of an IPv6 address.
func normHost(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// leaf returns a certificate for host (a DNS name or an IP address),
// signed by the CA, from the cache when one there is not about to expire.
func (ca *CA) leaf(host string) (*tls.Certificate, error) {
	host = normHost(host)
	now := time.Now()
	ca.mu.Lock()
	if el, ok := ca.leaves[host]; ok {
		c := el.Value.(*leafEntry).cert
		if now.Before(c.Leaf.NotAfter.Add(-leafRefresh)) {
			ca.mu.Unlock()
			return c, nil
		}
	}
	ca.mu.Unlock()

	// Signing runs outside the lock; two callers may sign for one host
	// at once, and the later one's certificate stays cached.
	c, err := ca.sign(host, now)
	if err != nil {
		return nil, err
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if el, ok := ca.leaves[host]; ok {
		ca.order.Remove(el)
	}
	ca.leaves[host] = ca.order.PushBack(&leafEntry{host: host, cert: c})
	for ca.order.Len() > maxLeaves {
		oldest := ca.order.Front()
		ca.order.Remove(oldest)
		delete(ca.leaves, oldest.Value.(*leafEntry).host)
	}
	return c, nil
}

func (ca *CA) sign(host string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-leafBackdate),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: certificate for %s: %w", host, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress CA: certificate for %s: %w", host, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, nil
}
