package netpolicy_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

func TestParseAllowlist_Invalid(t *testing.T) {
	testCases := []struct {
		name  string
		entry string
		want  string // part of the error text
	}{
		{"empty", "", "empty entry"},
		{"scheme", "https://github.com", `write the host only, e.g. "github.com"`},
		{"scheme_with_path", "http://x.org/y", "has a scheme"},
		{"path", "github.com/org", "has a path"},
		{"space_inside", "git hub.com", "whitespace"},
		{"leading_space", " github.com", "whitespace"},
		{"trailing_newline", "github.com\n", "whitespace"},
		{"tab", "github.com\t", "whitespace"},
		{"bare_star", "*", "would allow every host"},
		{"star_dot", "*.", "would allow every host"},
		{"star_port", "*:443", "wildcard is allowed only as a leading"},
		{"inner_wildcard", "api.*.com", "wildcard is allowed only as a leading"},
		{"trailing_wildcard", "github.*", "wildcard is allowed only as a leading"},
		{"glued_wildcard", "*github.com", "wildcard is allowed only as a leading"},
		{"double_wildcard", "*.*.github.com", "wildcard is allowed only as a leading"},
		{"port_zero", "github.com:0", "port"},
		{"port_too_big", "github.com:65536", "port"},
		{"port_negative", "github.com:-1", "port"},
		{"port_plus", "github.com:+443", "port"},
		{"port_letters", "github.com:https", "port"},
		{"port_empty", "github.com:", "expected host:port"},
		{"no_host", ":443", "expected host:port"},
		{"userinfo", "user@github.com", "not a host name"},
		{"query", "github.com?x=1", "not a host name"},
		{"empty_label", "github..com", "empty label"},
		{"leading_dot", ".github.com", "empty label"},
		{"underscore_ok_but_bang", "git!hub.com", "character"},
		{"unicode", "bücher.de", "punycode"},
		{"numeric_tld", "127.1", "numeric label"},
		{"decimal_ip", "2130706433", "numeric label"},
		{"hex_ip", "0x7f.0.0.1", "numeric label"},
		{"wildcard_ip", "*.10.0.0.5", "cannot cover an IP address"},
		{"ipv6_unclosed", "[::1", "unclosed"},
		{"ipv6_not_ip", "[github.com]", "not an IPv6 address"},
		{"ipv6_junk_after", "[::1]443", "expected :port"},
		{"ipv6_bare_port", "::1:443:x", "not an IPv6 address"},
		{"ipv6_zone", "[fe80::1%eth0]", "zones"},
		{"long_label", strings.Repeat("a", 64) + ".com", "63"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := netpolicy.ParseAllowlist([]string{"github.com", tc.entry})
			if err == nil {
				t.Fatalf("ParseAllowlist(%q) = nil error, want one", tc.entry)
			}
			if !errdefs.IsInvalid(err) {
				t.Errorf("ParseAllowlist(%q) error %v is not ErrInvalid", tc.entry, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseAllowlist(%q) error %q, want it to contain %q", tc.entry, err, tc.want)
			}
		})
	}
}

