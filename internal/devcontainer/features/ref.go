package features

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Kind is where a feature comes from.
type Kind int

// The kinds of reference ParseRef knows.
const (
	// OCI is an artifact in an OCI registry:
	// <registry>/<namespace>/<name>[:<tag>|@sha256:<hex>].
	OCI Kind = iota + 1
	// Local is a folder beside devcontainer.json: ./<path>.
	Local
	// Tarball is an https URL of devcontainer-feature-<name>.tgz.
	Tarball
)

func (k Kind) String() string {
	switch k {
	case OCI:
		return "oci"
	case Local:
		return "local"
	case Tarball:
		return "tarball"
	}
	return "unknown"
}

// Ref is a parsed feature reference.
type Ref struct {
	// ID is the reference as written in devcontainer.json (or in a
	// feature's dependsOn).
	ID   string
	Kind Kind
	// Registry ("ghcr.io", "127.0.0.1:5000") and Repository
	// ("devcontainers/features/node") name an OCI artifact, lower-cased
	// as the spec asks. Tag is "latest" when the ID gives neither a tag
	// nor a digest; Digest ("sha256:<hex>") is set when it pins one, and
	// Tag is then empty.
	Registry   string
	Repository string
	Tag        string
	Digest     string
	// Path is a local feature's folder relative to the folder holding
	// devcontainer.json, cleaned and slash-separated ("rust",
	// "features/rust").
	Path string
	// URL is a tarball's address.
	URL string
	// Retired: ID is the bare name of a feature once bundled with the
	// editor, read as the ghcr.io feature that replaced it.
	Retired bool
}

// retiredFeatures maps the bare names of the features once bundled with
// the editor (a form real files still use) to the ghcr.io features that
// replaced them, version 1, as the reference CLI reads them. Other bare
// names (gradle, maven, jupyterlab became options of java and python)
// stay refused.
var retiredFeatures = map[string]string{
	"aws-cli": "aws-cli", "azure-cli": "azure-cli", "desktop-lite": "desktop-lite",
	"docker-in-docker": "docker-in-docker", "docker-from-docker": "docker-from-docker",
	"dotnet": "dotnet", "git": "git", "git-lfs": "git-lfs", "github-cli": "github-cli",
	"java": "java", "kubectl-helm-minikube": "kubectl-helm-minikube", "node": "node",
	"powershell": "powershell", "python": "python", "ruby": "ruby", "rust": "rust",
	"sshd": "sshd", "terraform": "terraform",
	"golang": "go", "common": "common-utils",
}

// retiredIntoOptions are the bundled features that became options of
// another feature.
var retiredIntoOptions = map[string]string{"gradle": "java", "maven": "java", "jupyterlab": "python"}

// Name is the feature's own name: the last component of its repository
// or folder, or <name> of devcontainer-feature-<name>.tgz.
func (r Ref) Name() string {
	switch r.Kind {
	case OCI:
		return path.Base(r.Repository)
	case Local:
		return path.Base(r.Path)
	case Tarball:
		u, err := url.Parse(r.URL)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(strings.TrimPrefix(path.Base(u.Path), "devcontainer-feature-"), ".tgz")
	}
	return ""
}

// Resource is the reference without its version: what installsAfter and
// overrideFeatureInstallOrder name, and what two versions of one feature
// share. ghcr.io/devcontainers/features/node for an OCI feature, ./rust
// for a local one, the URL for a tarball.
func (r Ref) Resource() string {
	switch r.Kind {
	case OCI:
		return r.Registry + "/" + r.Repository
	case Local:
		return "./" + r.Path
	case Tarball:
		return r.URL
	}
	return r.ID
}

// namespace is registry/namespace of an OCI feature, which its legacyIds
// are relative to.
func (r Ref) namespace() string {
	return r.Registry + "/" + path.Dir(r.Repository)
}

// Reference is what go-containerregistry is asked for:
// registry/repository:tag or registry/repository@digest.
func (r Ref) Reference() string {
	if r.Digest != "" {
		return r.Resource() + "@" + r.Digest
	}
	return r.Resource() + ":" + r.Tag
}

