package box

import (
	"bufio"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/internal/project"
)

// HostListeners lists the TCP sockets listening in this host's network
// namespace, from /proc/net/tcp and tcp6 (Linux). On other systems it
// returns none.
func HostListeners() ([]project.Listener, error) {
	var out []project.Listener
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ls, err := parseProcNetTCP(f)
		_ = f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

// parseProcNetTCP reads the LISTEN sockets of a /proc/net/tcp{,6} table:
// local_address is hex address:port, the address in 32-bit words of host
// (little-endian) byte order; state 0A is LISTEN.
func parseProcNetTCP(r io.Reader) ([]project.Listener, error) {
	var out []project.Listener
	sc := bufio.NewScanner(r)
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		addrHex, portHex, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		port, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil {
			continue
		}
		raw, err := hex.DecodeString(addrHex)
		if err != nil || (len(raw) != 4 && len(raw) != 16) {
			continue
		}
		for i := 0; i+4 <= len(raw); i += 4 {
			raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
		}
		addr, ok := netip.AddrFromSlice(raw)
		if !ok {
			continue
		}
		out = append(out, project.Listener{Addr: addr, Port: int(port)})
	}
	return out, sc.Err()
}
