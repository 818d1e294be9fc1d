package project

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
)

// FeaturesRepo is the repository of the images hutch installs a
// devcontainer.json's features into; the tag is FeaturesTag's hash.
const FeaturesRepo = "hutch-features"

// Features are the features a devcontainer.json installs, between the
// image the sandbox starts from (Base) and hutch's recipe layers: the
// executor fetches them, installs them on Base in the spec's order, tags
// the result FeaturesTag and builds the Recipe on that tag. They are
// installed only on an image the Recipe builds on; an image given by
// sandbox-image is used as it is.
type Features struct {
	// Base is the image they are installed on: the devcontainer build's
	// tag, else the file's image, else sandbox-base (the Recipe's base as
	// Resolve gives it).
	Base string
	// File is the devcontainer.json that names them, for messages; Dir
	// the folder holding it, which local features ("./rust") are
	// relative to.
	File, Dir string
	// List are the file's features as it writes them, with their
	// options, and Order its overrideFeatureInstallOrder.
	List  []devcontainer.Feature
	Order []string `json:",omitempty"`
	// RemoteUser and ContainerUser are the file's, which the base image's
	// devcontainer.metadata completes: the install scripts are told of
	// them (_REMOTE_USER, _CONTAINER_USER).
	RemoteUser, ContainerUser string `json:",omitempty"`
}

// IDs are the features as the file names them, for messages.
func (f *Features) IDs() string {
	ids := make([]string, len(f.List))
	for i, ft := range f.List {
		ids[i] = ft.ID
	}
	return strings.Join(ids, ", ")
}

// Config is the part of a devcontainer.json the features are resolved
// from.
func (f *Features) Config() *devcontainer.Config {
	return &devcontainer.Config{Dir: f.Dir, Features: f.List, OverrideFeatureInstallOrder: f.Order}
}

// resolveFeatures is the Features of dc (named dcFile) on base; nil when
// it has none.
func resolveFeatures(dc *devcontainer.Config, dcFile, base string) *Features {
	if dc == nil || len(dc.Features) == 0 {
		return nil
	}
	dir := dc.Dir
	if dir == "" && dc.Path != "" {
		dir = path.Dir(dc.Path)
	}
	return &Features{
		Base: base, File: dcFile, Dir: dir, List: dc.Features, Order: dc.OverrideFeatureInstallOrder,
		RemoteUser: strings.TrimSpace(dc.RemoteUser), ContainerUser: strings.TrimSpace(dc.ContainerUser),
	}
}

// FeaturePlan is what the features image is made from, as FeaturesTag
// hashes it: the base image by ID, the users the install scripts are
// told of, the features in install order, and the Dockerfile that
// installs them.
type FeaturePlan struct {
	// BaseID is the base image's ID: a base rebuilt or pulled anew is
	// another base.
	BaseID string
	// ContainerUser and RemoteUser are the users the install scripts are
	// told of.
	ContainerUser, RemoteUser string
	// Features are in install order.
	Features []PlannedFeature
	// Dockerfile is what installs them: it holds their order, their
	// containerEnv and the metadata label, and changes with the way hutch
	// writes it.
	Dockerfile string
}

// PlannedFeature is one feature of a FeaturePlan.
type PlannedFeature struct {
	// ID is the feature as written (or as a dependsOn names it).
	ID string
	// Digest identifies its content: an OCI manifest's digest, a
	// tarball's, a local folder's files'.
	Digest string
	// Env is its options as its install script gets them, NAME=VALUE.
	Env []string
}

// FeaturesTag is the tag of the image a FeaturePlan makes:
// hutch-features:<16 hex digits of a SHA-256 over the whole plan>. The
// same plan on the same base finds the image made before; a new version
// behind a feature's tag, an edited local feature, other options, another
// order or a rebuilt base make another. `hutch project rebuild` installs
// the features again whatever the tag finds: their install scripts
// download what they install, which the tag cannot see.
func FeaturesTag(p FeaturePlan) string {
	data, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings only
	}
	sum := sha256.Sum256(data)
	return FeaturesRepo + ":" + hex.EncodeToString(sum[:8])
}

// CheckFeatureMount refuses a mount that the metadata of feature (named
// by f's file) asks for, as CheckMount refuses it, before the feature is
// installed: what the image's devcontainer.metadata asks for is refused
// again when the sandbox is made from it, but the feature's install
// script need not run first. home is the user's home directory.
func (f *Features) CheckFeatureMount(feature string, m Mount, home string) error {
	return refuseMount(m, home, fmt.Sprintf(
		"The feature %s asks for it in its metadata; remove that feature from %s, or set sandbox-image to an image that has what it installs.", feature, f.File))
}
