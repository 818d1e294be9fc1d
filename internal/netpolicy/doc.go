// Package netpolicy is the egress policy of a sandbox, as data: which mode
// a conversation's network is in (open, allowlist or none) and which hosts
// its allowlist names. It decides on names and addresses only; the proxy
// that enforces it (package egress) and the runtimes that route a
// sandbox's traffic to that proxy do the I/O.
package netpolicy