func TestAllowlist_Allows(t *testing.T) {
	a, err := netpolicy.ParseAllowlist([]string{
		"github.com",
		"*.npmjs.org",
		"registry.yarnpkg.com:443",
		"Example.ORG.",
		"10.0.0.5",
		"[::1]:8080",
		"2001:db8::7",
		"xn--bcher-kva.de",
		"*.Corp.Example:8443",
	})
	if err != nil {
		t.Fatal(err)
	}
	testCases := []struct {
		name string
		host string
		port int
		want bool
	}{
		{"exact_443", "github.com", 443, true},
		{"exact_80", "github.com", 80, true},
		{"exact_other_port", "github.com", 22, false},
		{"upper_case_request", "GitHub.COM", 443, true},
		{"trailing_dot_request", "github.com.", 443, true},
		{"two_trailing_dots", "github.com..", 443, false},
		{"suffix_lookalike", "evilgithub.com", 443, false},
		{"subdomain_of_exact", "api.github.com", 443, false},
		{"exact_as_prefix", "github.com.evil.net", 443, false},
		{"wildcard_subdomain", "registry.npmjs.org", 443, true},
		{"wildcard_deep", "a.b.npmjs.org", 80, true},
		{"wildcard_not_apex", "npmjs.org", 443, false},
		{"wildcard_lookalike", "evilnpmjs.org", 443, false},
		{"wildcard_as_prefix", "registry.npmjs.org.evil.net", 443, false},
		{"wildcard_upper", "REGISTRY.NPMJS.ORG", 443, true},
		{"wildcard_empty_label", ".npmjs.org", 443, false},
		{"port_entry", "registry.yarnpkg.com", 443, true},
		{"port_entry_other_port", "registry.yarnpkg.com", 80, false},
		{"entry_written_upper_with_dot", "example.org", 443, true},
		{"wildcard_with_port", "git.corp.example", 8443, true},
		{"wildcard_with_port_443", "git.corp.example", 443, false},
		{"ip_listed", "10.0.0.5", 443, true},
		{"ip_listed_mapped", "::ffff:10.0.0.5", 80, true},
		{"ip_not_listed", "10.0.0.6", 443, false},
		{"ip_odd_form", "010.0.0.5", 443, false},
		{"ip_decimal_form", "167772165", 443, false},
		{"ipv6_bracketed", "[::1]", 8080, true},
		{"ipv6_bare", "::1", 8080, true},
		{"ipv6_wrong_port", "[::1]", 443, false},
		{"ipv6_no_port_entry", "[2001:db8::7]", 443, true},
		{"ipv6_zone", "[fe80::1%eth0]", 443, false},
		{"punycode_as_is", "xn--bcher-kva.de", 443, true},
		{"unicode_not_decoded", "bücher.de", 443, false},
		{"name_of_listed_ip_is_not_ip", "localhost", 443, false},
		{"empty_host", "", 443, false},
		{"port_zero", "github.com", 0, false},
		{"port_too_big", "github.com", 70000, false},
		{"nul_in_name", "a\x00.npmjs.org", 443, false},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := a.Allows(tc.host, tc.port); got != tc.want {
				t.Errorf("Allows(%q, %d) = %v, want %v", tc.host, tc.port, got, tc.want)
			}
		})
	}
}

func TestAllowlist_Empty(t *testing.T) {
	var zero netpolicy.Allowlist
	if zero.Allows("github.com", 443) {
		t.Error("zero Allowlist allows github.com:443")
	}
	a, err := netpolicy.ParseAllowlist(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.String(); got != "(none)" {
		t.Errorf("String() of an empty list = %q, want %q", got, "(none)")
	}
}

func TestAllowlist_String(t *testing.T) {
	a, err := netpolicy.ParseAllowlist([]string{
		"GitHub.com.", "*.NPMJS.org", "registry.npmjs.org:443", "10.0.0.5", "[::1]:8080", "::1", "::ffff:192.0.2.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "github.com,*.npmjs.org,registry.npmjs.org:443,10.0.0.5,[::1]:8080,::1,192.0.2.1"
	if got := a.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func FuzzParseAllowlist(f *testing.F) {
	for _, s := range []string{"github.com", "*.npmjs.org", "a.b:443", "[::1]:80", "10.0.0.5", "https://x", "*"} {
		f.Add(s, "github.com", 443)
	}
	f.Fuzz(func(t *testing.T, entry, host string, port int) {
		a, err := netpolicy.ParseAllowlist([]string{entry})
		if err != nil {
			if !errdefs.IsInvalid(err) {
				t.Fatalf("ParseAllowlist(%q) error %v is not ErrInvalid", entry, err)
			}
			return
		}
		// The canonical form parses to the same list.
		b, err := netpolicy.ParseAllowlist([]string{a.String()})
		if err != nil || b.String() != a.String() {
			t.Fatalf("re-parsing %q (from %q): %q, %v", a.String(), entry, b.String(), err)
		}
		if a.Allows(host, port) != b.Allows(host, port) {
			t.Fatalf("%q and its canonical form %q disagree on %q:%d", entry, a.String(), host, port)
		}
	})
}
