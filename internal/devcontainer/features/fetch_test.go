package features_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features/featuretest"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

var nodeFiles = featuretest.Files{
	"devcontainer-feature.json": `{"id": "node", "version": "1.0.0", "name": "Node",
		"options": {"version": {"type": "string", "default": "lts"}},
		"dependsOn": {"REGISTRY/devcontainers/features/common:2": {"zsh": false}}}`,
	"install.sh":    "#!/bin/sh\necho node \"$VERSION\"\n",
	"lib/helper.sh": "echo helper\n",
}

var commonFiles = featuretest.Files{
	"devcontainer-feature.json": `{"id": "common", "version": "2.0.0", "name": "Common", "options": {"zsh": {"type": "boolean", "default": true}}}`,
	"install.sh":                "#!/bin/sh\necho common\n",
}

// files lists dir's regular files with their contents, and its folders.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = root.Close() }()
	out := map[string]string{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if d.IsDir() {
			out[p+"/"] = ""
			return nil
		}
		if !d.Type().IsRegular() {
			out[p] = "not regular: " + d.Type().String()
			return nil
		}
		b, err := fs.ReadFile(root.FS(), p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fetcher(t *testing.T) *features.Fetcher {
	return &features.Fetcher{WorkDir: t.TempDir(), Keychain: authn.NewMultiKeychain()}
}

func mustRef(t *testing.T, id string) features.Ref {
	t.Helper()
	r, err := features.ParseRef(id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func withRegistry(fs featuretest.Files, host string) featuretest.Files {
	out := featuretest.Files{}
	for k, v := range fs {
		out[k] = strings.ReplaceAll(v, "REGISTRY", host)
	}
	return out
}

func TestFetch_OCI(t *testing.T) {
	reg := featuretest.NewRegistry(t)
	digest := reg.Push(t, "devcontainers/features/node:1", withRegistry(nodeFiles, reg.Host))
	f := fetcher(t)
	got, err := f.Fetch(context.Background(), mustRef(t, reg.Ref("devcontainers/features/node:1")))
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != digest.String() {
		t.Errorf("Digest = %s, want %s", got.Digest, digest)
	}
	if got.Metadata.ID != "node" || !got.HasInstall || got.Notes != nil {
		t.Errorf("Fetched = %+v", got)
	}
	want := map[string]string{"devcontainer-feature.json": withRegistry(nodeFiles, reg.Host)["devcontainer-feature.json"], "install.sh": nodeFiles["install.sh"], "lib/": "", "lib/helper.sh": nodeFiles["lib/helper.sh"]}
	if diff := cmp.Diff(want, files(t, got.Dir)); diff != "" {
		t.Errorf("fetched files (-want +got):\n%s", diff)
	}
	if rel, err := filepath.Rel(f.WorkDir, got.Dir); err != nil || strings.Contains(rel, "/") || !strings.HasPrefix(rel, "node-") {
		t.Errorf("Dir = %s, want a folder node-* of %s", got.Dir, f.WorkDir)
	}
	if fi, err := os.Stat(filepath.Join(got.Dir, "install.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("install.sh: %v %v", fi.Mode(), err)
	}

	// A pinned digest, and a gzip-compressed layer, work as well.
	reg.PushLayer(t, "devcontainers/features/zipped:1", featuretest.Gzip(t, featuretest.Tar(t, commonFiles)), nil)
	for _, id := range []string{reg.Ref("devcontainers/features/node@" + digest.String()), reg.Ref("devcontainers/features/zipped:1")} {
		got, err := f.Fetch(context.Background(), mustRef(t, id))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if got.Metadata.ID == "" || !got.HasInstall {
			t.Errorf("%s: %+v", id, got)
		}
	}
}

// TestFetch_OCILinks: a published tar's links (to the host's files, or
// within) are left out, with a note; the feature's files still arrive.
func TestFetch_OCILinks(t *testing.T) {
	reg := featuretest.NewRegistry(t)
	reg.PushLayer(t, "devcontainers/features/links:1", featuretest.TarEntries(t,
		featuretest.Entry{Name: "./", Type: tar.TypeDir, Mode: 0o755},
		featuretest.Entry{Name: "./devcontainer-feature.json", Body: `{"id": "links"}`},
		featuretest.Entry{Name: "./install.sh", Body: "#!/bin/sh\n", Mode: 0o755},
		featuretest.Entry{Name: "./shadow", Type: tar.TypeSymlink, Link: "/etc/shadow"},
		featuretest.Entry{Name: "./up", Type: tar.TypeSymlink, Link: "../../../../"},
		featuretest.Entry{Name: "./install-again.sh", Type: tar.TypeLink, Link: "./install.sh"},
	), nil)
	got, err := fetcher(t).Fetch(context.Background(), mustRef(t, reg.Ref("devcontainers/features/links:1")))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"devcontainer-feature.json": `{"id": "links"}`, "install.sh": "#!/bin/sh\n"}
	if diff := cmp.Diff(want, files(t, got.Dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	note := "feature " + reg.Ref("devcontainers/features/links:1") + ": left out the link shadow -> /etc/shadow, the link up -> ../../../../, the link install-again.sh -> ./install.sh: features are installed from their regular files and folders only"
	if diff := cmp.Diff([]string{note}, got.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
}

// TestFetch_PrivateRegistry: a registry that wants credentials is
// answered with the host user's docker credentials, and without them
// the error says to log in.
func TestFetch_PrivateRegistry(t *testing.T) {
	reg := featuretest.NewRegistry(t)
	reg.Push(t, "team/features/secret:1", commonFiles)
	reg.RequireAuth("ada", "s3cret")
	ref := mustRef(t, reg.Ref("team/features/secret:1"))

	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", filepath.Join(home, ".docker"))
	t.Setenv("REGISTRY_AUTH_FILE", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	f := &features.Fetcher{WorkDir: t.TempDir()} // the default keychain
	_, err := f.Fetch(context.Background(), ref)
	if err == nil || !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "feature "+ref.ID+": registry "+reg.Host+" refused access to its manifest") ||
		!strings.Contains(err.Error(), "log in with docker login "+reg.Host) {
		t.Fatalf("Fetch without credentials: %v (%s)", err, errdefs.Code(err))
	}

	auth := base64.StdEncoding.EncodeToString([]byte("ada:s3cret"))
	if err := os.MkdirAll(filepath.Join(home, ".docker"), 0o700); err != nil {
		t.Fatal(err)
	}
	config := `{"auths": {"` + reg.Host + `": {"auth": "` + auth + `"}}}`
	if err := os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := f.Fetch(context.Background(), ref)
	if err != nil {
		t.Fatalf("Fetch with the user's docker credentials: %v", err)
	}
	if got.Metadata.ID != "common" {
		t.Errorf("Fetched = %+v", got)
	}
}

// TestResolve_Registry resolves a file's feature and the dependency it
// declares from a real registry.
func TestResolve_Registry(t *testing.T) {
	reg := featuretest.NewRegistry(t)
	reg.Push(t, "devcontainers/features/node:1", withRegistry(nodeFiles, reg.Host))
	reg.Push(t, "devcontainers/features/common:2", commonFiles)
	cfg := &devcontainer.Config{Features: []devcontainer.Feature{{ID: reg.Ref("devcontainers/features/node:1"), Options: map[string]string{"version": "20"}}}}
	plan, err := features.Resolve(context.Background(), fetcher(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range plan.Features {
		got = append(got, describe(f))
	}
	want := []string{reg.Ref("devcontainers/features/common:2") + " zsh=false", reg.Ref("devcontainers/features/node:1") + " version=20"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]features.EnvVar{{Name: "ZSH", Value: "false"}}, plan.Features[0].Env); diff != "" {
		t.Errorf("common's env (-want +got):\n%s", diff)
	}
}

func TestFetch_OCIErrors(t *testing.T) {
	reg := featuretest.NewRegistry(t)
	good := featuretest.Tar(t, commonFiles)
	reg.Push(t, "devcontainers/features/good:1", commonFiles)

	corrupt := featuretest.Files{"devcontainer-feature.json": `{"id": "corrupt"}`, "install.sh": "x"}
	reg.Push(t, "devcontainers/features/corrupt:1", corrupt)
	layer, _, err := v1.SHA256(bytes.NewReader(featuretest.Tar(t, corrupt)))
	if err != nil {
		t.Fatal(err)
	}
	reg.Corrupt(layer)

	reg.PushLayer(t, "devcontainers/features/big:1", good, nil)
	reg.PushLayer(t, "devcontainers/features/climb:1", featuretest.TarEntries(t,
		featuretest.Entry{Name: "./devcontainer-feature.json", Body: `{"id": "climb"}`},
		featuretest.Entry{Name: "./../../../etc/cron.d/evil", Body: "* * * * * root sh -c evil"}), nil)
	reg.PushLayer(t, "devcontainers/features/abs:1", featuretest.TarEntries(t,
		featuretest.Entry{Name: "/etc/profile.d/evil.sh", Body: "evil"}), nil)
	reg.PushLayer(t, "devcontainers/features/nometa:1", featuretest.Tar(t, featuretest.Files{"install.sh": "x"}), nil)
	reg.PushLayer(t, "devcontainers/features/notar:1", []byte(strings.Repeat("garbage!", 200)), nil)
	other := reg.PushBlob(t, "devcontainers/features/image:1", good, "application/vnd.oci.image.layer.v1.tar")
	reg.PushManifest(t, "devcontainers/features/image:1", []v1.Descriptor{other}, nil)
	reg.PushManifest(t, "devcontainers/features/huge:1", nil, map[string]string{"padding": strings.Repeat("x", 5<<20)})
	reg.PushRaw(t, "devcontainers/features/index:1", []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`), "application/vnd.oci.image.index.v1+json")

	// A port nothing listens on.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	_ = lis.Close()

	tests := []struct {
		name  string
		id    string
		lim   features.Limits
		class func(error) bool
		want  string
	}{
		{"missing_feature", reg.Ref("devcontainers/features/nope:1"), features.Limits{}, errdefs.IsNotFound,
			"feature " + reg.Ref("devcontainers/features/nope:1") + ": not found in registry " + reg.Host + " ("},
		{"missing_tag", reg.Ref("devcontainers/features/good:9"), features.Limits{}, errdefs.IsNotFound,
			"feature " + reg.Ref("devcontainers/features/good:9") + ": not found in registry"},
		{"missing_digest", reg.Ref("devcontainers/features/good@sha256:" + strings.Repeat("0", 64)), features.Limits{}, errdefs.IsNotFound, "not found in registry"},
		{"corrupt_layer", reg.Ref("devcontainers/features/corrupt:1"), features.Limits{}, errdefs.IsInvalid,
			"feature " + reg.Ref("devcontainers/features/corrupt:1") + ": its layer is corrupt: the registry served content of digest sha256:"},
		{"oversized", reg.Ref("devcontainers/features/big:1"), features.Limits{Artifact: 1024}, errdefs.IsInvalid,
			"feature " + reg.Ref("devcontainers/features/big:1") + ": its layer is " + strconv.Itoa(len(good)) + " bytes, more than the 1024 bytes a feature may be"},
		{"extracts_too_much", reg.Ref("devcontainers/features/big:1"), features.Limits{Extracted: 64}, errdefs.IsInvalid,
			"the archive's files are larger than the 64 bytes a feature may unpack to"},
		{"climbs_out", reg.Ref("devcontainers/features/climb:1"), features.Limits{}, errdefs.IsInvalid,
			`the archive entry "./../../../etc/cron.d/evil" is unsafe: it climbs out of the feature's folder with ".."`},
		{"absolute", reg.Ref("devcontainers/features/abs:1"), features.Limits{}, errdefs.IsInvalid,
			`the archive entry "/etc/profile.d/evil.sh" is unsafe: it is an absolute path`},
		{"no_metadata", reg.Ref("devcontainers/features/nometa:1"), features.Limits{}, errdefs.IsInvalid,
			"it has no devcontainer-feature.json at the top of its folder; is it a Dev Container Feature?"},
		{"not_a_tar", reg.Ref("devcontainers/features/notar:1"), features.Limits{}, errdefs.IsInvalid, "the archive is not a valid tar"},
		{"not_a_feature", reg.Ref("devcontainers/features/image:1"), features.Limits{}, errdefs.IsInvalid,
			"is not a Dev Container Feature: its manifest has no layer of type application/vnd.devcontainers.layer.v1+tar"},
		{"huge_manifest", reg.Ref("devcontainers/features/huge:1"), features.Limits{}, errdefs.IsInvalid,
			"feature " + reg.Ref("devcontainers/features/huge:1") + ": " + reg.Ref("devcontainers/features/huge:1") + "'s manifest is larger than the 4 MiB a feature's may be"},
		{"index", reg.Ref("devcontainers/features/index:1"), features.Limits{}, errdefs.IsInvalid, "is an image index, not a Dev Container Feature"},
		{"unreachable", closed + "/devcontainers/features/node:1", features.Limits{}, errdefs.IsUnavailable,
			"feature " + closed + "/devcontainers/features/node:1: cannot reach " + closed + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fetcher(t)
			f.Limits = tt.lim
			_, err := f.Fetch(context.Background(), mustRef(t, tt.id))
			if err == nil || !tt.class(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Fetch: %v (%s), want an error containing %q", err, errdefs.Code(err), tt.want)
			}
			// Nothing is left behind in the work folder.
			if entries, _ := os.ReadDir(f.WorkDir); len(entries) != 0 {
				t.Errorf("the work folder holds %v after a failure", entries)
			}
		})
	}
}

func TestFetch_Cache(t *testing.T) {
	reg := featuretest.NewRegistry(t)
	digest := reg.Push(t, "devcontainers/features/common:2", commonFiles)
	cache := t.TempDir()
	fetch := func(id string) *features.Fetched {
		t.Helper()
		f := fetcher(t)
		f.CacheDir = cache
		got, err := f.Fetch(context.Background(), mustRef(t, id))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	tag := reg.Ref("devcontainers/features/common:2")
	fetch(tag)
	blobs, manifests := reg.BlobGets(), reg.ManifestGets()
	if blobs != 1 {
		t.Fatalf("the first fetch got %d blobs, want 1", blobs)
	}
	// A tag is looked up again, its layer is not downloaded again.
	got := fetch(tag)
	if reg.BlobGets() != blobs || reg.ManifestGets() != manifests+1 {
		t.Errorf("second fetch: %d blob and %d manifest requests, want 0 and 1", reg.BlobGets()-blobs, reg.ManifestGets()-manifests)
	}
	if diff := cmp.Diff(files(t, got.Dir), map[string]string{"devcontainer-feature.json": commonFiles["devcontainer-feature.json"], "install.sh": commonFiles["install.sh"]}); diff != "" {
		t.Errorf("files from the cache (-got +want):\n%s", diff)
	}
	// A pinned digest in the cache needs no registry at all.
	pinned := reg.Ref("devcontainers/features/common@" + digest.String())
	fetch(pinned)
	blobs, manifests = reg.BlobGets(), reg.ManifestGets()
	fetch(pinned)
	if reg.BlobGets() != blobs || reg.ManifestGets() != manifests {
		t.Errorf("pinned fetch from the cache: %d blob and %d manifest requests, want none", reg.BlobGets()-blobs, reg.ManifestGets()-manifests)
	}
	// A damaged entry is a miss, fetched again.
	layers, err := filepath.Glob(filepath.Join(cache, "oci", "blobs", "sha256-*"))
	if err != nil || len(layers) != 1 {
		t.Fatalf("cached layers: %v %v, want one", layers, err)
	}
	for _, l := range layers {
		if err := os.WriteFile(l, []byte("damaged"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got = fetch(pinned)
	if reg.BlobGets() != blobs+1 || got.Metadata.ID != "common" {
		t.Errorf("after damage: %d blob requests, want 1; %+v", reg.BlobGets()-blobs, got)
	}
}

func TestFetch_Local(t *testing.T) {
	project := t.TempDir()
	dc := filepath.Join(project, ".devcontainer")
	write := func(rel, body string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dc, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("rust/devcontainer-feature.json", `{"id": "rust", "options": {"profile": {"type": "string", "default": "minimal"}}}`, 0o644)
	write("rust/install.sh", "#!/bin/sh\necho rust\n", 0o755)
	write("rust/scripts/deep/x.sh", "x", 0o644)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dc, "rust", "secret-link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dc, "rust", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	notes := []string{"feature ./rust: left out the FIFO fifo, the link secret-link: features are installed from their regular files and folders only"}
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(dc, "rust", "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatal(err)
		}
		notes = []string{"feature ./rust: left out the FIFO fifo, the device null, the link secret-link: features are installed from their regular files and folders only"}
	}
	// Links that leave the folder, at the feature and above it.
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(dc, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dc, "rust"), filepath.Join(dc, "inner-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(dc, "sub")); err != nil {
		t.Fatal(err)
	}
	write("plain-file", "x", 0o644)
	write("nometa/install.sh", "x", 0o755)
	write("noinstall/devcontainer-feature.json", `{"id": "other-name"}`, 0o644)
	write("big/devcontainer-feature.json", `{"id": "big"}`, 0o644)
	write("big/blob", strings.Repeat("x", 4096), 0o644)

	f := fetcher(t)
	f.Dir = dc

	done := make(chan struct{})
	var got *features.Fetched
	var err error
	go func() {
		defer close(done)
		got, err = f.Fetch(context.Background(), mustRef(t, "./rust"))
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Fetch blocked (on the FIFO?)")
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"devcontainer-feature.json": `{"id": "rust", "options": {"profile": {"type": "string", "default": "minimal"}}}`,
		"install.sh":                "#!/bin/sh\necho rust\n",
		"scripts/":                  "", "scripts/deep/": "", "scripts/deep/x.sh": "x",
	}
	if diff := cmp.Diff(want, files(t, got.Dir)); diff != "" {
		t.Errorf("copied files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(notes, got.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(got.Digest, "sha256:") || !got.HasInstall || got.Metadata.ID != "rust" {
		t.Errorf("Fetched = %+v", got)
	}
	// LocalDigest reads the folder as the copy does, copying nothing,
	// and gives the copy's digest; a change to a file changes it.
	if d, err := f.LocalDigest(mustRef(t, "./rust")); err != nil || d != got.Digest {
		t.Errorf("LocalDigest = %q, %v; want the copy's %q", d, err, got.Digest)
	}
	write("rust/install.sh", "#!/bin/sh\necho changed\n", 0o755)
	if d, err := f.LocalDigest(mustRef(t, "./rust")); err != nil || d == got.Digest {
		t.Errorf("LocalDigest after install.sh changed = %q, %v; want another digest", d, err)
	}
	if err := os.Chmod(filepath.Join(dc, "rust", "install.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, _ := f.LocalDigest(mustRef(t, "./rust"))
	write("rust/install.sh", "#!/bin/sh\necho rust\n", 0o755)
	if err := os.Chmod(filepath.Join(dc, "rust", "install.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if changed == got.Digest {
		t.Errorf("LocalDigest does not change with the execute bit")
	}
	if d, _ := f.LocalDigest(mustRef(t, "./rust")); d != got.Digest {
		t.Errorf("LocalDigest after the file was put back = %q, want %q", d, got.Digest)
	}
	if _, err := f.LocalDigest(mustRef(t, "./nope")); !errdefs.IsNotFound(err) {
		t.Errorf("LocalDigest of a missing folder: %v, want not found", err)
	}

	got, err = f.Fetch(context.Background(), mustRef(t, "./noinstall"))
	if err != nil {
		t.Fatal(err)
	}
	wantNotes := []string{
		`feature ./noinstall: its id is "other-name", but the spec wants a local feature's folder named after it`,
		"feature ./noinstall: it has no install.sh; only its metadata is applied",
	}
	if diff := cmp.Diff(wantNotes, got.Notes); diff != "" || got.HasInstall {
		t.Errorf("notes (-want +got):\n%s", diff)
	}

	tests := []struct {
		name  string
		id    string
		root  string
		lim   features.Limits
		class func(error) bool
		want  string
	}{
		{"link_out", "./escape", "", features.Limits{}, errdefs.IsFailedPrecondition, "feature ./escape: " + filepath.Join(dc, "escape") + " is a symbolic link: hutch follows no link"},
		{"link_inside", "./inner-link", "", features.Limits{}, errdefs.IsFailedPrecondition, "feature ./inner-link: " + filepath.Join(dc, "inner-link") + " is a symbolic link"},
		{"link_above", "./sub/x", "", features.Limits{}, errdefs.IsFailedPrecondition, "feature ./sub/x: " + filepath.Join(dc, "sub") + " is a symbolic link"},
		{"missing", "./nope", "", features.Limits{}, errdefs.IsNotFound, "feature ./nope: " + filepath.Join(dc, "nope") + " does not exist"},
		{"not_a_folder", "./plain-file", "", features.Limits{}, errdefs.IsInvalid, "feature ./plain-file: " + filepath.Join(dc, "plain-file") + " is not a folder"},
		{"no_metadata", "./nometa", "", features.Limits{}, errdefs.IsInvalid, "feature ./nometa: it has no devcontainer-feature.json"},
		{"too_large", "./big", "", features.Limits{Extracted: 1024}, errdefs.IsInvalid, "feature ./big: its files are larger than the 1024 bytes a feature may hold"},
		{"too_many", "./rust", "", features.Limits{Files: 3}, errdefs.IsInvalid, "feature ./rust: its folder holds more than 3 files and folders"},
		{"dir_outside_root", "./rust", t.TempDir(), features.Limits{}, errdefs.IsInvalid, "is not beneath"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fetcher(t)
			f.Dir, f.ProjectRoot, f.Limits = dc, tt.root, tt.lim
			_, err := f.Fetch(context.Background(), mustRef(t, tt.id))
			if err == nil || !tt.class(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Fetch: %v (%s), want an error containing %q", err, errdefs.Code(err), tt.want)
			}
		})
	}

	// .devcontainer itself a link the sandbox planted: with the project
	// as the root, it is refused.
	other := t.TempDir()
	linked := filepath.Join(other, "project")
	if err := os.MkdirAll(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dc, filepath.Join(linked, ".devcontainer")); err != nil {
		t.Fatal(err)
	}
	f = fetcher(t)
	f.Dir, f.ProjectRoot = filepath.Join(linked, ".devcontainer"), linked
	if _, err := f.Fetch(context.Background(), mustRef(t, "./rust")); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("Fetch through a linked .devcontainer: %v", err)
	}
	f.ProjectRoot = project
	f.Dir = dc
	if _, err := f.Fetch(context.Background(), mustRef(t, "./rust")); err != nil {
		t.Errorf("Fetch beneath the project: %v", err)
	}
}

func TestFetch_Tarball(t *testing.T) {
	tgz := featuretest.Gzip(t, featuretest.Tar(t, commonFiles))
	mux := http.NewServeMux()
	mux.HandleFunc("/ok/devcontainer-feature-common.tgz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(tgz) })
	mux.HandleFunc("/forbidden/devcontainer-feature-common.tgz", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) })
	mux.HandleFunc("/broken/devcontainer-feature-common.tgz", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "oops", http.StatusBadGateway) })
	mux.HandleFunc("/plain/devcontainer-feature-common.tgz", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1/ok/devcontainer-feature-common.tgz", http.StatusFound)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)

	f := fetcher(t)
	f.HTTPClient = srv.Client()
	got, err := f.Fetch(context.Background(), mustRef(t, srv.URL+"/ok/devcontainer-feature-common.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tgz)
	if got.Digest != "sha256:"+hex.EncodeToString(sum[:]) || got.Metadata.ID != "common" || !got.HasInstall {
		t.Errorf("Fetched = %+v", got)
	}

	tests := []struct {
		name  string
		path  string
		lim   features.Limits
		class func(error) bool
		want  string
	}{
		{"not_found", "/nope/devcontainer-feature-common.tgz", features.Limits{}, errdefs.IsNotFound, ": not found (404 Not Found); check the URL"},
		{"forbidden", "/forbidden/devcontainer-feature-common.tgz", features.Limits{}, errdefs.IsFailedPrecondition, "the server refused it (403 Forbidden)"},
		{"server_error", "/broken/devcontainer-feature-common.tgz", features.Limits{}, errdefs.IsUnavailable, "the server answered 502 Bad Gateway"},
		{"too_large", "/ok/devcontainer-feature-common.tgz", features.Limits{Artifact: 100}, errdefs.IsInvalid, "the tarball is " + strconv.Itoa(len(tgz)) + " bytes, more than the 100 bytes a feature may be"},
		{"redirect_to_http", "/plain/devcontainer-feature-common.tgz", features.Limits{}, errdefs.IsUnavailable, "refusing a redirect to http://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fetcher(t)
			f.HTTPClient, f.Limits = srv.Client(), tt.lim
			id := srv.URL + tt.path
			_, err := f.Fetch(context.Background(), mustRef(t, id))
			if err == nil || !tt.class(err) || !strings.Contains(err.Error(), "feature "+id) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Fetch: %v (%s), want an error naming the feature and containing %q", err, errdefs.Code(err), tt.want)
			}
		})
	}
}

func TestFetch_NoWorkDir(t *testing.T) {
	if _, err := (&features.Fetcher{}).Fetch(context.Background(), mustRef(t, "./x")); err == nil {
		t.Fatal("Fetch without a WorkDir succeeded")
	}
}
