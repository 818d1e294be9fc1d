// Package egress is the only way out of a microVM that is allowed network:
// an HTTP/HTTPS forward proxy that lets through requests to the hosts of
// sandbox.network.allow and nothing else, and logs every decision.
//
// # Why a proxy and not NAT
//
// A guest with network gets a user-mode NIC (restrict=on) whose one
// reachable address, 10.0.2.100:3128, QEMU forwards to a unix socket on the
// host; commands inside get HTTP_PROXY/HTTPS_PROXY pointing there. NAT would
// hand the guest raw IP: the host would then have to filter by address,
// and addresses say little about who is behind them (CDNs, shared hosting)
// while DNS answers can be forged by whoever controls a zone. A proxy sees
// the name the client asked for, so the allowlist is written and enforced in
// names, the guest needs no DNS at all, and a request the list refuses
// never leaves the host: not even as a DNS query.
//
// # What is checked where
//
//   - The request: a CONNECT authority (host:port, for HTTPS and any other
//     TLS or TCP protocol) or an absolute http:// URL. Anything else, such
//     as an origin-form request aimed at the proxy itself, gets 400.
//   - The name: Allowlist.Allows decides on the host and port exactly as the
//     client wrote them, before anything is resolved. A refusal is a 403
//     whose body names the host:port and sandbox.network.allow.
//   - The address: only an allowed name is resolved, on the host, by the
//     dialer. Its Control hook sees each address right before connect(2)
//     and refuses loopback, link-local, private, shared (CGNAT) and other
//     non-public addresses unless that address and port are themselves
//     listed. Without this guard any name on the list, or any name under a
//     wildcard, could be made to resolve to 127.0.0.1 or 169.254.169.254
//     (by its owner, or by a rebinding attack between lookups) and reach the
//     host's own services or a cloud metadata endpoint. Checking in Control
//     rather than resolving ahead leaves no gap between the address checked
//     and the address connected to.
//
// Each decision is logged once at info, as "egress allowed" or "egress
// denied", with the office, method, host and port. Paths, query strings and
// header values are never logged: they carry tokens (bot APIs put them in
// the path).
//
// # Bounds
//
// Open tunnels plus plain HTTP requests in flight are capped (MaxTunnels);
// a tunnel with no traffic either way for TunnelIdleTimeout is closed; the
// guest must send its request headers within HeaderTimeout. When the
// context given to Serve ends, the listener, every connection and every
// tunnel are closed before Serve returns.
//
// Plain HTTP is forwarded with net/http's Transport, without hop-by-hop or
// Proxy-* headers and without protocol upgrades (WebSocket clients behind a
// proxy use CONNECT). The Transport never consults the host's own proxy
// environment.
//
// # Placeholder secrets
//
// A vault variable marked as a placeholder reaches commands as a token
// (hutch-placeholder- and 32 hex digits); the real value is only in the
// proxy (Proxy.Secrets, read per request, so a rotation applies to the
// next one). The attacker is the command itself, which writes every byte
// of its requests; the rule is that a value goes only to the hosts its
// Secret.Hosts names, only over TLS the proxy verified against that
// name, and only in requests: responses are never rewritten.
//
// With secrets and a CA (Proxy.CA, one per office, which the guest
// trusts), a CONNECT the policy allows is answered 200 and its first byte
// awaited: up to HeaderTimeout on 443 or a port a secret names, a second
// elsewhere. A TLS ClientHello offering HTTP/1.1 (or no ALPN) is
// terminated with a certificate for the CONNECT host, signed by the CA;
// every HTTP/1.1 request inside is scanned and forwarded to
// https://host:port over a TLS connection verified against
// UpstreamRoots for that host (a failed verification is a 502 and nothing
// is sent). The CONNECT host decides, never the request's Host header or
// URL: another name behind the same front must not receive a value. No
// first byte in time (SSH, SMTP: the server speaks first), another first
// byte, or a ClientHello for another protocol (h2 only) is spliced as
// without secrets, and carries the placeholder unchanged.
//
// In each request the proxy looks for every secret's placeholder in the
// header values (Basic credentials decoded), the Host header, the path and
// the query (each as written and percent-decoded), and a body of up to
// 1 MiB, read into memory (at most one per tunnel or plain request, so
// MaxTunnels bounds that memory too). A placeholder toward a host its secret does not
// name, of an expired secret, or in plain http:// at all, refuses the
// whole request: 403 naming the secret and the host, a warning "egress
// placeholder refused" (exfiltration=true when the host is not the
// secret's) and an Event for Proxy.Record (a Journal keeps them in a file,
// two generations of 256 KiB). Otherwise the values go in place of the
// placeholders in the header values, Basic credentials, path and query
// (percent-encoded there) and, for secrets with Body set, the body, whose
// length is fixed; each secret used gives one Event and one info line. A
// body over 1 MiB is forwarded unchanged, scanned as it streams: a refused
// placeholder in it aborts the request, after its first part has gone out.
//
// What this does not protect or see:
//
//   - A host that is allowed to have the value can give it back: an API
//     that echoes requests, stores what it is sent (a gist, an issue
//     comment) or reflects it in an error hands the value to the command.
//     Nor does anything stop the command from using the secret against
//     that host as it likes: the secret's host list is the whole grant.
//   - Placeholders the scan cannot see are neither refused nor
//     substituted: in a compressed, base64 or otherwise encoded body,
//     JSON-escaped, in request trailers, in the frames of an upgraded
//     (WebSocket) connection, or in a tunnel that is not intercepted.
//     Refusing is a signal; what keeps a value from a host is that it is
//     substituted only toward the secret's own.
//   - A guest that does not trust the office's CA or pins certificates,
//     or speaks another protocol over TLS without naming it in ALPN
//     (IMAPS), cannot use an intercepted tunnel while the sandbox has
//     secrets. An HTTP/2-only client is spliced, and gets no value.
//   - Without a CA no TLS is intercepted, so no value is ever
//     substituted; plain HTTP is still refused.
package egress
