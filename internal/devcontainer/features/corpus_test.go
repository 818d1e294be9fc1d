package features_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features/featuretest"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

const (
	corpusDir  = "../testdata/corpus"
	standIns   = "../testdata/features/ghcr.io/devcontainers/features"
	ghcrPrefix = "ghcr.io/devcontainers/features/"
)

// parseCorpus parses the devcontainer.json of the corpus entry in dir.
func parseCorpus(t *testing.T, dir string) *devcontainer.Config {
	t.Helper()
	rel, ok := devcontainer.Find(func(rel string) bool {
		_, err := os.Stat(filepath.Join(dir, rel))
		return err == nil
	})
	if !ok {
		t.Fatalf("%s has no devcontainer.json", dir)
	}
	path := filepath.Join(dir, rel)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := devcontainer.Parse(path, data, devcontainer.Vars{LocalWorkspaceFolder: dir})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestResolve_Corpus resolves the features of the real devcontainer.json
// files in the corpus, from the stand-ins of their ghcr.io features (the
// published metadata) in the in-process registry, reached as ghcr.io,
// and lays out their build contexts. The orders are the spec's, worked
// out by hand: installsAfter of features that are not installed
// (common-utils, oryx, ./local-features/go) is dropped, each round is
// sorted local folders first, then by name; nextjs's ./rust waits for
// the ghcr.io rust its dependsOn adds.
func TestResolve_Corpus(t *testing.T) {
	reg := featuretest.NewRegistry(t)
	entries, err := os.ReadDir(standIns)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		// One folder answers every major the corpus asks.
		for _, tag := range []string{"1", "2", "latest"} {
			reg.PushDir(t, "devcontainers/features/"+e.Name()+":"+tag, filepath.Join(standIns, e.Name()))
		}
	}
	g := func(names ...string) []string {
		for i, n := range names {
			if !strings.HasPrefix(n, "./") {
				names[i] = ghcrPrefix + n
			}
		}
		return names
	}
	tests := map[string]struct {
		want    []string
		wantErr string
		// patch adds files to a copy of the entry before resolving.
		patch map[string]string
	}{
		"dotnet-runtime":  {want: g("github-cli:1")},
		"gemini-cli":      {want: g("common-utils:2", "github-cli:1", "docker-in-docker:2", "node:1")},
		"kubernetes-helm": {want: g("./local-features/copy-kube-config", "docker-from-docker:1", "kubectl-helm-minikube:1")},
		// The corpus lacks etcd's metadata (see its SOURCE).
		"kubernetes": {wantErr: "feature ./local-features/etcd: it has no devcontainer-feature.json at the top of its folder"},
		"kubernetes+etcd": {
			patch: map[string]string{".devcontainer/local-features/etcd/devcontainer-feature.json": `{"id": "etcd", "version": "1.0.0", "name": "etcd"}`},
			want: g("./local-features/etcd", "./local-features/kubectl-kind", "./local-features/kubetest2",
				"docker-in-docker:2", "github-cli:1", "go:1", "kubectl-helm-minikube:1", "python:1", "sshd:1"),
		},
		"llvm":       {want: g("git:1", "github-cli:1")},
		"mastodon":   {want: g("sshd:1")},
		"nextjs":     {want: g("./headless-browser", "./node-extras", "git:1", "github-cli:1", "rust:1", "./rust")},
		"puppeteer":  {want: g("docker-in-docker:1", "node:1")},
		"rails":      {want: g("github-cli:1", "node:1")},
		"typescript": {want: g("go:1")},
		// The retired bare names, read as ghcr.io/devcontainers/features/<name>:1
		// (a note each); the plan keeps the names the file wrote.
		"bicep":            {want: []string{"azure-cli", "dotnet", "github-cli", "node"}},
		"spring-petclinic": {want: []string{"docker-in-docker"}},

		// One feature each.
		"anthropic-sdk-typescript": {want: g("node:1")},
		"coder":                    {want: g("docker-in-docker:2")},
		"devcontainers-cli":        {want: g("docker-in-docker:2")},
		"gh-cli":                   {want: g("sshd:1")},
	}

	// Every corpus entry with features is here.
	corpus, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range corpus {
		if e.IsDir() && len(parseCorpus(t, filepath.Join(corpusDir, e.Name())).Features) > 0 {
			if _, ok := tests[e.Name()]; !ok {
				t.Errorf("corpus entry %s has features and no row here", e.Name())
			}
		}
	}

	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir, err := filepath.Abs(filepath.Join(corpusDir, strings.TrimSuffix(name, "+etcd")))
			if err != nil {
				t.Fatal(err)
			}
			if tt.patch != nil {
				cp := t.TempDir()
				if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
					t.Fatal(err)
				}
				for rel, body := range tt.patch {
					if err := os.WriteFile(filepath.Join(cp, rel), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				dir = cp
			}
			cfg := parseCorpus(t, dir)
			f := &features.Fetcher{Dir: cfg.Dir, ProjectRoot: dir, WorkDir: t.TempDir(), Keychain: authn.NewMultiKeychain(), RegistryTransport: reg.Transport()}
			plan, err := features.Resolve(context.Background(), f, cfg)
			if tt.wantErr != "" {
				if err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve: %v, want an invalid error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range plan.Features {
				got = append(got, r.Ref.ID)
				if r.Ref.Kind == features.OCI && !strings.HasPrefix(r.Digest, "sha256:") {
					t.Errorf("%s has no digest", r.Ref.ID)
				}
				if r.Ref.Retired && !slices.ContainsFunc(plan.Notes, func(n string) bool {
					return strings.Contains(n, "Feature "+r.Ref.ID+": a bare name is the retired form") && strings.Contains(n, r.Ref.Reference())
				}) {
					t.Errorf("no note says the retired name %s is read as %s; notes: %q", r.Ref.ID, r.Ref.Reference(), plan.Notes)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("install order (-want +got):\n%s\nnotes: %q", diff, plan.Notes)
			}
			if _, err := features.WriteContext(t.TempDir(), plan.Features, features.Build{Base: "mcr.microsoft.com/devcontainers/base:bookworm", Users: features.Users{RemoteUser: cfg.RemoteUser}}); err != nil {
				t.Errorf("WriteContext: %v", err)
			}
		})
	}
}
