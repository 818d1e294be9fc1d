package devcontainer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/hutchsandbox/hutch/internal/jsonc"
)

// MetadataLabel is the image label the spec keeps the configuration an
// image was made with in: a JSON array of partial devcontainer.json
// objects (or one object), base image first.
const MetadataLabel = "devcontainer.metadata"

// ImageOrigin names the image's metadata in notes and Lifecycle entries.
const ImageOrigin = "the image's devcontainer.metadata"

// ParseMetadata reads the value of an image's devcontainer.metadata
// label into one partial Config per entry, in the label's order, with
// vars substituted as in the file. Entries carry the keys the spec lets
// an image set (users, environment, mounts, lifecycle commands, what it
// asks of the engine); image, build, features and the workspace keys are
// the file's alone and are dropped from them. A label that is not JSON,
// or an entry that is not an object, is noted and skipped: an image
// cannot make a file fail.
func ParseMetadata(label string, vars Vars) (entries []*Config, notes []string) {
	label = strings.TrimSpace(label)
	if label == "" {
		return nil, nil
	}
	var raws []json.RawMessage
	switch jsonc.KindOf(json.RawMessage(label)) {
	case jsonc.Array:
		if err := json.Unmarshal([]byte(label), &raws); err != nil {
			return nil, []string{fmt.Sprintf("%s is not JSON (%v); it is not applied.", ImageOrigin, err)}
		}
	case jsonc.Object:
		if !json.Valid([]byte(label)) {
			return nil, []string{ImageOrigin + " is not JSON; it is not applied."}
		}
		raws = []json.RawMessage{json.RawMessage(label)}
	default:
		return nil, []string{ImageOrigin + " is neither an array nor an object; it is not applied."}
	}
	sub := newSubstituter(vars)
	sub.setContainerFolder("")
	for i, raw := range raws {
		if jsonc.KindOf(raw) != jsonc.Object {
			notes = append(notes, fmt.Sprintf("%s entry %d is %s, not an object; it is skipped.", ImageOrigin, i+1, jsonc.KindOf(raw)))
			continue
		}
		mems, _ := jsonc.Members(raw)
		p := &parser{c: &Config{}, sub: sub, origin: entryOrigin(mems)}
		for _, m := range mems {
			switch m.Name {
			case "image", "build", "dockerFile", "context", "workspaceFolder", "workspaceMount",
				"features", "overrideFeatureInstallOrder", "dockerComposeFile", "service", "name":
				continue
			}
			p.member(m)
		}
		p.c.Ignored = nil
		notes = append(notes, p.c.Notes...)
		p.c.Notes = nil
		entries = append(entries, p.c)
	}
	return entries, notes
}

// entryOrigin names where an entry of the label came from, for
// lifecycle commands and notes: a feature's entry carries the feature's
// id (as the reference CLI writes it, and hutch when it installs
// features), the image's own entries none.
func entryOrigin(mems []jsonc.Member) string {
	for _, m := range mems {
		if m.Name != "id" {
			continue
		}
		// The id is the image's (a LABEL anyone building it wrote): one
		// with a character that does not print (a control, or a
		// direction override making the line read otherwise) is not
		// shown.
		if id, ok := jsonc.StringValue(m.Raw); ok && id != "" && len(id) <= 200 && !strings.ContainsFunc(id, notPrinted) {
			return "the feature " + id + " (in " + ImageOrigin + ")"
		}
	}
	return ImageOrigin
}

// notPrinted reports a character a terminal would not show as itself.
func notPrinted(r rune) bool { return !unicode.IsPrint(r) }

// Merge folds partial configurations into one, as the spec merges an
// image's metadata, its features' and the file: entries in order, the
// file last. Users, shutdownAction and updateRemoteUserUID: the last
// entry that sets one wins. containerEnv and remoteEnv: per variable,
// the last wins. mounts: all of them, one per target, the last winning
// in its place. Lifecycle commands: all of them, in order. capAdd and
// securityOpt: the union; init and privileged: true if any entry says
// so. Everything else comes from the last entry, which is the file.
// The entries are not modified.
func Merge(entries ...*Config) *Config {
	entries = slices.DeleteFunc(slices.Clone(entries), func(c *Config) bool { return c == nil })
	if len(entries) == 0 {
		return nil
	}
	out := *entries[len(entries)-1]
	out.ContainerEnv, out.RemoteEnv, out.Mounts, out.Lifecycle = nil, nil, nil, nil
	out.CapAdd, out.SecurityOpt = nil, nil
	out.Notes = slices.Clone(out.Notes)
	for _, c := range entries {
		if c.RemoteUser != "" {
			out.RemoteUser = c.RemoteUser
		}
		if c.ContainerUser != "" {
			out.ContainerUser = c.ContainerUser
		}
		if c.ShutdownAction != "" {
			out.ShutdownAction = c.ShutdownAction
		}
		if c.UpdateRemoteUserUID != "" {
			out.UpdateRemoteUserUID = c.UpdateRemoteUserUID
		}
		out.ContainerEnv = mergeEnv(out.ContainerEnv, c.ContainerEnv)
		out.RemoteEnv = mergeEnv(out.RemoteEnv, c.RemoteEnv)
		for _, m := range c.Mounts {
			out.Mounts = slices.DeleteFunc(out.Mounts, func(have Mount) bool { return have.Target == m.Target })
			out.Mounts = append(out.Mounts, m)
		}
		for _, h := range Hooks {
			if len(c.Lifecycle[h]) == 0 {
				continue
			}
			if out.Lifecycle == nil {
				out.Lifecycle = map[string][]Lifecycle{}
			}
			out.Lifecycle[h] = append(out.Lifecycle[h], c.Lifecycle[h]...)
		}
		out.CapAdd = union(out.CapAdd, c.CapAdd)
		out.SecurityOpt = union(out.SecurityOpt, c.SecurityOpt)
		out.Init = out.Init || c.Init
		out.Privileged = out.Privileged || c.Privileged
	}
	return &out
}

func mergeEnv(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

func union(dst, src []string) []string {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}
