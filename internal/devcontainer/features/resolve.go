package features

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Source gets features. *Fetcher is the real one; tests give their own.
type Source interface {
	// Fetch gets the feature ref names. Its error names the feature.
	Fetch(ctx context.Context, ref Ref) (*Fetched, error)
}

// Fetched is a feature's content.
type Fetched struct {
	// Dir is the folder holding the feature's files, which hutch owns.
	Dir string
	// Digest identifies the content: the manifest digest of an OCI
	// feature, sha256:<hex> of a tarball, and of a local folder the
	// digest of the copy (see LocalDigest).
	Digest   string
	Metadata *Metadata
	// HasInstall is false when the feature has no install.sh: it is
	// installed by its metadata alone.
	HasInstall bool
	// Notes are advisories about what fetching left out.
	Notes []string
}

// Resolved is a feature of an install plan.
type Resolved struct {
	Ref Ref
	// Options are the options as devcontainer.json, or the dependsOn that
	// required the feature, gives them.
	Options map[string]string
	// RequiredBy is the ID of the feature whose dependsOn added this
	// one; "" for a feature of devcontainer.json.
	RequiredBy string
	*Fetched
	// Env is the feature's options as the environment install.sh gets
	// (OptionEnv), the spec's user variables aside.
	Env []EnvVar
}

// Plan is the features to install, in install order.
type Plan struct {
	Features []*Resolved
	// Notes are advisories: entries of the features' metadata that could
	// not be used, options they do not declare, files fetching left out,
	// installsAfter and overrideFeatureInstallOrder entries that matched
	// nothing.
	Notes []string
}

// maxFeatures bounds the features one devcontainer.json can bring in,
// dependencies included: a feature's dependsOn is the publisher's to
// write, and a chain of ever-different options would never end.
const maxFeatures = 100

// Resolve fetches cfg's features from src, adds the features their
// dependsOn requires (recursively, each with the options dependsOn gives
// it) and orders them all as the spec's dependency algorithm does:
// dependsOn and installsAfter first (installsAfter only among features
// that are installed anyway), then overrideFeatureInstallOrder's features
// as early as their dependencies allow, in its order, then the spec's
// stable sort. A feature listed twice with the same content and options
// is installed once.
//
// A feature that cannot be fetched fails it with src's error (naming the
// feature and, for a dependency, what required it); so does a dependency
// cycle (class errdefs.ErrInvalid, naming the features).
func Resolve(ctx context.Context, src Source, cfg *devcontainer.Config) (*Plan, error) {
	r := &resolver{src: src, fetched: make(map[string]*Fetched)}
	type item struct {
		ref     Ref
		options map[string]string
		parent  int // index of the node whose dependsOn this is; -1 for the file's
	}
	var work []item
	for _, f := range cfg.Features {
		ref, err := ParseRef(f.ID)
		if err != nil {
			return nil, err
		}
		if ref.Retired {
			r.notes = append(r.notes, fmt.Sprintf("Feature %s: a bare name is the retired form of the bundled features; it is read as %s, as the reference CLI reads it. Write that reference instead.", f.ID, ref.Reference()))
		}
		work = append(work, item{ref: ref, options: f.Options, parent: -1})
	}
	for len(work) > 0 {
		w := work[0]
		work = work[1:]
		requiredBy := ""
		if w.parent >= 0 {
			requiredBy = r.nodes[w.parent].ref.ID
		}
		i, isNew, err := r.add(ctx, w.ref, w.options, requiredBy)
		if err != nil {
			return nil, err
		}
		if w.parent >= 0 && !slices.Contains(r.nodes[w.parent].after, i) {
			r.nodes[w.parent].after = append(r.nodes[w.parent].after, i)
		}
		if !isNew {
			continue
		}
		for _, dep := range r.plan[i].Metadata.DependsOn {
			ref, err := ParseRef(dep.ID)
			if err != nil {
				return nil, fmt.Errorf("%w (in the dependsOn of feature %s)", err, w.ref.ID)
			}
			work = append(work, item{ref: ref, options: dep.Options, parent: i})
		}
	}
	r.softEdges()
	r.priorities(cfg.OverrideFeatureInstallOrder)
	idx, err := order(r.nodes)
	if err != nil {
		return nil, err
	}
	out := &Plan{Notes: r.notes}
	for _, i := range idx {
		out.Features = append(out.Features, r.plan[i])
	}
	return out, nil
}

