package netpolicy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Allowlist is a parsed sandbox.network.allow: the hosts (and optionally
// ports) a sandbox may reach through the proxy. The zero value allows nothing.
type Allowlist struct {
	entries []entry
}

// entry is one parsed line. Exactly one of name and ip is set.
type entry struct {
	// name is lower-case without a trailing dot; for a wildcard it is the
	// part after "*.".
	name     string
	wildcard bool
	ip       netip.Addr
	// port is 0 when the entry named none, meaning 80 and 443.
	port int
}

// ParseAllowlist parses entries such as "github.com", "*.npmjs.org" (any
// subdomain, not the apex), "registry.npmjs.org:443" (only that port; an
// entry without a port allows 80 and 443), "10.0.0.5" or "[::1]:8080" (an IP
// address is reachable only when listed exactly). Names compare
// case-insensitively and a trailing dot is ignored. Internationalised names
// must be written in their punycode (xn--) form, which is compared as is.
// A malformed entry is an errdefs.ErrInvalid error naming it.
func ParseAllowlist(entries []string) (Allowlist, error) {
	a := Allowlist{entries: make([]entry, 0, len(entries))}
	for _, s := range entries {
		e, err := parseEntry(s)
		if err != nil {
			return Allowlist{}, err
		}
		a.entries = append(a.entries, e)
	}
	return a, nil
}

func invalid(s, format string, args ...any) error {
	return errdefs.New(errdefs.ErrInvalid,
		fmt.Sprintf("sandbox.network.allow entry %q: ", s)+fmt.Sprintf(format, args...))
}

func parseEntry(s string) (entry, error) {
	if s == "" {
		return entry{}, errdefs.New(errdefs.ErrInvalid, "sandbox.network.allow has an empty entry")
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return entry{}, invalid(s, "contains whitespace or a control character")
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		host, _, _ := strings.Cut(rest, "/")
		return entry{}, invalid(s, "has a scheme (%s://); write the host only, e.g. %q", scheme, host)
	}
	if strings.Contains(s, "/") {
		return entry{}, invalid(s, "has a path; entries are hosts, not URLs")
	}
	if strings.ContainsAny(s, "@?#") {
		return entry{}, invalid(s, "is not a host name, IP address or host:port")
	}
	if s == "*" || s == "*." {
		return entry{}, invalid(s, "would allow every host; list the hosts instead")
	}

	host, portText, err := splitEntry(s)
	if err != nil {
		return entry{}, invalid(s, "%s", err)
	}
	var e entry
	if portText != "" {
		p, err := strconv.Atoi(portText)
		if err != nil || p < 1 || p > 65535 || strings.Trim(portText, "0123456789") != "" {
			return entry{}, invalid(s, "port %q is not a number from 1 to 65535", portText)
		}
		e.port = p
	}

	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		if ip.Zone() != "" {
			return entry{}, invalid(s, "IPv6 zones are not allowed")
		}
		e.ip = ip.Unmap()
		return e, nil
	}
	if strings.HasPrefix(host, "[") {
		return entry{}, invalid(s, "%s is not an IPv6 address", host)
	}

	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		e.wildcard = true
		name = rest
	}
	if strings.Contains(name, "*") {
		return entry{}, invalid(s, `a wildcard is allowed only as a leading "*." (as in *.example.com)`)
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return entry{}, invalid(s, "a wildcard cannot cover an IP address")
	}
	if why := checkName(name); why != "" {
		return entry{}, invalid(s, "%s", why)
	}
	e.name = name
	return e, nil
}

// splitEntry separates an entry's host from its port. A bare IPv6 address
// (more than one colon, no brackets) has no port.
func splitEntry(s string) (host, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", "", fmt.Errorf("has an unclosed '['")
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			return host, "", nil
		}
		port, ok := strings.CutPrefix(rest, ":")
		if !ok || port == "" {
			return "", "", fmt.Errorf("expected :port after %s", host)
		}
		return host, port, nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", nil
	case 1:
		host, port, _ := strings.Cut(s, ":")
		if host == "" || port == "" {
			return "", "", fmt.Errorf("expected host:port")
		}
		return host, port, nil
	default:
		if _, err := netip.ParseAddr(s); err != nil {
			return "", "", fmt.Errorf("is not an IPv6 address (write [address]:port to give a port)")
		}
		return s, "", nil
	}
}

// checkName says what is wrong with a lower-cased DNS name, or "". Besides
// plain syntax it refuses a numeric last label: resolvers read "127.1" or
// "2130706433" as IP addresses, which would slip past the rule that
// addresses are listed exactly.
func checkName(name string) string {
	if name == "" {
		return "has no host name"
	}
	if len(name) > 253 {
		return "host name is longer than 253 characters"
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return "host name has an empty label"
		}
		if len(l) > 63 {
			return "host name has a label longer than 63 characters"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c >= 0x80:
				return "write internationalised names in their punycode (xn--) form"
			default:
				return fmt.Sprintf("host name has the character %q", c)
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "host name ends in a numeric label; write IP addresses in dotted (or IPv6) form"
	}
	return ""
}

// Allows reports whether a client may reach host on port. host is a name
// or IP address as the client wrote it (brackets around an IPv6 address
// allowed); nothing is resolved. A name matches an entry of the same name,
// or a wildcard entry it is a strict subdomain of; an IP address matches
// only an entry of the same address.
func (a Allowlist) Allows(host string, port int) bool {
	if port < 1 || port > 65535 {
		return false
	}
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		if ip.Zone() != "" {
			return false
		}
		return a.AllowsAddr(netip.AddrPortFrom(ip.Unmap(), uint16(port)))
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if checkName(name) != "" {
		return false
	}
	for _, e := range a.entries {
		if e.name == "" || !e.portAllows(port) {
			continue
		}
		if e.wildcard {
			if strings.HasSuffix(name, "."+e.name) {
				return true
			}
		} else if name == e.name {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether an address is listed for its port.
func (a Allowlist) AllowsAddr(ap netip.AddrPort) bool {
	for _, e := range a.entries {
		if e.ip.IsValid() && e.ip == ap.Addr() && e.portAllows(int(ap.Port())) {
			return true
		}
	}
	return false
}

func (e entry) portAllows(port int) bool {
	if e.port == 0 {
		return port == 80 || port == 443
	}
	return port == e.port
}

func (e entry) String() string {
	switch {
	case e.ip.IsValid() && e.port != 0:
		return netip.AddrPortFrom(e.ip, uint16(e.port)).String()
	case e.ip.IsValid():
		return e.ip.String()
	}
	host := e.name
	if e.wildcard {
		host = "*." + host
	}
	if e.port != 0 {
		host += ":" + strconv.Itoa(e.port)
	}
	return host
}

// String lists the entries in canonical form, comma-separated, for logs;
// "(none)" when the list is empty.
func (a Allowlist) String() string {
	if len(a.entries) == 0 {
		return "(none)"
	}
	s := make([]string, len(a.entries))
	for i, e := range a.entries {
		s[i] = e.String()
	}
	return strings.Join(s, ",")
}
