package features

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Fetcher gets features into folders of its WorkDir. Its zero value is
// not usable: WorkDir must be set, and Dir for local features.
type Fetcher struct {
	// Dir is the folder holding devcontainer.json (Config.Dir), which
	// local features are relative to.
	Dir string
	// ProjectRoot, when set, is the project on the host: Dir must lie
	// beneath it and is reached from it without following a link (the
	// project is the sandbox's to write). Unset, Dir itself is the root.
	ProjectRoot string
	// WorkDir is a folder of hutch's own, which no sandbox can write,
	// where each fetched feature gets a folder. The caller removes it.
	WorkDir string
	// CacheDir, when set, keeps OCI manifests and layers by digest, so a
	// second bring-up downloads no layer again and a feature pinned by
	// digest needs no registry at all. A tag is still looked up.
	CacheDir string
	// Keychain finds registry credentials; nil is the host user's docker
	// credentials (authn.DefaultKeychain), anonymous where it has none.
	Keychain authn.Keychain
	// RegistryTransport carries registry requests (nil:
	// http.DefaultTransport). Plain HTTP is refused except to the
	// loopback, and manifests are capped, whatever it is.
	RegistryTransport http.RoundTripper
	// Mirrors are registries to fetch OCI features from instead of the
	// ones their references name (nil: none).
	Mirrors Mirrors
	// HTTPClient fetches tarballs (nil: one with a 10 minute timeout).
	// Redirects to anything but https are refused whatever it is.
	HTTPClient *http.Client
	Limits     Limits
}

// The media types of the distribution spec.
const (
	// LayerMediaType is a feature artifact's layer: a tar of its folder.
	LayerMediaType = "application/vnd.devcontainers.layer.v1+tar"
	// ConfigMediaType is a feature artifact's (empty) config.
	ConfigMediaType = "application/vnd.devcontainers"
	// MetadataAnnotation holds devcontainer-feature.json on the manifest.
	MetadataAnnotation = "dev.containers.metadata"
)

const (
	// maxMetadata bounds a devcontainer-feature.json.
	maxMetadata = 1 << 20
	// maxManifest bounds a registry's manifest (go-containerregistry
	// allows 100 MiB); a feature's is well under a kilobyte.
	maxManifest = 4 << 20
)

// Fetch gets the feature ref into a new folder of f.WorkDir and reads its
// metadata. Errors name the feature and what failed, with class
// errdefs.ErrNotFound (no such feature or version),
// errdefs.ErrFailedPrecondition (a registry or server refused access),
// errdefs.ErrUnavailable (it could not be reached) or errdefs.ErrInvalid
// (what it served is not a usable feature: corrupt, too large, unsafe
// names, no devcontainer-feature.json).
func (f *Fetcher) Fetch(ctx context.Context, ref Ref) (*Fetched, error) {
	if f.WorkDir == "" {
		return nil, errors.New("features: Fetcher.WorkDir is not set")
	}
	lim := f.Limits.orDefaults()
	dst, err := os.MkdirTemp(f.WorkDir, folderName(ref.Name())+"-*")
	if err != nil {
		return nil, fmt.Errorf("feature %s: %w", ref.ID, err)
	}
	out := &Fetched{Dir: dst}
	switch ref.Kind {
	case OCI:
		out.Digest, out.Notes, err = f.fetchOCI(ctx, ref, dst, lim)
	case Tarball:
		out.Digest, out.Notes, err = f.fetchTarball(ctx, ref, dst, lim)
	case Local:
		out.Digest, out.Notes, err = f.copyLocal(ref, dst, lim)
	default:
		err = errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: not a parsed reference", ref.ID))
	}
	if err == nil {
		err = f.finish(ref, out)
	}
	if err != nil {
		_ = os.RemoveAll(dst)
		return nil, err
	}
	return out, nil
}

