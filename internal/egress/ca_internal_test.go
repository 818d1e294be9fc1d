package egress

import (
	"crypto/x509"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestCA_Leaf(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	for _, host := range []string{"api.test", "Api.Test.", "192.0.2.7", "[2001:db8::1]"} {
		c, err := ca.leaf(host)
		if err != nil {
			t.Fatalf("leaf(%q): %v", host, err)
		}
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: normHost(host), Roots: roots}); err != nil {
			t.Errorf("leaf(%q) does not verify for %q: %v", host, normHost(host), err)
		}
		if c.Leaf.IsCA {
			t.Errorf("leaf(%q) is a CA", host)
		}
		if back := time.Until(c.Leaf.NotBefore); back > -50*time.Minute || back < -70*time.Minute {
			t.Errorf("leaf(%q) NotBefore is %v from now, want about an hour back", host, back)
		}
		if life := c.Leaf.NotAfter.Sub(c.Leaf.NotBefore); life != 25*time.Hour {
			t.Errorf("leaf(%q) spans %v, want 24 h from now plus the hour back", host, life)
		}
	}
	a, _ := ca.leaf("api.test")
	b, _ := ca.leaf("API.test.")
	if a != b {
		t.Error("one host in two spellings got two leaves, want one cached")
	}
}

func TestCA_LeafCacheBound(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const hosts = maxLeaves + 88
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < hosts; i += 4 {
				if _, err := ca.leaf(fmt.Sprintf("h%d.test", i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	ca.mu.Lock()
	n, listed := len(ca.leaves), ca.order.Len()
	ca.mu.Unlock()
	if n != maxLeaves || listed != maxLeaves {
		t.Fatalf("cache holds %d leaves (%d in order) after %d hosts, want %d", n, listed, hosts, maxLeaves)
	}

	// In order now: the oldest is the first to go.
	ca2, _ := LoadOrCreateCA(t.TempDir())
	for i := range maxLeaves + 1 {
		if _, err := ca2.leaf(fmt.Sprintf("h%d.test", i)); err != nil {
			t.Fatal(err)
		}
	}
	ca2.mu.Lock()
	_, first := ca2.leaves["h0.test"]
	_, second := ca2.leaves["h1.test"]
	_, last := ca2.leaves[fmt.Sprintf("h%d.test", maxLeaves)]
	ca2.mu.Unlock()
	if first || !second || !last {
		t.Errorf("after %d hosts: oldest cached %v (want false), second %v, newest %v (want true)", maxLeaves+1, first, second, last)
	}
}
