package sandbox

import (
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Kind names a family of modes: where commands run.
type Kind string

// The kinds hutch knows. The string is the prefix users write.
const (
	KindHost       Kind = "host"
	KindContainer  Kind = "container"
	KindImage      Kind = "image"
	KindCloudflare Kind = "cloudflare"
	KindGondolin   Kind = "gondolin"
	KindKube       Kind = "kube"
)

// Kinds lists every kind in the order help texts show them.
var Kinds = []Kind{KindHost, KindContainer, KindImage, KindCloudflare, KindGondolin, KindKube}

// Mode is a parsed --sandbox value: a kind and its target (container name,
// image reference, bridge sandbox id or VM profile; empty for host).
type Mode struct {
	Kind   Kind
	Target string
}

// DefaultMode is what hutch uses when no mode is given. Host is the only
// mode that needs nothing installed; policy still refuses it whenever the
// conversation's door policy asks for a boundary host cannot enforce.
var DefaultMode = Mode{Kind: KindHost}

// String renders the mode the way a user writes it.
func (m Mode) String() string {
	if m.Kind == KindHost {
		return string(KindHost)
	}
	return string(m.Kind) + ":" + m.Target
}

// validForms is the list quoted by every "unknown mode" error.
const validForms = "'host', 'container:<container-name>', 'image:<image-name>', 'cloudflare:<sandbox-id>', 'gondolin:default' (alias 'microvm:default'), or 'kube:<image-name>'"

// ParseMode parses a --sandbox value. Errors are of class errdefs.ErrInvalid
// and say what the valid forms are.
func ParseMode(s string) (Mode, error) {
	if s == "host" {
		return Mode{Kind: KindHost}, nil
	}
	prefix, rest, hasColon := strings.Cut(s, ":")
	if !hasColon {
		if s == "" {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, "Sandbox mode is empty. Use "+validForms)
		}
		switch prefix {
		case "container", "image", "cloudflare", "gondolin", "microvm", "kube", "docker":
			// A known prefix written without its colon: explain what is missing.
			return parseTarget(prefix, "", s)
		}
		return Mode{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Invalid sandbox type '%s'. Use %s", s, validForms))
	}
	return parseTarget(prefix, rest, s)
}

func parseTarget(prefix, rest, whole string) (Mode, error) {
	switch prefix {
	case "docker":
		return Mode{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
			"'%s' is not supported. Use 'container:<container-name>' for an existing container or 'image:<image-name>' for hutch-managed per-conversation containers.", whole))
	case "container":
		if strings.TrimSpace(rest) == "" {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, "container sandbox requires container name (e.g., container:hutch-sandbox)")
		}
		if strings.TrimSpace(rest) != rest || strings.ContainsAny(rest, " \t\n/") {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("container name %q is not a valid container name", rest))
		}
		return Mode{Kind: KindContainer, Target: rest}, nil
	case "image":
		if strings.TrimSpace(rest) == "" {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, "image sandbox requires image name (e.g., image:debian:12)")
		}
		if strings.TrimSpace(rest) != rest || strings.ContainsAny(rest, " \t\n") {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("image name %q must not contain whitespace", rest))
		}
		return Mode{Kind: KindImage, Target: rest}, nil
	case "cloudflare":
		id := strings.TrimSpace(rest)
		if id == "" {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, "cloudflare sandbox requires sandbox id (e.g., cloudflare:team-sandbox)")
		}
		if strings.ContainsAny(id, " \t\n/") {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("cloudflare sandbox id %q must not contain whitespace or '/'", id))
		}
		return Mode{Kind: KindCloudflare, Target: id}, nil
	case "gondolin", "microvm":
		if rest == "" {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, prefix+" sandbox requires a profile (e.g., "+prefix+":default)")
		}
		if rest != "default" {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("unsupported %s profile '%s'. Use '%s:default'", prefix, rest, prefix))
		}
		return Mode{Kind: KindGondolin, Target: "default"}, nil
	case "kube":
		if strings.TrimSpace(rest) == "" {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, "kube sandbox requires image name (e.g., kube:registry.example.com/hutch-sandbox:1)")
		}
		if strings.TrimSpace(rest) != rest || strings.ContainsAny(rest, " \t\n") {
			return Mode{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("image name %q must not contain whitespace", rest))
		}
		return Mode{Kind: KindKube, Target: rest}, nil
	}
	return Mode{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Invalid sandbox type '%s'. Use %s", whole, validForms))
}
