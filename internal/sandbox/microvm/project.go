package microvm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// designVersion changes whenever how a VM is booted changes in a way
// running VMs should pick up.
const designVersion = 1

// desired is what an office's VM must be booted from; its hash is the
// fingerprint.
type desired struct {
	Assets  map[string]string `json:"assets"` // asset name -> sha256
	Agent   string            `json:"agent"`
	Mounts  []sandbox.Mount   `json:"mounts"`
	Vault   []vaultDigest     `json:"vault"`
	Limits  sandbox.Limits    `json:"limits"`
	Accel   string            `json:"accel"`
	Network string            `json:"network"` // see Runtime.network; "" no card
	TZ      string            `json:"tz"`
	Version int               `json:"version"`

	// ca is the egress CA the guest trusts (nil: none); its digest is
	// in Network.
	ca *egress.CA
}

type vaultDigest struct {
	RuntimePath string `json:"runtimePath"`
	Digest      string `json:"digest"`
}

func (r *Runtime) desired(s *session, spec sandbox.Spec, m assets.Manifest) (desired, error) {
	d := desired{
		Assets:  map[string]string{},
		Agent:   r.cfg.Agent.SHA256,
		Mounts:  slices.Clone(spec.Mounts),
		Limits:  r.effective(s, spec),
		Accel:   string(r.cfg.Accel),
		TZ:      r.cfg.TimeZone,
		Version: designVersion,
	}
	for _, a := range m.Assets {
		d.Assets[a.Name] = a.SHA256
	}
	var err error
	if d.Network, d.ca, err = r.network(spec); err != nil {
		return desired{}, err
	}
	slices.SortFunc(d.Mounts, func(a, b sandbox.Mount) int { return strings.Compare(a.RuntimePath, b.RuntimePath) })
	for _, v := range spec.VaultFiles {
		dg, err := managed.DigestTree(v.HostPath)
		if err != nil {
			return desired{}, err
		}
		d.Vault = append(d.Vault, vaultDigest{RuntimePath: v.RuntimePath, Digest: dg})
	}
	return d, nil
}

func (d desired) fingerprint() string {
	data, _ := json.Marshal(d)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// share is a directory exported by virtiofs.
type share struct {
	Tag         string
	HostPath    string
	RuntimePath string
	ReadOnly    bool
}

// copied is a single file copied into the guest at boot.
type copied struct {
	HostPath    string
	RuntimePath string
	Mode        os.FileMode
	ReadOnly    bool
	// Sync: the guest may write it and it lies under /workspace, so it
	// is synced with the host both ways.
	Sync bool
}

// plan is how a spec's projection reaches a guest.
type plan struct {
	Shares []share
	Files  []copied
}

// maxCopiedFile bounds a single projected file: they are sent in the
// setup request and re-read on every sync.
const maxCopiedFile = 16 << 20

// projectSpec turns the door policy's mounts and the vault's files into
// shares and copies. Directories are shared; single files are copied
// (virtiofs exports directories only); vault entries are copied 0600,
// read-only, never synced back, whatever they are.
func projectSpec(spec sandbox.Spec) (plan, error) {
	var p plan
	for _, m := range spec.Mounts {
		fi, err := os.Stat(m.HostPath)
		if err != nil {
			return plan{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Projected path %s: %v", m.HostPath, err))
		}
		switch {
		case fi.IsDir():
			if strings.ContainsRune(m.HostPath, ',') {
				return plan{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Projected directory %s contains a comma, which virtiofsd options cannot hold", m.HostPath))
			}
			p.Shares = append(p.Shares, share{Tag: "fs" + strconv.Itoa(len(p.Shares)), HostPath: m.HostPath, RuntimePath: m.RuntimePath, ReadOnly: m.ReadOnly})
		case fi.Mode().IsRegular():
			if fi.Size() > maxCopiedFile {
				return plan{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Projected file %s is %d bytes; a microVM copies single files in and takes at most %d", m.HostPath, fi.Size(), maxCopiedFile))
			}
			under := m.RuntimePath == projection.RuntimeRoot || strings.HasPrefix(m.RuntimePath, projection.RuntimeRoot+"/")
			p.Files = append(p.Files, copied{HostPath: m.HostPath, RuntimePath: m.RuntimePath, Mode: fi.Mode().Perm(), ReadOnly: m.ReadOnly, Sync: !m.ReadOnly && under})
		default:
			return plan{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Projected path %s is neither a directory nor a regular file", m.HostPath))
		}
	}
	for _, v := range spec.VaultFiles {
		err := filepath.WalkDir(v.HostPath, func(file string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil // directories are made as files land; links are not followed
			}
			rel, err := filepath.Rel(v.HostPath, file)
			if err != nil {
				return err
			}
			target := v.RuntimePath
			if rel != "." {
				target = path.Join(v.RuntimePath, filepath.ToSlash(rel))
			}
			p.Files = append(p.Files, copied{HostPath: file, RuntimePath: target, Mode: 0o600, ReadOnly: true})
			return nil
		})
		if err != nil {
			return plan{}, fmt.Errorf("vault file %s: %w", v.RuntimePath, err)
		}
	}
	return p, nil
}

// projectedName is the file beside an office's root disk that lists the
// guest paths of the files hutch projected onto that disk, so that the
// next boot withdraws those its plan no longer has. It lives in the state
// dir, never on the guest's disk: nothing a command does can add to it,
// and it names guest paths only, which the guest removes in the guest.
const projectedName = "projected.json"

type projectedFiles struct {
	Files []string `json:"files"`
}

// filePaths returns the guest paths of p's files, sorted.
func (p plan) filePaths() []string {
	out := make([]string, 0, len(p.Files))
	for _, f := range p.Files {
		out = append(out, f.RuntimePath)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// projected returns what the office's disk was last given (nil: nothing
// recorded).
func (r *Runtime) projected(key string) []string {
	data, err := os.ReadFile(filepath.Join(r.diskDir(key), projectedName))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("cannot read what the root disk was given; nothing is withdrawn from it", "office_key", key, "error", err)
		}
		return nil
	}
	var pf projectedFiles
	if err := json.Unmarshal(data, &pf); err != nil {
		r.log.Warn("what the root disk was given is not readable; nothing is withdrawn from it", "office_key", key, "error", err)
		return nil
	}
	return pf.Files
}

// recordProjected records paths as what the office's disk holds.
func (r *Runtime) recordProjected(key string, paths []string) error {
	data, err := json.Marshal(projectedFiles{Files: paths})
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(r.diskDir(key), projectedName), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("record what the root disk of office %s is given: %w", key, err)
	}
	return nil
}

// withdrawn returns the paths of prev that cur lacks.
func withdrawn(prev, cur []string) []string {
	var out []string
	for _, p := range prev {
		if !slices.Contains(cur, p) {
			out = append(out, p)
		}
	}
	return out
}
