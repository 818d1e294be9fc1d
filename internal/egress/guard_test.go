package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

func TestInternal(t *testing.T) {
	testCases := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.8.9.10", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"0.0.0.0", true},
		{"::", true},
		{"10.0.2.2", true},
		{"172.16.0.1", true},
		{"192.168.1.1", true},
		{"169.254.169.254", true},
		{"fe80::1", true},
		{"fd00:ec2::254", true},
		{"100.100.100.100", true},
		{"224.0.0.1", true},
		{"255.255.255.255", true},
		{"64:ff9b::7f00:1", true},
		{"64:ff9b::a00:1", true},
		{"1.1.1.1", false},
		{"140.82.112.3", false},
		{"2606:4700:4700::1111", false},
		{"64:ff9b::808:808", false},
		{"::ffff:8.8.8.8", false},
	}
	for _, tc := range testCases {
		if got := internal(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("internal(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestGuardedDialer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	addr := l.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	unlisted, err := netpolicy.ParseAllowlist([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = guardedDialer(allowlist(unlisted), time.Second).DialContext(ctx, "tcp", addr)
	var refused *refusedAddr
	if !errors.As(err, &refused) {
		t.Fatalf("dial %s with the address unlisted: error %v, want a refusedAddr", addr, err)
	}
	if got := refused.addr.String(); got != addr {
		t.Errorf("refused address %s, want %s", got, addr)
	}

	listed, err := netpolicy.ParseAllowlist([]string{addr})
	if err != nil {
		t.Fatal(err)
	}
	c, err := guardedDialer(allowlist(listed), time.Second).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s with the address listed: %v", addr, err)
	}
	_ = c.Close()
}

func allowlist(a netpolicy.Allowlist) func() netpolicy.Policy {
	return func() netpolicy.Policy { return netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: a} }
}
