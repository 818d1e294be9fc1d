package kubeagent_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/kubeagent"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// standIn writes data as a file and returns it as an agent binary; Write
// does not care whether it is an executable.
func standIn(t *testing.T, data []byte) agentbin.Binary {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hutch")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return agentbin.Binary{Path: path, SHA256: hex.EncodeToString(sum[:])}
}

func TestRef(t *testing.T) {
	b := agentbin.Binary{SHA256: "0123456789abcdef" + strings.Repeat("f", 48)}
	tests := []struct {
		name, repository, want string
	}{
		{"default", "", "hutch-agent:sha-0123456789abcdef"},
		{"registry", "registry.example:5000/team/hutch-agent", "registry.example:5000/team/hutch-agent:sha-0123456789abcdef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kubeagent.Ref(tt.repository, b); got != tt.want {
				t.Errorf("Ref(%q) = %q, want %q", tt.repository, got, tt.want)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	content := []byte("#!/bin/sh\necho not really hutch\n")
	b := standIn(t, content)
	ref := kubeagent.Ref("", b)
	path := filepath.Join(t.TempDir(), "agent.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := kubeagent.Write(f, b, ref); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatalf("LoadManifest: %v", err)
	}
	if len(m) != 1 || !cmp.Equal(m[0].RepoTags, []string{ref}) {
		t.Fatalf("manifest.json = %+v, want one image tagged %s", m, ref)
	}
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("ImageFromPath: %v", err)
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if diff := cmp.Diff([]string{"/hutch"}, cfg.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{kubeagent.LabelSHA256: b.SHA256}, cfg.Config.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatalf("reading the layer: %v", err)
	}
	if hdr.Name != "hutch" || hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o555 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(time.Unix(0, 0)) {
		t.Errorf("layer entry %q type %c mode %o owner %d:%d mtime %v; want hutch, a regular file, 0555, 0:0, the epoch",
			hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime)
	}
	got, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Errorf("/hutch holds %q, want %q", got, content)
	}
	if hdr, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("the layer holds more than /hutch: next entry %v, error %v", hdr, err)
	}
}

func TestWrite_Deterministic(t *testing.T) {
	b := standIn(t, []byte("the same binary"))
	var first, second bytes.Buffer
	if err := kubeagent.Write(&first, b, kubeagent.Ref("", b)); err != nil {
		t.Fatal(err)
	}
	if err := kubeagent.Write(&second, b, kubeagent.Ref("", b)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("two archives of one binary differ")
	}
}

func TestWrite_Refusals(t *testing.T) {
	b := standIn(t, []byte("located"))
	tests := []struct {
		name  string
		setup func(t *testing.T) agentbin.Binary
		ref   string
		class error
		text  string
	}{
		{
			name: "binary_changed",
			setup: func(t *testing.T) agentbin.Binary {
				changed := standIn(t, []byte("located"))
				if err := os.WriteFile(changed.Path, []byte("rebuilt"), 0o755); err != nil {
					t.Fatal(err)
				}
				return changed
			},
			ref:   "hutch-agent:sha-x",
			class: errdefs.ErrFailedPrecondition,
			text:  "changed since hutch located it",
		},
		{name: "no_tag", ref: "hutch-agent", class: errdefs.ErrInvalid, text: "has no tag"},
		{name: "bad_reference", ref: "Hutch Agent:x", class: errdefs.ErrInvalid, text: "is not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := b
			if tt.setup != nil {
				bin = tt.setup(t)
			}
			var out bytes.Buffer
			err := kubeagent.Write(&out, bin, tt.ref)
			if !errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("Write = %v, want a %v error containing %q", err, tt.class, tt.text)
			}
			if out.Len() != 0 {
				t.Errorf("a refused Write wrote %d bytes", out.Len())
			}
		})
	}
}

// TestWrite_DockerLoad loads the archive of a real static hutch into the
// engine (what `docker load -i` does) and runs the image the way a kube:
// pod's init container does: the right digest installs, another one is
// refused with the fix.
func TestWrite_DockerLoad(t *testing.T) {
	cli := testenv.Docker(t)
	b, err := agentbin.Locate(testenv.HutchBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := kubeagent.Ref(testenv.Name(t), b)
	var archive bytes.Buffer
	if err := kubeagent.Write(&archive, b, ref); err != nil {
		t.Fatalf("Write: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if _, err := cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Errorf("removing %s: %v", ref, err)
		}
	})
	if err := testenv.LoadImage(ctx, cli, &archive); err != nil {
		t.Fatalf("loading the archive: %v", err)
	}
	inspect, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatalf("inspecting %s after the load: %v", ref, err)
	}
	if inspect.Os != "linux" || inspect.Architecture != runtime.GOARCH {
		t.Errorf("engine sees %s/%s, want linux/%s", inspect.Os, inspect.Architecture, runtime.GOARCH)
	}
	if inspect.Config == nil || !cmp.Equal(inspect.Config.Entrypoint, []string{"/hutch"}) || inspect.Config.Labels[kubeagent.LabelSHA256] != b.SHA256 {
		t.Errorf("engine sees config %+v, want entrypoint /hutch and label %s=%s", inspect.Config, kubeagent.LabelSHA256, b.SHA256)
	}

	label := "org.hutchsandbox.test=" + testenv.Name(t)
	testenv.CleanupContainers(t, cli, label)
	t.Run("install", func(t *testing.T) {
		stdout, stderr, code := testenv.RunContainer(t, cli, ref, label, "agent", "--install-to", "/hutch-bin/hutch", "--sha256", b.SHA256)
		if code != 0 || stdout != "" || stderr != "" {
			t.Errorf("install exited %d, stdout %q, stderr %q; want 0 and no output", code, stdout, stderr)
		}
	})
	t.Run("stale_image", func(t *testing.T) {
		other := strings.Repeat("0", 64)
		_, stderr, code := testenv.RunContainer(t, cli, ref, label, "agent", "--install-to", "/hutch-bin/hutch", "--sha256", other)
		want := "hutch: This agent image holds hutch " + b.SHA256[:16] + ", but the daemon runs 0000000000000000: build the matching image with `hutch kube agent-image` and load or push it\n"
		if code != 1 || stderr != want {
			t.Errorf("install of another digest exited %d, stderr %q; want 1, %q", code, stderr, want)
		}
	})
}