// finish reads the fetched feature's metadata and looks for install.sh.
func (f *Fetcher) finish(ref Ref, out *Fetched) error {
	root, err := os.OpenRoot(out.Dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	data, err := readRegular(root, MetadataFile, maxMetadata)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: it has no %s at the top of its folder; is it a Dev Container Feature?", ref.ID, MetadataFile))
	case err != nil:
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: %s: %v", ref.ID, MetadataFile, err))
	}
	md, err := ParseMetadata(ref.ID, data)
	if err != nil {
		return err
	}
	out.Metadata = md
	if ref.Kind == Local && md.ID != "" && md.ID != ref.Name() {
		out.Notes = append(out.Notes, fmt.Sprintf("feature %s: its id is %q, but the spec wants a local feature's folder named after it", ref.ID, md.ID))
	}
	if fi, err := root.Lstat(InstallScript); err == nil && fi.Mode().IsRegular() {
		out.HasInstall = true
	} else {
		out.Notes = append(out.Notes, fmt.Sprintf("feature %s: it has no %s; only its metadata is applied", ref.ID, InstallScript))
	}
	return nil
}

// readRegular reads the regular file name beneath root, at most limit
// bytes.
func readRegular(root *os.Root, name string, limit int64) ([]byte, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("larger than %s", mebibytes(limit))
	}
	return root.ReadFile(name)
}

// folderName keeps a name usable as a folder: [a-z0-9._-], others "-".
func folderName(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
	s = strings.TrimLeft(s, ".-")
	if s == "" {
		return "feature"
	}
	return s
}

// fetchOCI pulls the feature's manifest (or finds it in the cache when
// pinned by digest), then its layer (from the cache when there), checks
// it against its digest and unpacks it into dst.
func (f *Fetcher) fetchOCI(ctx context.Context, ref Ref, dst string, lim Limits) (string, []string, error) {
	// from is what is asked of the registry: ref, at its mirror if it
	// has one.
	from := ref
	from.Registry = f.Mirrors.of(ref)
	nref, err := name.ParseReference(from.Reference())
	if err != nil {
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: %v", ref.ID, err))
	}
	keychain := f.Keychain
	if keychain == nil {
		keychain = authn.DefaultKeychain
	}
	base := f.RegistryTransport
	if base == nil {
		base = http.DefaultTransport
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(keychain),
		remote.WithTransport(guardedTransport{base: base}),
		remote.WithUserAgent("hutch"),
	}
	c := cache{dir: f.CacheDir}

	var manifest []byte
	var digest v1.Hash
	if ref.Digest != "" {
		if h, err := v1.NewHash(ref.Digest); err == nil {
			if b, ok := c.get("manifests", h, maxManifest); ok {
				manifest, digest = b, h
			}
		}
	}
	if manifest == nil {
		desc, err := remote.Get(nref, opts...)
		if err != nil {
			return "", nil, registryError(ctx, ref, from.Registry, "its manifest", err)
		}
		if desc.MediaType.IsIndex() {
			return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: %s is an image index, not a Dev Container Feature (whose manifest has a layer of type %s)", ref.ID, from.Reference(), LayerMediaType))
		}
		manifest, digest = desc.Manifest, desc.Digest
		c.put("manifests", digest, manifest)
	}
	m, err := v1.ParseManifest(strings.NewReader(string(manifest)))
	if err != nil {
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: its manifest does not parse: %v", ref.ID, err))
	}
	var layer *v1.Descriptor
	for i := range m.Layers {
		if string(m.Layers[i].MediaType) == LayerMediaType {
			layer = &m.Layers[i]
			break
		}
	}
	switch {
	case layer == nil:
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: %s is not a Dev Container Feature: its manifest has no layer of type %s", ref.ID, from.Reference(), LayerMediaType))
	case layer.Digest.Algorithm != "sha256":
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: its layer's digest is %s; hutch checks sha256 digests only", ref.ID, layer.Digest))
	case layer.Size > lim.Artifact:
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: its layer is %d bytes, more than the %s a feature may be", ref.ID, layer.Size, mebibytes(lim.Artifact)))
	}

	blob, err := f.layer(ctx, ref, from.Registry, nref, layer, opts, c, lim)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = blob.Close() }()
	notes, err := unpack(ref.ID, blob, dst, lim)
	return digest.String(), notes, err
}

