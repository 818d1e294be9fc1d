package features

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// node is one feature of the dependency graph: a feature with the options
// it is installed with. Two nodes are the same feature only when the
// content and the options are (the spec's Feature Equality).
type node struct {
	ref     Ref
	options map[string]string
	// digest identifies the content: the manifest digest of an OCI
	// feature, the SHA-256 of a tarball. A local folder is identified by
	// its path, whatever its digest.
	digest string
	// names are the names the feature answers to: its own and its
	// legacyIds, which the spec resolves installsAfter and
	// overrideFeatureInstallOrder through.
	names []string
	// after are the nodes its dependsOn requires, soft those of its
	// installsAfter that are installed at all.
	after, soft []int
	// priority is the spec's roundPriority, set from
	// overrideFeatureInstallOrder.
	priority int
}

// identity is what, with the options, makes two nodes the same feature.
func (n *node) identity() string {
	switch {
	case n.ref.Kind == Local:
		return "local " + n.ref.Path
	case n.digest != "":
		return n.ref.Kind.String() + " " + n.digest
	}
	return n.ref.Kind.String() + " " + n.ref.Reference()
}

func (n *node) same(o *node) bool {
	return n.identity() == o.identity() && maps.Equal(n.options, o.options)
}

// answers reports whether the node is the feature r names, version aside:
// the same resource, or a legacy name of it in the same namespace.
func (n *node) answers(r Ref) bool {
	if n.ref.Kind != r.Kind {
		return false
	}
	if n.ref.Resource() == r.Resource() {
		return true
	}
	if r.Kind != OCI || n.ref.namespace() != r.namespace() {
		return false
	}
	return slices.Contains(n.names, r.Name())
}

// order sorts nodes into install order by the spec's round-based
// algorithm. Each round takes every node whose dependsOn and installsAfter
// are all installed by earlier rounds, keeps those of the highest
// priority (overrideFeatureInstallOrder) and commits them sorted by
// compareNodes; the others wait for a later round. A round with nothing
// ready is a cycle, and an error of class errdefs.ErrInvalid that says
// what each remaining feature waits for.
func order(nodes []*node) ([]int, error) {
	done := make([]bool, len(nodes))
	ready := func(i int) bool {
		for _, d := range nodes[i].after {
			if !done[d] {
				return false
			}
		}
		for _, d := range nodes[i].soft {
			if !done[d] {
				return false
			}
		}
		return true
	}
	remaining := make([]int, len(nodes))
	for i := range nodes {
		remaining[i] = i
	}
	out := make([]int, 0, len(nodes))
	for len(remaining) > 0 {
		var round []int
		top := 0
		for _, i := range remaining {
			if !ready(i) {
				continue
			}
			switch p := nodes[i].priority; {
			case len(round) == 0 || p > top:
				round, top = []int{i}, p
			case p == top:
				round = append(round, i)
			}
		}
		if len(round) == 0 {
			return nil, cycleError(nodes, remaining, done)
		}
		slices.SortStableFunc(round, func(a, b int) int { return compareNodes(nodes[a], nodes[b]) })
		for _, i := range round {
			done[i] = true
		}
		out = append(out, round...)
		remaining = slices.DeleteFunc(remaining, func(i int) bool { return done[i] })
	}
	return out, nil
}

func cycleError(nodes []*node, remaining []int, done []bool) error {
	slices.SortStableFunc(remaining, func(a, b int) int { return compareNodes(nodes[a], nodes[b]) })
	var waits []string
	for _, i := range remaining {
		var on []string
		for _, d := range nodes[i].after {
			if !done[d] {
				on = append(on, nodes[d].describe()+" (dependsOn)")
			}
		}
		for _, d := range nodes[i].soft {
			if !done[d] {
				on = append(on, nodes[d].describe()+" (installsAfter)")
			}
		}
		waits = append(waits, nodes[i].describe()+" waits for "+strings.Join(slices.Compact(on), ", "))
	}
	return errdefs.New(errdefs.ErrInvalid, "features depend on each other in a cycle, so no install order exists: "+
		strings.Join(waits, "; ")+". The cycle is in the features' dependsOn or installsAfter; remove one of the features involved from devcontainer.json, or pick versions that do not depend on each other.")
}

// compareNodes is the spec's Round Stable Sort, as the reference CLI
// implements it: by kind (then the IDs as written); OCI features by
// registry and namespace, name (legacy names count as the same), tag,
// options and digest; local folders by path, tarballs by URL, then
// options. Strings compare byte-wise where the CLI uses localeCompare;
// feature IDs are lower-case, for which both agree.
func compareNodes(a, b *node) int {
	if a.ref.Kind != b.ref.Kind {
		return strings.Compare(a.ref.ID, b.ref.ID)
	}
	switch a.ref.Kind {
	case OCI:
		if a.digest == b.digest && compareOptions(a.options, b.options) == 0 {
			return 0
		}
		if c := strings.Compare(a.ref.namespace(), b.ref.namespace()); c != 0 {
			return c
		}
		if !sharesName(a, b) {
			return strings.Compare(a.ref.Name(), b.ref.Name())
		}
		if a.ref.Tag != "" && b.ref.Tag != "" && a.ref.Tag != b.ref.Tag {
			return strings.Compare(a.ref.Tag, b.ref.Tag)
		}
		if c := compareOptions(a.options, b.options); c != 0 {
			return c
		}
		return strings.Compare(a.digest, b.digest)
	case Local:
		if c := strings.Compare(a.ref.Path, b.ref.Path); c != 0 {
			return c
		}
	case Tarball:
		if c := strings.Compare(a.ref.URL, b.ref.URL); c != 0 {
			return c
		}
	}
	return compareOptions(a.options, b.options)
}

// sharesName reports whether two OCI features have a name in common,
// legacy names included.
func sharesName(a, b *node) bool {
	if a.ref.Name() == b.ref.Name() {
		return true
	}
	for _, n := range a.names {
		if slices.Contains(b.names, n) {
			return true
		}
	}
	return false
}

// compareOptions orders option sets: fewer options first, then by the
// sorted names, then by their values.
func compareOptions(a, b map[string]string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	ak, bk := slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))
	for i := range ak {
		if c := strings.Compare(ak[i], bk[i]); c != 0 {
			return c
		}
		if c := strings.Compare(a[ak[i]], b[bk[i]]); c != 0 {
			return c
		}
	}
	return 0
}

// describe names a node in messages: its ID, and the options when a
// dependency gives some.
func (n *node) describe() string {
	if len(n.options) == 0 {
		return n.ref.ID
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(n.options)) {
		kv = append(kv, fmt.Sprintf("%s=%s", k, n.options[k]))
	}
	return n.ref.ID + " (" + strings.Join(kv, ", ") + ")"
}
