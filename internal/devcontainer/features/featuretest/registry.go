// Package featuretest serves Dev Container Features from an in-process
// OCI registry, for tests: no public registry is reachable from CI, and
// a test must be able to serve what no real one would (a corrupt layer, a
// tar that climbs out of its folder). The registry is
// go-containerregistry's, on an httptest server on 127.0.0.1, which
// go-containerregistry (and so a features.Fetcher) reaches over plain
// HTTP. Features are pushed as the distribution spec lays them out: an
// OCI manifest whose config is empty (application/vnd.devcontainers),
// whose one layer is a tar of the feature's folder
// (application/vnd.devcontainers.layer.v1+tar), annotated with its
// devcontainer-feature.json.
//
// It may import testing and is imported only by tests.
package featuretest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The distribution spec's media types and annotation (as in package
// features, which this package does not import so that its tests can).
const (
	LayerMediaType     = "application/vnd.devcontainers.layer.v1+tar"
	ConfigMediaType    = "application/vnd.devcontainers"
	MetadataAnnotation = "dev.containers.metadata"
)

// Registry is an OCI registry serving on 127.0.0.1 until the test ends.
type Registry struct {
	// Host is the registry's host:port, the first component of a feature
	// reference: Host + "/devcontainers/features/node:1".
	Host string

	mu           sync.Mutex
	user, pass   string          // required when user is set
	corrupt      map[string]bool // blob digests served with a byte flipped
	blobGets     int
	manifestGets int
}