// layer returns the feature's layer, checked against its digest: from the
// cache, or downloaded from registry (into the cache when there is one).
func (f *Fetcher) layer(ctx context.Context, ref Ref, registry string, nref name.Reference, layer *v1.Descriptor, opts []remote.Option, c cache, lim Limits) (*os.File, error) {
	if file, ok := c.open("blobs", layer.Digest, lim.Artifact); ok {
		return file, nil
	}
	l, err := remote.Layer(nref.Context().Digest(layer.Digest.String()), opts...)
	if err != nil {
		return nil, registryError(ctx, ref, registry, "its layer", err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, registryError(ctx, ref, registry, "its layer", err)
	}
	defer func() { _ = rc.Close() }()
	dir := c.path("blobs")
	if dir == "" {
		dir = f.WorkDir
	}
	tmp, err := os.CreateTemp(dir, ".download-*")
	if err != nil {
		return nil, fmt.Errorf("feature %s: %w", ref.ID, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(rc, lim.Artifact+1))
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	switch {
	case n > lim.Artifact:
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: its layer is more than the %s a feature may be", ref.ID, mebibytes(lim.Artifact)))
	case n >= layer.Size && got != layer.Digest.String():
		// go-containerregistry reports the mismatch as a read error at
		// the end; this says what it means.
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: its layer is corrupt: the registry served content of digest %s for %s; try again, and report it to the feature's publisher if it persists", ref.ID, got, layer.Digest))
	case err != nil:
		return nil, registryError(ctx, ref, registry, "its layer", err)
	case n != layer.Size:
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: its layer is corrupt: %d bytes served where the manifest says %d", ref.ID, n, layer.Size))
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	// Keeping the layer is an optimisation: when it fails, the cache is
	// left as it was. Not kept, the file is unlinked and read from the
	// open descriptor.
	if final := c.file("blobs", layer.Digest); final == "" || tmp.Sync() != nil || os.Rename(tmp.Name(), final) != nil {
		_ = os.Remove(tmp.Name())
	}
	ok = true
	return tmp, nil
}

// fetchTarball downloads an https feature tarball, hashes it and unpacks
// it into dst.
func (f *Fetcher) fetchTarball(ctx context.Context, ref Ref, dst string, lim Limits) (string, []string, error) {
	client := &http.Client{Timeout: 10 * time.Minute}
	if f.HTTPClient != nil {
		c := *f.HTTPClient
		client = &c
	}
	next := client.CheckRedirect
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" {
			return fmt.Errorf("refusing a redirect to %s: feature tarballs are fetched over https only", req.URL.Redacted())
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ref.URL, nil)
	if err != nil {
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: %v", ref.ID, err))
	}
	req.Header.Set("User-Agent", "hutch")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, fmt.Errorf("feature %s: %w", ref.ID, ctx.Err())
		}
		return "", nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("feature %s: cannot reach %s: %v", ref.ID, req.URL.Host, err))
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return "", nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("feature %s: not found (%s); check the URL", ref.ID, resp.Status))
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return "", nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("feature %s: the server refused it (%s); hutch fetches tarballs without credentials, so publish it where it can be read, or to an OCI registry", ref.ID, resp.Status))
	case resp.StatusCode != http.StatusOK:
		return "", nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("feature %s: the server answered %s", ref.ID, resp.Status))
	case resp.ContentLength > lim.Artifact:
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: the tarball is %d bytes, more than the %s a feature may be", ref.ID, resp.ContentLength, mebibytes(lim.Artifact)))
	}
	tmp, err := os.CreateTemp(f.WorkDir, ".download-*")
	if err != nil {
		return "", nil, fmt.Errorf("feature %s: %w", ref.ID, err)
	}
	defer func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, lim.Artifact+1))
	switch {
	case n > lim.Artifact:
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: the tarball is more than the %s a feature may be", ref.ID, mebibytes(lim.Artifact)))
	case err != nil:
		return "", nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("feature %s: downloading from %s: %v", ref.ID, req.URL.Host, err))
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", nil, err
	}
	notes, err := unpack(ref.ID, tmp, dst, lim)
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), notes, err
}