var (
	// ociPath is the distribution spec's repository name, as the
	// reference CLI checks it.
	ociPath = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)
	// ociTag is a tag as the distribution spec allows it.
	ociTag = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
	// ociRegistry is a host name or IPv4 address with an optional port.
	ociRegistry = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$`)
	sha256Hex   = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// tarballName is the file name the distribution spec requires of a
	// feature tarball.
	tarballName = regexp.MustCompile(`^devcontainer-feature-([A-Za-z0-9_.-]+)\.tgz$`)
)

// ParseRef parses a feature ID as devcontainer.json writes it. Errors are
// of class errdefs.ErrInvalid and name the ID.
//
// A local folder must start with "./", stay beneath the folder of
// devcontainer.json (no ".." component, not absolute) and name a folder
// below it; whether it really does, links included, is checked when it is
// fetched. A tarball must be an https URL ending in
// devcontainer-feature-<name>.tgz. Anything else is taken as an OCI
// reference, which needs a registry (a host with a dot or a port, or
// localhost), a namespace and a name.
func ParseRef(id string) (Ref, error) {
	bad := func(format string, args ...any) (Ref, error) {
		return Ref{}, errdefs.New(errdefs.ErrInvalid, "feature "+id+": "+fmt.Sprintf(format, args...))
	}
	if id == "" {
		return Ref{}, errdefs.New(errdefs.ErrInvalid, "a feature has an empty ID: name it by an OCI reference (ghcr.io/devcontainers/features/node:1), a folder (./my-feature) or an https URL")
	}
	if strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return bad("the ID holds a space or a control character")
	}
	switch {
	case id == "." || id == ".." || strings.HasPrefix(id, "./") || strings.HasPrefix(id, "../"):
		return parseLocal(id, bad)
	case strings.HasPrefix(id, "/"):
		return bad("a local feature may not be named by an absolute path; put it in a folder beside devcontainer.json and write ./<folder>")
	}
	if scheme, _, ok := strings.Cut(id, "://"); ok {
		if !strings.EqualFold(scheme, "https") {
			return bad("only https URLs of feature tarballs are fetched, not %s", scheme)
		}
		return parseTarball(id, bad)
	}
	return parseOCI(id, bad)
}

func parseLocal(id string, bad func(string, ...any) (Ref, error)) (Ref, error) {
	for comp := range strings.SplitSeq(id, "/") {
		if comp == ".." {
			return bad("a local feature must be inside the folder of devcontainer.json (the spec requires it below .devcontainer); \"..\" leaves it")
		}
	}
	p := path.Clean(id)
	if p == "." {
		return bad("a local feature must name a folder below the folder of devcontainer.json, not that folder itself")
	}
	return Ref{ID: id, Kind: Local, Path: p}, nil
}

func parseTarball(id string, bad func(string, ...any) (Ref, error)) (Ref, error) {
	u, err := url.Parse(id)
	switch {
	case err != nil:
		return bad("not a URL: %v", err)
	case u.Host == "":
		return bad("the URL names no host")
	case u.User != nil:
		// The ID ends up in logs, errors and the image's label.
		return bad("the URL carries credentials; hutch does not send them (publish the feature where it can be fetched without, or to an OCI registry)")
	}
	u.Scheme = "https"
	if tarballName.FindStringSubmatch(path.Base(u.Path)) == nil {
		return bad("a feature tarball must be named devcontainer-feature-<name>.tgz, as the distribution spec requires")
	}
	return Ref{ID: id, Kind: Tarball, URL: u.String()}, nil
}

func parseOCI(id string, bad func(string, ...any) (Ref, error)) (Ref, error) {
	// Feature IDs are case-insensitive and normalised to lower case.
	s := strings.ToLower(id)
	r := Ref{ID: id, Kind: OCI}
	resource := s
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		resource = s[:at]
		algo, hex, ok := strings.Cut(s[at+1:], ":")
		if !ok || algo != "sha256" || !sha256Hex.MatchString(hex) {
			return bad("a pinned feature needs a digest of the form @sha256:<64 hex digits>")
		}
		r.Digest = "sha256:" + hex
		// name:tag@digest: the digest decides, as it does for docker.
		if colon := strings.LastIndexByte(resource, ':'); colon > strings.LastIndexByte(resource, '/') {
			resource = resource[:colon]
		}
	} else if colon := strings.LastIndexByte(s, ':'); colon > strings.LastIndexByte(s, '/') {
		// A colon before the last slash is the registry's port.
		resource, r.Tag = s[:colon], s[colon+1:]
		if !ociTag.MatchString(r.Tag) {
			return bad("%q is not a valid tag", r.Tag)
		}
	} else {
		r.Tag = "latest"
	}
	parts := strings.Split(resource, "/")
	if now, ok := retiredFeatures[s]; ok {
		return Ref{ID: id, Kind: OCI, Registry: "ghcr.io", Repository: "devcontainers/features/" + now, Tag: "1", Retired: true}, nil
	}
	if len(parts) == 1 {
		if into, ok := retiredIntoOptions[parts[0]]; ok {
			return bad("a bare name is the retired form of the bundled features, and %s is now an option of ghcr.io/devcontainers/features/%s:1; use that feature and its option", parts[0], into)
		}
		return bad("a bare name is the retired form of the bundled features; write the OCI reference, e.g. ghcr.io/devcontainers/features/%s:1", parts[0])
	}
	registry := parts[0]
	if !strings.ContainsAny(registry, ".:") && registry != "localhost" {
		return bad("%q is not a registry: an OCI feature is <registry>/<namespace>/<name>[:<version>], e.g. ghcr.io/devcontainers/features/node:1 (the old <owner>/<repo>/<name> GitHub-release form is not supported)", registry)
	}
	if len(parts) < 3 {
		return bad("an OCI feature needs a namespace between registry and name: <registry>/<namespace>/<name>[:<version>]")
	}
	if !ociRegistry.MatchString(registry) {
		return bad("%q is not a valid registry host", registry)
	}
	repo := strings.Join(parts[1:], "/")
	if !ociPath.MatchString(repo) {
		return bad("%q is not a valid repository name (lower-case letters, digits and single . _ - between them)", repo)
	}
	r.Registry, r.Repository = registry, repo
	return r, nil
}
