package features_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// fakeSource serves metadata from memory: the ordering is pure, and its
// tests need no registry. Keys are references with their version
// (ghcr.io/x/f/a:1), local paths (./a) or URLs.
type fakeSource struct {
	meta    map[string]string
	mu      sync.Mutex
	fetched []string
}

func key(r features.Ref) string {
	if r.Kind == features.OCI {
		return r.Reference()
	}
	return r.Resource()
}

func (s *fakeSource) Fetch(_ context.Context, r features.Ref) (*features.Fetched, error) {
	s.mu.Lock()
	s.fetched = append(s.fetched, key(r))
	s.mu.Unlock()
	js, ok := s.meta[key(r)]
	if !ok {
		return nil, errdefs.New(errdefs.ErrNotFound, "feature "+r.ID+": not found")
	}
	if !strings.Contains(js, `"id"`) {
		// Every feature has one; the tables leave it out.
		js = `{"id": "` + r.Name() + `", ` + strings.TrimPrefix(js, "{")
		js = strings.Replace(js, `", }`, `"}`, 1)
	}
	md, err := features.ParseMetadata(r.ID, []byte(js))
	if err != nil {
		return nil, err
	}
	f := &features.Fetched{Dir: "/nonexistent", Metadata: md, HasInstall: true}
	if r.Kind != features.Local {
		sum := sha256.Sum256([]byte(key(r)))
		f.Digest = "sha256:" + hex.EncodeToString(sum[:])
	}
	return f, nil
}

// feat is a devcontainer.json feature written "id" or "id k=v,k=v".
func feat(s string) devcontainer.Feature {
	id, opts, _ := strings.Cut(s, " ")
	f := devcontainer.Feature{ID: id, Options: map[string]string{}}
	for kv := range strings.SplitSeq(opts, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			f.Options[k] = v
		}
	}
	return f
}

// describe writes a resolved feature back the way feat reads it.
func describe(r *features.Resolved) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(r.Options)) {
		kv = append(kv, k+"="+r.Options[k])
	}
	if len(kv) == 0 {
		return r.Ref.ID
	}
	return r.Ref.ID + " " + strings.Join(kv, ",")
}

