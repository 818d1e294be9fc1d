// Package kubeagent builds the agent image of the kube: mode: an image
// whose only file is the hutch binary at /hutch. A pod cannot bind-mount a
// file of the daemon's host the way the image mode does, so each
// conversation's pod gets the agent from this image instead: an init
// container runs `/hutch agent --install-to <dir>/hutch --sha256 <hex>`,
// which copies the binary into an emptyDir the main container runs it
// from, and refuses when the image holds another hutch than the daemon's.
//
// The image is written as a docker-archive tarball (what `docker save`
// writes), which `docker load`, `podman load` and
// `ctr -n k8s.io images import` all read, so it reaches a cluster's nodes
// without a registry. Its tag is derived from the binary's digest, so a
// rebuilt hutch never reuses an older image by name.
package kubeagent

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

const (
	// DefaultRepository is the agent image's repository when none is set.
	DefaultRepository = "hutch-agent"
	// BinaryPath is where the image holds the hutch binary; it is also the
	// image's entrypoint.
	BinaryPath = "/hutch"
	// LabelSHA256 is the image label holding the full hex SHA-256 of the
	// binary, so an image can be matched to a daemon without running it.
	LabelSHA256 = "hutch.agent-sha256"
)

// epoch is the time stamped on everything in the image, so that one
// binary always makes the same image (the same digests).
var epoch = time.Unix(0, 0).UTC()

// Ref returns the agent image reference for b: repository (DefaultRepository
// when empty), then ":sha-" and the first 16 hex characters of b's digest.
func Ref(repository string, b agentbin.Binary) string {
	if repository == "" {
		repository = DefaultRepository
	}
	digest := b.SHA256
	if len(digest) > 16 {
		digest = digest[:16]
	}
	return repository + ":sha-" + digest
}

// Write writes the agent image of b, tagged ref (repository:tag), to w as
// a docker-archive tarball. The image has one layer holding b as /hutch
// (mode 0555, owned by 0:0), the entrypoint /hutch, this process's
// architecture, os linux, and the label LabelSHA256. The binary is read
// once and checked against b.SHA256 first: a binary rebuilt since it was
// located is refused rather than shipped under the old digest's tag.
func Write(w io.Writer, b agentbin.Binary, ref string) error {
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent image reference %q is not valid: %v", ref, err))
	}
	if last := ref[strings.LastIndex(ref, "/")+1:]; !strings.Contains(last, ":") {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent image reference %q has no tag; write it as repository:tag", ref))
	}
	data, err := os.ReadFile(b.Path)
	if err != nil {
		return fmt.Errorf("agent image: %w", err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != strings.ToLower(b.SHA256) {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Agent binary %s changed since hutch located it (its SHA-256 is no longer %s); run the command again", b.Path, b.SHA256))
	}
	layerTar, err := layerTar(data)
	if err != nil {
		return fmt.Errorf("agent image: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return fmt.Errorf("agent image layer: %w", err)
	}
	cfg := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			Entrypoint: []string{BinaryPath},
			Labels:     map[string]string{LabelSHA256: strings.ToLower(b.SHA256)},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return fmt.Errorf("agent image config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hutch kube agent-image"},
	})
	if err != nil {
		return fmt.Errorf("agent image: %w", err)
	}
	if err := tarball.Write(tag, img, w); err != nil {
		return fmt.Errorf("write agent image %s: %w", ref, err)
	}
	return nil
}

// layerTar returns an uncompressed layer holding data as BinaryPath.
func layerTar(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(BinaryPath, "/"),
		Mode:     0o555,
		Size:     int64(len(data)),
		ModTime:  epoch,
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
