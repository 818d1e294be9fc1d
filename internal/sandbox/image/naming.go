package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path/filepath"
)

// ContainerName is the managed container of an office.
func ContainerName(officeKey string) string { return "hutch-" + officeKey }

// NetworkName is the bridge network of an office's container.
func NetworkName(officeKey string) string { return "hutch-net-" + officeKey }

// SnapshotRef is the image that carries a container's writable layer
// across a re-create.
func SnapshotRef(officeKey string) string { return "hutch-snapshot:" + officeKey }

// Paths inside a managed container.
const (
	// agentPath is where the agent binary is bind-mounted read-only.
	agentPath = "/hutch/bin/hutch"
	// runPath is the per-runtime directory holding the agent's socket.
	runPath = "/hutch/run"
	// socketName is the agent's socket inside runPath.
	socketName = "agent.sock"
	// keyPath is where the agent's channel key is bind-mounted read-only.
	keyPath = "/hutch/key"
)

// socketDir is the host directory bind-mounted at runPath. It is named by
// a digest of the office key so that the socket path stays far below the
// 108-byte limit of unix socket addresses.
func socketDir(runDir, officeKey string) string {
	sum := sha256.Sum256([]byte(officeKey))
	return filepath.Join(runDir, "rt", hex.EncodeToString(sum[:8]))
}

// keyFile is the host file mounted at keyPath: beside the socket dir,
// not in it, so nothing inside can replace it.
func keyFile(runDir, officeKey string) string {
	return socketDir(runDir, officeKey) + ".key"
}

// verifiedFile records which run of the office's container a hutch
// process checked ("<container id>@<start time>": agent answering, no
// stale snapshot), so that the next process, a CLI call, takes the warm
// path too instead of checking again under the lock (three engine round
// trips). Beside the socket dir, like keyFile: nothing inside a runtime
// can write it.
func verifiedFile(runDir, officeKey string) string {
	return socketDir(runDir, officeKey) + ".verified"
}

// DefaultNetworkPool is where office networks take their subnets. Docker's
// own default pools hold about 30 networks; one per conversation needs
// thousands, so hutch hands out /29 subnets (gateway + container) from a
// /16 of its own: 8192 offices.
var DefaultNetworkPool = netip.MustParsePrefix("10.213.0.0/16")

const subnetBits = 29

// subnet returns the i-th /29 of pool (wrapping around).
func subnet(pool netip.Prefix, i uint32) (netip.Prefix, error) {
	if !pool.Addr().Is4() || pool.Bits() > subnetBits {
		return netip.Prefix{}, fmt.Errorf("network pool %s must be an IPv4 prefix of /%d or wider", pool, subnetBits)
	}
	n := uint32(1) << (subnetBits - pool.Bits())
	i %= n
	base := pool.Masked().Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += i << (32 - subnetBits)
	addr := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	return netip.PrefixFrom(addr, subnetBits), nil
}

// subnetIndex is where an office starts looking for a free subnet: a
// hash, so offices rarely collide and a retry walks forward.
func subnetIndex(officeKey string) uint32 {
	sum := sha256.Sum256([]byte("net\x00" + officeKey))
	return uint32(sum[0])<<24 | uint32(sum[1])<<16 | uint32(sum[2])<<8 | uint32(sum[3])
}
