package image

import "net/netip"

// FirstSubnet is the subnet of pool an office's network is tried on first.
func FirstSubnet(pool netip.Prefix, officeKey string) netip.Prefix {
	p, err := subnet(pool, subnetIndex(officeKey))
	if err != nil {
		panic(err)
	}
	return p
}