type resolver struct {
	src     Source
	fetched map[string]*Fetched // by fetchKey
	nodes   []*node
	plan    []*Resolved // parallel to nodes
	notes   []string
}

// fetchKey is what one fetch answers for: a reference with its version.
func fetchKey(r Ref) string {
	switch r.Kind {
	case Local:
		return "local " + r.Path
	case Tarball:
		return "tarball " + r.URL
	}
	return "oci " + r.Reference()
}

// add fetches ref (once per reference) and returns the index of its node,
// a new one unless an equal feature is already there.
func (r *resolver) add(ctx context.Context, ref Ref, options map[string]string, requiredBy string) (int, bool, error) {
	f, ok := r.fetched[fetchKey(ref)]
	if !ok {
		var err error
		f, err = r.src.Fetch(ctx, ref)
		if err != nil {
			if requiredBy != "" {
				return 0, false, fmt.Errorf("%w (a dependency of feature %s)", err, requiredBy)
			}
			return 0, false, err
		}
		if f.Metadata == nil {
			return 0, false, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: it has no %s", ref.ID, MetadataFile))
		}
		r.fetched[fetchKey(ref)] = f
	}
	if options == nil {
		options = map[string]string{}
	}
	n := &node{ref: ref, options: maps.Clone(options), digest: f.Digest, names: []string{ref.Name()}}
	if id := f.Metadata.ID; id != "" && id != ref.Name() {
		n.names = append(n.names, id)
	}
	n.names = append(n.names, f.Metadata.LegacyIDs...)
	for i, o := range r.nodes {
		if o.same(n) {
			return i, false, nil
		}
	}
	if len(r.nodes) == maxFeatures {
		return 0, false, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
			"feature %s: more than %d features to install, dependencies included; a feature's dependsOn may be looping with ever-different options", ref.ID, maxFeatures))
	}
	env, notes, err := OptionEnv(ref.ID, f.Metadata, n.options)
	if err != nil {
		return 0, false, err
	}
	if !ok {
		r.notes = append(r.notes, f.Metadata.Notes...)
		r.notes = append(r.notes, f.Notes...)
	}
	r.notes = append(r.notes, notes...)
	r.nodes = append(r.nodes, n)
	r.plan = append(r.plan, &Resolved{Ref: ref, Options: n.options, RequiredBy: requiredBy, Fetched: f, Env: env})
	return len(r.nodes) - 1, true, nil
}

// softEdges turns each feature's installsAfter into edges to the features
// that are installed, and drops the rest, as the spec does.
func (r *resolver) softEdges() {
	for i, p := range r.plan {
		for _, id := range p.Metadata.InstallsAfter {
			ref, err := ParseRef(id)
			if err != nil {
				r.notes = append(r.notes, fmt.Sprintf("feature %s: installsAfter %s is left out: %v", p.Ref.ID, id, err))
				continue
			}
			for j, n := range r.nodes {
				if j != i && n.answers(ref) && !slices.Contains(r.nodes[i].soft, j) {
					r.nodes[i].soft = append(r.nodes[i].soft, j)
				}
			}
		}
	}
}

// priorities gives the features overrideFeatureInstallOrder names their
// round priority: n for the first of n, 1 for the last.
func (r *resolver) priorities(override []string) {
	for i, id := range override {
		ref, err := ParseRef(id)
		if err != nil {
			r.notes = append(r.notes, fmt.Sprintf("overrideFeatureInstallOrder %s is left out: %v", id, err))
			continue
		}
		matched := false
		for _, n := range r.nodes {
			if n.answers(ref) {
				n.priority = max(n.priority, len(override)-i)
				matched = true
			}
		}
		if !matched {
			r.notes = append(r.notes, fmt.Sprintf("overrideFeatureInstallOrder names %s, which is not installed; it is left out", id))
		}
	}
}

// Lifecycle returns the plan's lifecycle commands by hook, in install
// order, each entry's Origin "feature <id>". The spec runs them before
// devcontainer.json's own.
func (p *Plan) Lifecycle() map[string][]devcontainer.Lifecycle {
	out := make(map[string][]devcontainer.Lifecycle)
	for _, f := range p.Features {
		for _, hook := range featureHooks {
			if l, ok := f.Metadata.Lifecycle[hook]; ok {
				out[hook] = append(out[hook], l)
			}
		}
	}
	return out
}
