package box

import (
	"cmp"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/devcontainer"
)

// refine applies an image's devcontainer.metadata label to the spec
// (Options.Refine); without Refine the spec stays.
func (b *Box) refine(label string) error {
	if b.opts.Refine == nil {
		return nil
	}
	sp, err := b.opts.Refine(label)
	if err != nil {
		return err
	}
	sp.Name, sp.Hash, sp.Labels = b.spec.Name, b.spec.Hash, b.spec.Labels
	b.spec = sp
	return nil
}

// execCache is what the warm path needs to know of a running sandbox
// without asking the engine: the image's metadata label, to refine the
// spec with, and the container's environment, to fill
// ${containerEnv:...} from. It is written by every Up, for the spec
// hash it was made with.
type execCache struct {
	Hash  string   `json:"hash"`
	Label string   `json:"label,omitempty"`
	Env   []string `json:"env,omitempty"`
}

// execCacheFile is in the project's state dir, beside its sessions; the
// container's environment can hold what the settings set, so it is the
// user's alone.
func (b *Box) execCacheFile() string {
	return filepath.Join(b.opts.StateDir, "projects", b.spec.Name, "exec.json")
}

func (b *Box) writeExecCache(c execCache) {
	data, err := json.Marshal(c)
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(b.execCacheFile()), 0o700); err == nil {
			err = atomicfile.WriteFile(b.execCacheFile(), data, 0o600)
		}
	}
	if err != nil {
		b.opts.Log.Debug("exec cache not written; warm commands ask the engine", "sandbox", b.spec.Name, "error", err)
	}
}

// readExecCache returns the cache when it was written for the current
// spec.
func (b *Box) readExecCache() (execCache, bool) {
	data, err := os.ReadFile(b.execCacheFile())
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			b.opts.Log.Debug("exec cache unreadable", "sandbox", b.spec.Name, "error", err)
		}
		return execCache{}, false
	}
	var c execCache
	if json.Unmarshal(data, &c) != nil || c.Hash != b.spec.Hash {
		return execCache{}, false
	}
	return c, true
}

// metadataLabel is an image's or container's devcontainer.metadata.
func metadataLabel(labels map[string]string) string { return labels[devcontainer.MetadataLabel] }

// refinedNotes are the notes of the refined spec that have does not
// hold yet (what the image's metadata made the resolver say).
func (b *Box) refinedNotes(have []string) []string {
	var out []string
	for _, n := range b.spec.Notes {
		if !slices.Contains(have, n) {
			out = append(out, n)
		}
	}
	return out
}

// editorExec is how an editor runs commands in a container it made: as
// remoteUser (else containerUser, else the container's own user) and
// with remoteEnv, as its devcontainer.metadata label records them
// (the reference CLI writes the whole merged configuration there), the
// ${containerEnv:...} in it filled from the container's environment.
func editorExec(st containerState) (user string, env []string, notes []string) {
	entries, notes := devcontainer.ParseMetadata(metadataLabel(st.labels), devcontainer.Vars{})
	merged := devcontainer.Merge(entries...)
	if merged == nil {
		return "", nil, notes
	}
	user = cmp.Or(merged.RemoteUser, merged.ContainerUser)
	lookup := envLookup(st.env)
	for _, name := range slices.Sorted(maps.Keys(merged.RemoteEnv)) {
		env = append(env, name+"="+devcontainer.ExpandContainerEnv(merged.RemoteEnv[name], lookup))
	}
	return user, env, notes
}

// envLookup finds a variable in environments of NAME=VALUE entries: the
// first environment that sets it decides, and within one the last
// entry, as an exec's environment over the container's does.
func envLookup(envs ...[]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, env := range envs {
			for i := len(env) - 1; i >= 0; i-- {
				if k, v, _ := strings.Cut(env[i], "="); k == name {
					return v, true
				}
			}
		}
		return "", false
	}
}