func TestResolve(t *testing.T) {
	const (
		a = "ghcr.io/x/f/a:1"
		b = "ghcr.io/x/f/b:1"
		c = "ghcr.io/x/f/c:1"
	)
	plain := `{}`
	tests := []struct {
		name     string
		meta     map[string]string
		features []string
		override []string
		want     []string
		notes    []string
		fetched  []string // when set, exactly what was fetched, in order
	}{
		{
			name:     "no_relations_sorted_as_the_spec_does",
			meta:     map[string]string{"ghcr.io/x/f/zeta:1": plain, "ghcr.io/x/f/alpha:1": plain, "./local": `{"id": "local"}`, "https://h/devcontainer-feature-t.tgz": plain, "ghcr.io/a/f/zz:1": plain},
			features: []string{"ghcr.io/x/f/zeta:1", "https://h/devcontainer-feature-t.tgz", "ghcr.io/x/f/alpha:1", "./local", "ghcr.io/a/f/zz:1"},
			want:     []string{"./local", "ghcr.io/a/f/zz:1", "ghcr.io/x/f/alpha:1", "ghcr.io/x/f/zeta:1", "https://h/devcontainer-feature-t.tgz"},
		},
		{
			name:     "retired_bare_name_read_as_the_reference_cli_does",
			meta:     map[string]string{"ghcr.io/devcontainers/features/node:1": plain},
			features: []string{"node"},
			want:     []string{"node"},
			notes:    []string{"Feature node: a bare name is the retired form of the bundled features; it is read as ghcr.io/devcontainers/features/node:1, as the reference CLI reads it. Write that reference instead."},
			fetched:  []string{"ghcr.io/devcontainers/features/node:1"},
		},
		{
			name:     "installs_after",
			meta:     map[string]string{a: `{"installsAfter": ["ghcr.io/x/f/b"]}`, b: plain},
			features: []string{a, b},
			want:     []string{b, a},
		},
		{
			name:     "installs_after_absent_is_ignored_and_not_fetched",
			meta:     map[string]string{a: `{"installsAfter": ["ghcr.io/x/f/b", "not a ref"]}`, c: plain},
			features: []string{c, a},
			want:     []string{a, c},
			notes:    []string{"feature ghcr.io/x/f/a:1: installsAfter not a ref is left out: feature not a ref: the ID holds a space or a control character"},
			fetched:  []string{c, a},
		},
		{
			name:     "depends_on_adds_with_its_options",
			meta:     map[string]string{a: `{"dependsOn": {"ghcr.io/x/f/b:1": {"flag": true, "v": "2"}}}`, b: `{"options": {"flag": {"type": "boolean", "default": false}}}`},
			features: []string{a},
			want:     []string{b + " flag=true,v=2", a},
			notes:    []string{"feature ghcr.io/x/f/b:1: option v is not one the feature declares; it is passed as V, as the reference CLI does"},
		},
		{
			name:     "depends_on_equal_feature_installed_once",
			meta:     map[string]string{a: `{"dependsOn": {"ghcr.io/x/f/b:1": {}}}`, b: plain},
			features: []string{b, a},
			want:     []string{b, a},
			fetched:  []string{b, a},
		},
		{
			name:     "depends_on_other_options_is_another_feature",
			meta:     map[string]string{a: `{"dependsOn": {"ghcr.io/x/f/b:1": {}}}`, b: `{"options": {"o": {"type": "string"}}}`},
			features: []string{a, b + " o=1"},
			want:     []string{b, b + " o=1", a},
		},
		{
			name:     "depends_on_recursive_and_string_form",
			meta:     map[string]string{a: `{"dependsOn": {"ghcr.io/x/f/b:1": "9"}}`, b: `{"options": {"version": {"type": "string"}}, "dependsOn": {"ghcr.io/x/f/c:1": {}}}`, c: plain},
			features: []string{a},
			want:     []string{c, b + " version=9", a},
		},
		{
			name:     "override",
			meta:     map[string]string{a: plain, b: plain, c: plain},
			features: []string{a, b, c},
			override: []string{"ghcr.io/x/f/c", "ghcr.io/x/f/b:1"},
			want:     []string{c, b, a},
		},
		{
			name:     "override_cannot_pull_ahead_of_dependencies",
			meta:     map[string]string{a: plain, b: plain, c: `{"dependsOn": {"ghcr.io/x/f/a:1": {}}}`},
			features: []string{b, c, a},
			override: []string{"ghcr.io/x/f/c"},
			want:     []string{a, b, c},
		},
		{
			// b and c are both ready in the second round; c goes first,
			// and b in a round of its own.
			name:     "override_pulls_forward_as_soon_as_ready",
			meta:     map[string]string{a: plain, b: `{"dependsOn": {"ghcr.io/x/f/a:1": {}}}`, c: `{"dependsOn": {"ghcr.io/x/f/a:1": {}}}`},
			features: []string{b, c},
			override: []string{"ghcr.io/x/f/c"},
			want:     []string{a, c, b},
		},
		{
			// Without the override the same features go by name.
			name:     "same_without_override",
			meta:     map[string]string{a: plain, b: `{"dependsOn": {"ghcr.io/x/f/a:1": {}}}`, c: `{"dependsOn": {"ghcr.io/x/f/a:1": {}}}`},
			features: []string{c, b},
			want:     []string{a, b, c},
		},
		{
			name:     "override_of_what_is_not_installed",
			meta:     map[string]string{a: plain},
			features: []string{a},
			override: []string{"ghcr.io/x/f/zzz", "./nope", "bad"},
			want:     []string{a},
			notes: []string{
				"overrideFeatureInstallOrder names ghcr.io/x/f/zzz, which is not installed; it is left out",
				"overrideFeatureInstallOrder names ./nope, which is not installed; it is left out",
				"overrideFeatureInstallOrder bad is left out: feature bad: a bare name is the retired form of the bundled features; write the OCI reference, e.g. ghcr.io/devcontainers/features/bad:1",
			},
		},
		{
			name:     "local_features",
			meta:     map[string]string{"./b": `{"id": "b", "installsAfter": ["./a"]}`, "./a": `{"id": "a"}`, "./dep": `{"id": "dep"}`, a: `{"dependsOn": {"./dep": {}}}`},
			features: []string{"./b", "./a", a},
			want:     []string{"./a", "./dep", "./b", a},
		},
		{
			name:     "legacy_ids",
			meta:     map[string]string{"ghcr.io/x/f/new:1": `{"id": "new", "legacyIds": ["old"]}`, a: `{"installsAfter": ["ghcr.io/x/f/old"]}`},
			features: []string{a, "ghcr.io/x/f/new:1"},
			want:     []string{"ghcr.io/x/f/new:1", a},
		},
		{
			name:     "legacy_ids_in_override",
			meta:     map[string]string{"ghcr.io/x/f/new:1": `{"id": "new", "legacyIds": ["old"]}`, a: plain},
			features: []string{a, "ghcr.io/x/f/new:1"},
			override: []string{"ghcr.io/x/f/old"},
			want:     []string{"ghcr.io/x/f/new:1", a},
		},
		{
			name:     "two_versions_by_tag",
			meta:     map[string]string{"ghcr.io/x/f/node:2": plain, "ghcr.io/x/f/node:10": plain, "ghcr.io/x/f/node:1": plain},
			features: []string{"ghcr.io/x/f/node:2", "ghcr.io/x/f/node:10", "ghcr.io/x/f/node:1"},
			want:     []string{"ghcr.io/x/f/node:1", "ghcr.io/x/f/node:10", "ghcr.io/x/f/node:2"},
		},
		{
			name:     "options_order_ties",
			meta:     map[string]string{a: plain},
			features: []string{a + " z=1", a + " a=2,b=1", a + " a=1"},
			want:     []string{a + " a=1", a + " z=1", a + " a=2,b=1"},
			notes: []string{
				"feature ghcr.io/x/f/a:1: option z is not one the feature declares; it is passed as Z, as the reference CLI does",
				"feature ghcr.io/x/f/a:1: option a is not one the feature declares; it is passed as A, as the reference CLI does",
				"feature ghcr.io/x/f/a:1: option b is not one the feature declares; it is passed as B, as the reference CLI does",
				"feature ghcr.io/x/f/a:1: option a is not one the feature declares; it is passed as A, as the reference CLI does",
			},
			fetched: []string{a},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{meta: tt.meta}
			cfg := &devcontainer.Config{OverrideFeatureInstallOrder: tt.override}
			for _, f := range tt.features {
				cfg.Features = append(cfg.Features, feat(f))
			}
			plan, err := features.Resolve(context.Background(), src, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range plan.Features {
				got = append(got, describe(r))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.notes, plan.Notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			if tt.fetched != nil {
				if diff := cmp.Diff(tt.fetched, src.fetched); diff != "" {
					t.Errorf("fetched (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestResolve_Details(t *testing.T) {
	src := &fakeSource{meta: map[string]string{
		"ghcr.io/x/f/app:1": `{"id": "app", "options": {"version": {"type": "string", "default": "lts"}}, "dependsOn": {"ghcr.io/x/f/lib:1": {}},
			"postCreateCommand": "app setup", "onCreateCommand": ["app", "init"]}`,
		"ghcr.io/x/f/lib:1": `{"id": "lib", "postCreateCommand": {"one": "lib one", "two": "lib two"}}`,
	}}
	cfg := &devcontainer.Config{Features: []devcontainer.Feature{{ID: "ghcr.io/x/f/app:1", Options: map[string]string{"version": "20"}}}}
	plan, err := features.Resolve(context.Background(), src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Features) != 2 {
		t.Fatalf("%d features, want 2", len(plan.Features))
	}
	lib, app := plan.Features[0], plan.Features[1]
	if lib.RequiredBy != "ghcr.io/x/f/app:1" || app.RequiredBy != "" {
		t.Errorf("RequiredBy = %q, %q", lib.RequiredBy, app.RequiredBy)
	}
	if diff := cmp.Diff([]features.EnvVar{{Name: "VERSION", Value: "20"}}, app.Env); diff != "" {
		t.Errorf("app env (-want +got):\n%s", diff)
	}
	want := map[string][]devcontainer.Lifecycle{
		"onCreateCommand": {{Origin: "feature ghcr.io/x/f/app:1", Commands: []devcontainer.Command{{Argv: []string{"app", "init"}}}}},
		"postCreateCommand": {
			{Origin: "feature ghcr.io/x/f/lib:1", Commands: []devcontainer.Command{{Name: "one", Shell: "lib one"}, {Name: "two", Shell: "lib two"}}},
			{Origin: "feature ghcr.io/x/f/app:1", Commands: []devcontainer.Command{{Shell: "app setup"}}},
		},
	}
	if diff := cmp.Diff(want, plan.Lifecycle()); diff != "" {
		t.Errorf("Lifecycle (-want +got):\n%s", diff)
	}
}

func TestResolve_Errors(t *testing.T) {
	tests := []struct {
		name     string
		meta     map[string]string
		features []string
		class    func(error) bool
		want     string
	}{
		{
			name:     "cycle",
			meta:     map[string]string{"ghcr.io/x/f/a:1": `{"dependsOn": {"ghcr.io/x/f/b:1": {}}}`, "ghcr.io/x/f/b:1": `{"dependsOn": {"ghcr.io/x/f/a:1": {}}}`, "ghcr.io/x/f/c:1": `{}`},
			features: []string{"ghcr.io/x/f/a:1", "ghcr.io/x/f/c:1"},
			class:    errdefs.IsInvalid,
			want:     "features depend on each other in a cycle, so no install order exists: ghcr.io/x/f/a:1 waits for ghcr.io/x/f/b:1 (dependsOn); ghcr.io/x/f/b:1 waits for ghcr.io/x/f/a:1 (dependsOn).",
		},
		{
			name:     "soft_cycle",
			meta:     map[string]string{"ghcr.io/x/f/a:1": `{"installsAfter": ["ghcr.io/x/f/b"]}`, "ghcr.io/x/f/b:1": `{"installsAfter": ["ghcr.io/x/f/a"]}`},
			features: []string{"ghcr.io/x/f/a:1", "ghcr.io/x/f/b:1"},
			class:    errdefs.IsInvalid,
			want:     "ghcr.io/x/f/a:1 waits for ghcr.io/x/f/b:1 (installsAfter); ghcr.io/x/f/b:1 waits for ghcr.io/x/f/a:1 (installsAfter)",
		},
		{
			name:     "self",
			meta:     map[string]string{"ghcr.io/x/f/a:1": `{"dependsOn": {"ghcr.io/x/f/a:1": {"o": "1"}}}`},
			features: []string{"ghcr.io/x/f/a:1 o=1"},
			class:    errdefs.IsInvalid,
			want:     "ghcr.io/x/f/a:1 (o=1) waits for ghcr.io/x/f/a:1 (o=1) (dependsOn)",
		},
		{
			name:     "missing",
			meta:     map[string]string{},
			features: []string{"ghcr.io/x/f/a:1"},
			class:    errdefs.IsNotFound,
			want:     "feature ghcr.io/x/f/a:1: not found",
		},
		{
			name:     "missing_dependency",
			meta:     map[string]string{"ghcr.io/x/f/a:1": `{"dependsOn": {"ghcr.io/x/f/gone:1": {}}}`},
			features: []string{"ghcr.io/x/f/a:1"},
			class:    errdefs.IsNotFound,
			want:     "feature ghcr.io/x/f/gone:1: not found (a dependency of feature ghcr.io/x/f/a:1)",
		},
		{
			name:     "bad_dependency_ref",
			meta:     map[string]string{"ghcr.io/x/f/a:1": `{"dependsOn": {"../escape": {}}}`},
			features: []string{"ghcr.io/x/f/a:1"},
			class:    errdefs.IsInvalid,
			want:     "(in the dependsOn of feature ghcr.io/x/f/a:1)",
		},
		{
			name:     "bad_ref",
			features: []string{"maven"},
			class:    errdefs.IsInvalid,
			want:     "feature maven: a bare name",
		},
		{
			name:     "option_with_nul",
			meta:     map[string]string{"ghcr.io/x/f/a:1": `{}`},
			features: []string{"ghcr.io/x/f/a:1 o=\x00"},
			class:    errdefs.IsInvalid,
			want:     "feature ghcr.io/x/f/a:1: option o holds a NUL byte",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &devcontainer.Config{}
			for _, f := range tt.features {
				cfg.Features = append(cfg.Features, feat(f))
			}
			_, err := features.Resolve(context.Background(), &fakeSource{meta: tt.meta}, cfg)
			if err == nil || !tt.class(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Resolve: %v (%s), want an error containing %q", err, errdefs.Code(err), tt.want)
			}
		})
	}
}

// TestResolve_Bounded stops a dependsOn chain that never ends.
func TestResolve_Bounded(t *testing.T) {
	meta := map[string]string{}
	for i := range 200 {
		meta[fmt.Sprintf("ghcr.io/x/f/f%d:1", i)] = fmt.Sprintf(`{"dependsOn": {"ghcr.io/x/f/f%d:1": {}}}`, i+1)
	}
	cfg := &devcontainer.Config{Features: []devcontainer.Feature{{ID: "ghcr.io/x/f/f0:1"}}}
	_, err := features.Resolve(context.Background(), &fakeSource{meta: meta}, cfg)
	if err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "more than 100 features to install") {
		t.Fatalf("Resolve: %v", err)
	}
}
