package settings

import (
	"fmt"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// KubeSettings are the sandbox.kube.* settings of the kube:<image> mode.
// Zero fields are unset; the mode applies its defaults.
type KubeSettings struct {
	Kubeconfig   string            // path of a kubeconfig file; empty: in-cluster, then KUBECONFIG, then ~/.kube/config
	Namespace    string            // namespace of the pods; empty: the kubeconfig's (or in-cluster) namespace, else "default"
	Storage      KubeStorage       // how pods reach the workspace root; zero: hostPath, same path on the node
	NodeSelector map[string]string // node labels the pods must match; nil: any node
	RuntimeClass string            // runtimeClassName of the pods (gvisor, kata...)
	AgentImage   string            // repository of the hutch agent image (default "hutch-agent"); the tag is derived from the agent's hash by the mode
}

// KubeStorage is how kube: mode pods reach hutch's workspace root. At most
// one field is set; both empty means a hostPath volume at the same path on
// the node as hutch's workspace.
type KubeStorage struct {
	HostPath string // hostPath volume at this absolute path on the node
	Claim    string // PersistentVolumeClaim of this name, in the pods' namespace
}

// dns1123Label is a Kubernetes DNS-1123 label (namespaces, at most 63).
var dns1123Label = lazyregexp.New(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// dns1123Subdomain is a Kubernetes DNS-1123 subdomain (claims, runtime
// classes, label key prefixes; at most 253).
var dns1123Subdomain = lazyregexp.New(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// qualifiedName is the name part of a label key, and a non-empty label
// value (at most 63).
var qualifiedName = lazyregexp.New(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)

func isLabel(s string) bool     { return len(s) <= 63 && dns1123Label.MatchString(s) }
func isSubdomain(s string) bool { return len(s) <= 253 && dns1123Subdomain.MatchString(s) }

// isCleanAbs reports whether p is an absolute, clean path without control
// characters (NUL above all: no consumer could pass it on).
func isCleanAbs(p string) bool {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return false
	}
	return !strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// ParseKubeconfig checks a kubeconfig path: absolute and clean.
func ParseKubeconfig(s string) (string, error) {
	if !isCleanAbs(s) {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Kubeconfig %q must be an absolute, clean path such as /home/me/.kube/config", s))
	}
	return s, nil
}

// ParseKubeNamespace checks a namespace name: a DNS-1123 label.
func ParseKubeNamespace(s string) (string, error) {
	if !isLabel(s) {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Namespace %q must be a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit) such as hutch", s))
	}
	return s, nil
}

// ParseKubeStorage parses sandbox.kube.storage: "hostPath" (the same path
// on the node as hutch's workspace), "hostPath:/abs/node/path", or
// "pvc:<claim-name>".
func ParseKubeStorage(s string) (KubeStorage, error) {
	switch {
	case s == "hostPath":
		return KubeStorage{}, nil
	case strings.HasPrefix(s, "hostPath:"):
		p := strings.TrimPrefix(s, "hostPath:")
		if !isCleanAbs(p) {
			return KubeStorage{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Storage %q: the node path must be absolute and clean, such as hostPath:/srv/hutch", s))
		}
		if p == "/" {
			return KubeStorage{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Storage %q: the node path must not be the node's root; use a directory such as hostPath:/srv/hutch", s))
		}
		return KubeStorage{HostPath: p}, nil
	case strings.HasPrefix(s, "pvc:"):
		c := strings.TrimPrefix(s, "pvc:")
		if !isSubdomain(c) {
			return KubeStorage{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Storage %q: the claim name must be a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' and '.') such as pvc:hutch-workspace", s))
		}
		return KubeStorage{Claim: c}, nil
	}
	return KubeStorage{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Storage %q must be hostPath, hostPath:/node/path or pvc:<claim-name>, such as pvc:hutch-workspace", s))
}

// ParseNodeSelector parses sandbox.kube.nodeSelector: comma-separated
// key=value pairs (spaces around a pair are dropped), each a Kubernetes
// label; a key given twice is refused.
func ParseNodeSelector(s string) (map[string]string, error) {
	out := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Node selector %q has an empty entry; write key=value pairs such as disktype=ssd,zone=a", s))
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Node selector entry %q must be key=value, such as disktype=ssd", pair))
		}
		if !isLabelKey(k) {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Node selector key %q must be a label key such as disktype or example.com/zone (a name of at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, after an optional DNS subdomain and '/')", k))
		}
		if v != "" && (len(v) > 63 || !qualifiedName.MatchString(v)) {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Node selector value %q of %q must be empty or at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, such as ssd", v, k))
		}
		if _, dup := out[k]; dup {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Node selector key %q is given twice", k))
		}
		out[k] = v
	}
	return out, nil
}

// isLabelKey reports whether k is a Kubernetes label key: [prefix/]name.
func isLabelKey(k string) bool {
	name := k
	if prefix, n, ok := strings.Cut(k, "/"); ok {
		if !isSubdomain(prefix) {
			return false
		}
		name = n
	}
	return len(name) <= 63 && qualifiedName.MatchString(name)
}

// ParseKubeRuntimeClass checks a runtimeClassName: a DNS-1123 subdomain.
func ParseKubeRuntimeClass(s string) (string, error) {
	if !isSubdomain(s) {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Runtime class %q must be a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' and '.') such as gvisor", s))
	}
	return s, nil
}

// imageRepository is an image repository without tag or digest: lowercase
// path components separated by '/' (separators as Docker's reference
// grammar has them), optionally after a registry host[:port].
var imageRepository = lazyregexp.New(`^([A-Za-z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*$`)

// ParseKubeAgentImage checks sandbox.kube.agentImage: an image repository
// without tag or digest, since the mode derives the tag from the agent's
// hash.
func ParseKubeAgentImage(s string) (string, error) {
	if strings.Contains(s, "@") {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent image %q must not have a digest; the tag is derived from the agent's hash, so give the repository only, such as registry.example.com:5000/hutch-agent", s))
	}
	if strings.Contains(s[strings.LastIndex(s, "/")+1:], ":") {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent image %q must not have a tag; the tag is derived from the agent's hash, so give the repository only, such as registry.example.com:5000/hutch-agent", s))
	}
	if len(s) > 255 || !imageRepository.MatchString(s) {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent image %q must be an image repository (lowercase path components separated by '/', after an optional registry host[:port]) such as hutch-agent or registry.example.com:5000/hutch-agent", s))
	}
	return s, nil
}

func parseKubeconfigValue(s string) (any, error)   { return ParseKubeconfig(s) }
func parseNamespaceValue(s string) (any, error)    { return ParseKubeNamespace(s) }
func parseStorageValue(s string) (any, error)      { return ParseKubeStorage(s) }
func parseNodeSelectorValue(s string) (any, error) { return ParseNodeSelector(s) }
func parseRuntimeClassValue(s string) (any, error) { return ParseKubeRuntimeClass(s) }
func parseAgentImageValue(s string) (any, error)   { return ParseKubeAgentImage(s) }
