package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// hardeningVersion changes whenever the container's creation settings
// change in a way existing containers should pick up (2: the agent
// proves it holds its channel key, mounted at keyPath).
const hardeningVersion = 2

// desired is what a conversation's container must be built from.
type desired struct {
	ImageRef  string          `json:"imageRef"`
	ImageID   string          `json:"imageId"`
	Mounts    []sandbox.Mount `json:"mounts"`
	Vault     []vaultDigest   `json:"vault"`
	Network   string          `json:"network"`
	Agent     string          `json:"agent"`
	Hardening int             `json:"hardening"`
	// Limits are set only where the engine cannot change a running
	// container's limits (Podman before 5.1): a change then re-creates
	// the container. Left out, they do not change Docker's fingerprints.
	Limits *sandbox.Limits `json:"limits,omitempty"`
}

type vaultDigest struct {
	RuntimePath string `json:"runtimePath"`
	Digest      string `json:"digest"`
}

// fingerprint hashes d. Mounts are sorted first so order never matters.
func (d desired) fingerprint() string {
	c := d
	c.Mounts = slices.Clone(d.Mounts)
	slices.SortFunc(c.Mounts, func(a, b sandbox.Mount) int {
		if a.RuntimePath < b.RuntimePath {
			return -1
		}
		if a.RuntimePath > b.RuntimePath {
			return 1
		}
		return 0
	})
	data, _ := json.Marshal(c)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}
