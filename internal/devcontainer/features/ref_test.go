package features_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		id           string
		want         features.Ref // ID is filled in
		name         string
		resource     string
		reference    string
		wantErr      string
		wantNotFound bool
	}{
		{
			id:        "ghcr.io/devcontainers/features/node:1",
			want:      features.Ref{Kind: features.OCI, Registry: "ghcr.io", Repository: "devcontainers/features/node", Tag: "1"},
			name:      "node",
			resource:  "ghcr.io/devcontainers/features/node",
			reference: "ghcr.io/devcontainers/features/node:1",
		},
		{
			id:        "ghcr.io/devcontainers/features/node",
			want:      features.Ref{Kind: features.OCI, Registry: "ghcr.io", Repository: "devcontainers/features/node", Tag: "latest"},
			name:      "node",
			resource:  "ghcr.io/devcontainers/features/node",
			reference: "ghcr.io/devcontainers/features/node:latest",
		},
		{
			id:        "GHCR.io/DevContainers/Features/Go:1.2.3",
			want:      features.Ref{Kind: features.OCI, Registry: "ghcr.io", Repository: "devcontainers/features/go", Tag: "1.2.3"},
			name:      "go",
			resource:  "ghcr.io/devcontainers/features/go",
			reference: "ghcr.io/devcontainers/features/go:1.2.3",
		},
		{
			id:        "127.0.0.1:5000/devcontainers/features/node:1",
			want:      features.Ref{Kind: features.OCI, Registry: "127.0.0.1:5000", Repository: "devcontainers/features/node", Tag: "1"},
			name:      "node",
			resource:  "127.0.0.1:5000/devcontainers/features/node",
			reference: "127.0.0.1:5000/devcontainers/features/node:1",
		},
		{
			id:        "localhost:5000/a/b",
			want:      features.Ref{Kind: features.OCI, Registry: "localhost:5000", Repository: "a/b", Tag: "latest"},
			name:      "b",
			resource:  "localhost:5000/a/b",
			reference: "localhost:5000/a/b:latest",
		},
		{
			id:        "ghcr.io/devcontainers/features/node@sha256:" + strings.Repeat("ab", 32),
			want:      features.Ref{Kind: features.OCI, Registry: "ghcr.io", Repository: "devcontainers/features/node", Digest: "sha256:" + strings.Repeat("ab", 32)},
			name:      "node",
			resource:  "ghcr.io/devcontainers/features/node",
			reference: "ghcr.io/devcontainers/features/node@sha256:" + strings.Repeat("ab", 32),
		},
		{
			id:        "ghcr.io/devcontainers/features/node:1@sha256:" + strings.Repeat("ab", 32),
			want:      features.Ref{Kind: features.OCI, Registry: "ghcr.io", Repository: "devcontainers/features/node", Digest: "sha256:" + strings.Repeat("ab", 32)},
			name:      "node",
			resource:  "ghcr.io/devcontainers/features/node",
			reference: "ghcr.io/devcontainers/features/node@sha256:" + strings.Repeat("ab", 32),
		},
		{
			id:        "registry.example.com:8443/team/tools/deep/feature-x:2",
			want:      features.Ref{Kind: features.OCI, Registry: "registry.example.com:8443", Repository: "team/tools/deep/feature-x", Tag: "2"},
			name:      "feature-x",
			resource:  "registry.example.com:8443/team/tools/deep/feature-x",
			reference: "registry.example.com:8443/team/tools/deep/feature-x:2",
		},
		{
			// The bare names once bundled with the editor are read as
			// the reference CLI reads them.
			id:        "docker-in-docker",
			want:      features.Ref{Kind: features.OCI, Registry: "ghcr.io", Repository: "devcontainers/features/docker-in-docker", Tag: "1", Retired: true},
			name:      "docker-in-docker",
			resource:  "ghcr.io/devcontainers/features/docker-in-docker",
			reference: "ghcr.io/devcontainers/features/docker-in-docker:1",
		},
		{
			id:        "golang",
			want:      features.Ref{Kind: features.OCI, Registry: "ghcr.io", Repository: "devcontainers/features/go", Tag: "1", Retired: true},
			name:      "go",
			resource:  "ghcr.io/devcontainers/features/go",
			reference: "ghcr.io/devcontainers/features/go:1",
		},
		{
			id:       "./rust",
			want:     features.Ref{Kind: features.Local, Path: "rust"},
			name:     "rust",
			resource: "./rust",
		},
		{
			id:       "./local-features/./my_feature/",
			want:     features.Ref{Kind: features.Local, Path: "local-features/my_feature"},
			name:     "my_feature",
			resource: "./local-features/my_feature",
		},
		{
			id:       "https://github.com/user/repo/releases/download/v1/devcontainer-feature-go.tgz",
			want:     features.Ref{Kind: features.Tarball, URL: "https://github.com/user/repo/releases/download/v1/devcontainer-feature-go.tgz"},
			name:     "go",
			resource: "https://github.com/user/repo/releases/download/v1/devcontainer-feature-go.tgz",
		},
		{id: "", wantErr: "empty ID"},
		{id: "../rust", wantErr: "feature ../rust: a local feature must be inside the folder of devcontainer.json"},
		{id: "./a/../../b", wantErr: `"..".leaves it`},
		{id: "./a/../b", wantErr: `"..".leaves it`},
		{id: "..", wantErr: "must be inside"},
		{id: ".", wantErr: "not that folder itself"},
		{id: "./", wantErr: "not that folder itself"},
		{id: "/home/ada/feature", wantErr: "feature /home/ada/feature: a local feature may not be named by an absolute path"},
		{id: "http://example.com/devcontainer-feature-go.tgz", wantErr: "only https URLs of feature tarballs are fetched, not http"},
		{id: "file:///etc/devcontainer-feature-x.tgz", wantErr: "not file"},
		{id: "https://example.com/feature.tgz", wantErr: "must be named devcontainer-feature-<name>.tgz"},
		{id: "https://user:secret@example.com/devcontainer-feature-go.tgz", wantErr: "carries credentials"},
		{id: "maven", wantErr: "feature maven: a bare name is the retired form of the bundled features, and maven is now an option of ghcr.io/devcontainers/features/java:1; use that feature and its option"},
		{id: "fish", wantErr: "feature fish: a bare name is the retired form of the bundled features; write the OCI reference, e.g. ghcr.io/devcontainers/features/fish:1"},
		{id: "node:1", wantErr: "feature node:1: a bare name is the retired form"},
		{id: "devcontainers/features/node:1", wantErr: `"devcontainers" is not a registry`},
		{id: "ghcr.io/node:1", wantErr: "needs a namespace"},
		{id: "ghcr.io/devcontainers/features/node@sha256:abc", wantErr: "@sha256:<64 hex digits>"},
		{id: "ghcr.io/devcontainers/features/node@md5:" + strings.Repeat("ab", 16), wantErr: "@sha256:"},
		{id: "ghcr.io/devcontainers/features/node:-1", wantErr: `"-1" is not a valid tag`},
		{id: "ghcr.io/devcontainers/features/no__de:1", wantErr: "not a valid repository name"},
		{id: "ghcr.io/devcontainers//node:1", wantErr: "not a valid repository name"},
		{id: "ghcr.io/devcontainers/features/node 1", wantErr: "space or a control character"},
		{id: "ghcr.io/devcontainers/features/node\n:1", wantErr: "space or a control character"},
		{id: "gh_cr.io/devcontainers/features/node:1", wantErr: "not a valid registry host"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got, err := features.ParseRef(tt.id)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseRef(%q) = %+v, want an error", tt.id, got)
				}
				if !errdefs.IsInvalid(err) {
					t.Errorf("error class %s, want invalid", errdefs.Code(err))
				}
				if !matches(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRef(%q): %v", tt.id, err)
			}
			tt.want.ID = tt.id
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseRef(%q) (-want +got):\n%s", tt.id, diff)
			}
			if got.Name() != tt.name {
				t.Errorf("Name() = %q, want %q", got.Name(), tt.name)
			}
			if got.Resource() != tt.resource {
				t.Errorf("Resource() = %q, want %q", got.Resource(), tt.resource)
			}
			if tt.reference != "" && got.Reference() != tt.reference {
				t.Errorf("Reference() = %q, want %q", got.Reference(), tt.reference)
			}
		})
	}
}

