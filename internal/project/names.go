package project

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Label keys and values hutch stamps on a project sandbox. The labels are
// how a later run finds the container (by LabelProject or, for an editor's
// container, LabelLocalFolder) and whether hutch may stop or remove it
// (LabelOwner).
const (
	// LabelSandbox marks a project sandbox; its value is SandboxProject.
	LabelSandbox = "hutch.sandbox"
	// LabelProject is the resolved project path.
	LabelProject = "hutch.project"
	// LabelOwner is OwnerHutch on containers hutch created; anything else
	// found for a project is the user's and is never stopped or removed.
	LabelOwner = "hutch.owner"
	// LabelSpec is Spec.Hash, so a container created from settings that
	// have since changed can be reported as needing a rebuild.
	LabelSpec = "hutch.spec"
	// LabelLocalFolder is the devcontainer label editors look a
	// project's container up by, so they find the one already running.
	LabelLocalFolder = "devcontainer.local_folder"
	// LabelConfigFile is the devcontainer.json the container was made
	// with, when there was one.
	LabelConfigFile = "devcontainer.config_file"

	// SandboxProject is the value of LabelSandbox.
	SandboxProject = "project"
	// OwnerHutch is the value of LabelOwner on containers hutch created.
	OwnerHutch = "hutch"
)

// NamePrefix starts the name of every project sandbox.
const NamePrefix = "hutch-sbx-"

// Hash is the short, stable hash names are built from: the first 8 of the
// 16 zero-padded hex digits of the 64-bit FNV-1a of s. It is not
// cryptographic; it tells checkouts and recipes apart.
func Hash(s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("%016x", h.Sum64())[:8]
}

// slugMax is the longest slug a name carries.
const slugMax = 24

// Slug is the readable part of a project's name: the last component of
// the path, ASCII letters and digits lower-cased, every other character
// (non-ASCII ones included) turned into '-', trimmed of '-', "project"
// when nothing is left, then cut to 24 characters (so a slug may end in
// '-'). It is a hint for humans; Hash is the identity.
func Slug(project string) string {
	last := strings.TrimRight(project, "/")
	if i := strings.LastIndexByte(last, '/'); i >= 0 {
		last = last[i+1:]
	}
	var b strings.Builder
	for _, r := range last {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r - 'A' + 'a')
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		return "project"
	}
	if len(s) > slugMax {
		s = s[:slugMax]
	}
	return s
}

// ContainerName is the name of a project's sandbox,
// hutch-sbx-<slug>-<hash>: stable across sessions, unique per checkout.
// project is the resolved path, as CheckProject accepted it.
func ContainerName(project string) string {
	return NamePrefix + Slug(project) + "-" + Hash(project)
}

// HomeVolume is the named volume mounted at /sandbox/home in the sandbox
// called name. It outlives the container, so a login survives rebuilds.
func HomeVolume(name string) string { return name + "-home" }

// Labels are the labels of a project's sandbox. configFile (the
// devcontainer.json applied) and specHash (Spec.Hash) are left out when
// empty.
func Labels(project, configFile, specHash string) map[string]string {
	l := map[string]string{
		LabelSandbox:     SandboxProject,
		LabelProject:     project,
		LabelOwner:       OwnerHutch,
		LabelLocalFolder: project,
	}
	if configFile != "" {
		l[LabelConfigFile] = configFile
	}
	if specHash != "" {
		l[LabelSpec] = specHash
	}
	return l
}