// NewRegistry starts a registry that stops when t ends.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{corrupt: make(map[string]bool)}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		user, pass := r.user, r.pass
		r.mu.Unlock()
		if u, p, ok := req.BasicAuth(); user != "" && (!ok || u != user || p != pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="featuretest"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		if req.Method == http.MethodGet {
			r.mu.Lock()
			switch {
			case strings.Contains(req.URL.Path, "/blobs/"):
				r.blobGets++
				if r.corrupt[path.Base(req.URL.Path)] {
					w = &flipWriter{ResponseWriter: w}
				}
			case strings.Contains(req.URL.Path, "/manifests/"):
				r.manifestGets++
			}
			r.mu.Unlock()
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// Ref returns the reference of repoTag ("devcontainers/features/node:1")
// in this registry.
func (r *Registry) Ref(repoTag string) string { return r.Host + "/" + repoTag }

// Transport sends every request to this registry over plain HTTP,
// whatever host it names, so that a test resolves a feature as
// devcontainer.json writes it (ghcr.io/devcontainers/features/node:1) from
// what it pushed (at devcontainers/features/node:1).
func (r *Registry) Transport() http.RoundTripper {
	return roundTripFunc(func(orig *http.Request) (*http.Response, error) {
		req := orig.Clone(orig.Context())
		req.URL.Scheme, req.URL.Host, req.Host = "http", r.Host, r.Host
		resp, err := http.DefaultTransport.RoundTrip(req)
		if resp != nil {
			// The client goes on with the scheme and host it asked for.
			resp.Request = orig
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BlobGets returns how many blobs the registry has served.
func (r *Registry) BlobGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets
}

// ManifestGets returns how many manifests the registry has served.
func (r *Registry) ManifestGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.manifestGets
}

// RequireAuth makes the registry refuse every request without HTTP basic
// authentication as user and pass, as a private registry does. Pushing
// is refused too: push first.
func (r *Registry) RequireAuth(user, pass string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.pass = user, pass
}

// Corrupt makes the registry serve the blob of digest d with its first
// byte changed, as a damaged store or a meddling proxy would.
func (r *Registry) Corrupt(d v1.Hash) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.corrupt[d.String()] = true
}

// Files are a feature's files by slash-separated name; a name ending in
// "/" is an empty folder. install.sh and names ending in .sh are
// executable.
type Files map[string]string

// Push publishes files as a feature at repoTag
// ("devcontainers/features/node:1") and returns its manifest digest.
func (r *Registry) Push(t testing.TB, repoTag string, files Files) v1.Hash {
	t.Helper()
	var ann map[string]string
	if md, ok := files["devcontainer-feature.json"]; ok {
		ann = map[string]string{MetadataAnnotation: md}
	}
	return r.PushLayer(t, repoTag, Tar(t, files), ann)
}

// PushDir publishes the feature folder dir (its regular files, which
// must be all it holds) at repoTag.
func (r *Registry) PushDir(t testing.TB, repoTag, dir string) v1.Hash {
	t.Helper()
	files := Files{}
	err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file", p)
		}
		b, err := fs.ReadFile(os.DirFS(dir), p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("featuretest: reading the feature %s: %v", dir, err)
	}
	return r.Push(t, repoTag, files)
}

// PushLayer publishes layer, the bytes of a tar (or anything), as a
// feature's layer at repoTag, with the manifest annotations ann.
func (r *Registry) PushLayer(t testing.TB, repoTag string, layer []byte, ann map[string]string) v1.Hash {
	t.Helper()
	l := r.PushBlob(t, repoTag, layer, LayerMediaType)
	l.Annotations = map[string]string{"org.opencontainers.image.title": "devcontainer-feature-" + featureName(repoTag) + ".tgz"}
	return r.PushManifest(t, repoTag, []v1.Descriptor{l}, ann)
}

// PushBlob uploads data to repoTag's repository and returns its
// descriptor, of media type mt.
func (r *Registry) PushBlob(t testing.TB, repoTag string, data []byte, mt string) v1.Descriptor {
	t.Helper()
	ref, err := name.ParseReference(r.Ref(repoTag))
	if err != nil {
		t.Fatalf("featuretest: %v", err)
	}
	l := static.NewLayer(data, types.MediaType(mt))
	if err := remote.WriteLayer(ref.Context(), l); err != nil {
		t.Fatalf("featuretest: pushing a blob to %s: %v", ref, err)
	}
	d, _ := l.Digest() // static layers know theirs
	return v1.Descriptor{MediaType: types.MediaType(mt), Size: int64(len(data)), Digest: d}
}

// PushManifest publishes an OCI manifest with an empty config of the
// devcontainers media type, layers (pushed with PushBlob) and
// annotations ann at repoTag, and returns its digest.
func (r *Registry) PushManifest(t testing.TB, repoTag string, layers []v1.Descriptor, ann map[string]string) v1.Hash {
	t.Helper()
	cfg := r.PushBlob(t, repoTag, nil, ConfigMediaType)
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        cfg,
		Layers:        layers,
		Annotations:   ann,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("featuretest: %v", err)
	}
	return r.PushRaw(t, repoTag, raw, string(types.OCIManifestSchema1))
}

// PushRaw publishes manifest, of media type mt, at repoTag as it is.
func (r *Registry) PushRaw(t testing.TB, repoTag string, manifest []byte, mt string) v1.Hash {
	t.Helper()
	ref, err := name.ParseReference(r.Ref(repoTag))
	if err != nil {
		t.Fatalf("featuretest: %v", err)
	}
	if err := remote.Put(ref, rawManifest{b: manifest, mt: types.MediaType(mt)}); err != nil {
		t.Fatalf("featuretest: pushing the manifest of %s: %v", ref, err)
	}
	d, _, err := v1.SHA256(bytes.NewReader(manifest))
	if err != nil {
		t.Fatalf("featuretest: %v", err)
	}
	return d
}

type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.b, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// featureName is the last path component of repoTag, without its tag.
func featureName(repoTag string) string {
	base := path.Base(repoTag)
	if i := strings.IndexAny(base, ":@"); i >= 0 {
		base = base[:i]
	}
	return base
}

// flipWriter changes the first byte of a response body.
type flipWriter struct {
	http.ResponseWriter
	done bool
}

func (w *flipWriter) Write(p []byte) (int, error) {
	if !w.done && len(p) > 0 {
		w.done = true
		q := slices.Clone(p)
		q[0] ^= 0xff
		return w.ResponseWriter.Write(q)
	}
	return w.ResponseWriter.Write(p)
}

// Entry is one entry of a tar TarEntries writes.
type Entry struct {
	Name string
	// Type is a tar type flag; 0 is a regular file.
	Type byte
	Body string
	Mode int64
	// Link is a link's target.
	Link string
}

// Tar returns files as a feature's tar, the way the packaging tools
// write it: "./" and each name below it, sorted, folders before their
// contents.
func Tar(t testing.TB, files Files) []byte {
	t.Helper()
	entries := []Entry{{Name: "./", Type: tar.TypeDir, Mode: 0o755}}
	dirs := map[string]bool{}
	for _, n := range slices.Sorted(maps.Keys(files)) {
		for d := path.Dir(strings.TrimSuffix(n, "/")); d != "."; d = path.Dir(d) {
			if !dirs[d] {
				dirs[d] = true
				entries = append(entries, Entry{Name: "./" + d + "/", Type: tar.TypeDir, Mode: 0o755})
			}
		}
		if strings.HasSuffix(n, "/") {
			entries = append(entries, Entry{Name: "./" + n, Type: tar.TypeDir, Mode: 0o755})
			continue
		}
		mode := int64(0o644)
		if strings.HasSuffix(n, ".sh") {
			mode = 0o755
		}
		entries = append(entries, Entry{Name: "./" + n, Body: files[n], Mode: mode})
	}
	return TarEntries(t, entries...)
}

// TarEntries returns a tar of entries exactly as given, hostile names
// and types included.
func TarEntries(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.Name, Typeflag: typ, Mode: mode, Linkname: e.Link, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("featuretest: tar entry %q: %v", e.Name, err)
		}
		if hdr.Size > 0 {
			if _, err := io.WriteString(tw, e.Body); err != nil {
				t.Fatalf("featuretest: %v", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("featuretest: %v", err)
	}
	return b.Bytes()
}

// Gzip compresses data, as the packaging tools that write a real .tgz do.
func Gzip(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatalf("featuretest: %v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("featuretest: %v", err)
	}
	return b.Bytes()
}