// matches reports whether s contains want, where a "." in want stands for
// any one character (to spare escaping quotes in the table).
func matches(s, want string) bool {
	for i := 0; i+len(want) <= len(s); i++ {
		ok := true
		for j := 0; j < len(want); j++ {
			if want[j] != '.' && want[j] != s[i+j] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"ghcr.io/a/b:1", "./x", "https://h/devcontainer-feature-x.tgz", "a@sha256:" + strings.Repeat("0", 64), "../x", "/x", "h:1/a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		r, err := features.ParseRef(id)
		if err != nil {
			if !errdefs.IsInvalid(err) {
				t.Fatalf("ParseRef(%q): error of class %s", id, errdefs.Code(err))
			}
			return
		}
		switch r.Kind {
		case features.Local:
			// A local path never climbs out nor is absolute.
			if strings.HasPrefix(r.Path, "/") || r.Path == ".." || strings.HasPrefix(r.Path, "../") || strings.Contains(r.Path, "/../") {
				t.Fatalf("ParseRef(%q).Path = %q", id, r.Path)
			}
		case features.OCI:
			if r.Registry == "" || r.Repository == "" || (r.Tag == "") == (r.Digest == "") {
				t.Fatalf("ParseRef(%q) = %+v", id, r)
			}
		case features.Tarball:
			if !strings.HasPrefix(r.URL, "https://") {
				t.Fatalf("ParseRef(%q).URL = %q", id, r.URL)
			}
		default:
			t.Fatalf("ParseRef(%q): kind %v", id, r.Kind)
		}
	})
}
