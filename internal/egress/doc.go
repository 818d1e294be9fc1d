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
package egress
