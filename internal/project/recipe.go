package project

import (
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// ImageRepo is the repository of generated sandbox images; the tag is the
// hash of the Dockerfile.
const ImageRepo = "hutch-sandbox"

// BaseTools are the packages every generated image gets: what agents and
// their tools reach for first.
var BaseTools = []string{"ca-certificates", "curl", "git", "openssh-client", "less", "procps", "bash"}

// NodeTools run the agent CLIs; an image gets them when it installs one.
var NodeTools = []string{"nodejs", "npm"}

// AgentPackages maps the agents hutch can install to their npm packages.
var AgentPackages = map[string]string{
	"claude": "@anthropic-ai/claude-code",
	"codex":  "@openai/codex",
	"gemini": "@google/gemini-cli",
}

// Recipe is the generated image of a project sandbox: the agent CLIs on
// top of a base. The generated layers assume apt-get (a Debian or Ubuntu
// base); for any other base, set sandbox-image instead.
type Recipe struct {
	// Base is the image the layers go on ("" = DefaultBase).
	Base string
	// Packages are extra apt packages, Agents the agent CLIs to install
	// (claude, codex, gemini), Setup extra commands, one RUN layer each.
	Packages, Agents, Setup []string
}

// aptName is a package name apt-get accepts, optionally with :arch and
// =version or /release: nothing a shell would read as more than a word.
var aptName = lazyregexp.New(`^[a-z0-9][a-z0-9+.-]*(:[a-z0-9-]+)?(=[A-Za-z0-9.+~:-]+|/[a-z0-9.-]+)?$`)

// heredoc finds a heredoc opener (<<EOF, <<-"EOF"), which BuildKit reads
// across Dockerfile lines; a here-string (<<<) is fine.
var heredoc = lazyregexp.New(`(^|[^<])<<-?\s*["']?[A-Za-z_]`)

// Compile renders the Dockerfile and notes about entries it left out: a
// package that is not an apt package name, an agent hutch cannot install,
// a setup entry that spans lines, opens a heredoc or ends in a backslash
// (each would change what the following lines mean), a base that is not an image
// reference. Blank entries are skipped and repeated packages and agents
// kept once, in order.
func (r Recipe) Compile() (dockerfile string, notes []string) {
	base := strings.TrimSpace(r.Base)
	switch {
	case base == "":
		base = DefaultBase
	case !imageRef.MatchString(base):
		notes = append(notes, fmt.Sprintf("The base image %q is not an image reference, so %s is used instead.", base, DefaultBase))
		base = DefaultBase
	}

	pkgs := append([]string(nil), BaseTools...)
	for _, p := range r.Packages {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
		case !aptName.MatchString(p):
			notes = append(notes, fmt.Sprintf("%q in sandbox-packages is not an apt package name (lower-case letters, digits, '+', '-' and '.', optionally with =version), so it is left out of the image.", p))
		default:
			pkgs = appendNew(pkgs, p)
		}
	}

	var npm []string
	for _, a := range r.Agents {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == "" {
			continue
		}
		pkg, ok := AgentPackages[a]
		if !ok {
			notes = append(notes, fmt.Sprintf("%q in sandbox-agents is not an agent hutch can install (claude, codex or gemini); install it with a sandbox-setup line instead.", a))
			continue
		}
		npm = appendNew(npm, pkg)
	}

	if len(npm) > 0 {
		for _, p := range NodeTools {
			pkgs = appendNew(pkgs, p)
		}
	}

	var b strings.Builder
	line := func(s string) { b.WriteString(s + "\n") }
	line("FROM " + base)
	// A devcontainer base often ends as a non-root user; the layers need
	// root, and the container's user is always set when it is created.
	line("USER root")
	line("ENV DEBIAN_FRONTEND=noninteractive")
	line("RUN apt-get update \\")
	line(" && apt-get install -y --no-install-recommends \\")
	line("      " + strings.Join(pkgs, " ") + " \\")
	line(" && rm -rf /var/lib/apt/lists/*")
	if len(npm) > 0 {
		line("RUN npm install -g " + strings.Join(npm, " "))
	}
	// 0777: a fresh named volume copies the image's directory, mode
	// included, so any --user can write its login into the home volume.
	line("RUN mkdir -p " + HomeTarget + " " + RelayTarget + " && chmod 0777 " + HomeTarget)
	line("ENV HOME=" + HomeTarget)
	for _, s := range r.Setup {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
		case strings.ContainsAny(s, "\r\n"):
			notes = append(notes, fmt.Sprintf("The sandbox-setup entry %q spans several lines, so it is left out of the image: each entry is one line and becomes one RUN layer. Split it into separate entries.", s))
		case heredoc.MatchString(s):
			notes = append(notes, fmt.Sprintf("The sandbox-setup entry %q opens a heredoc, which would swallow the following lines of the Dockerfile, so it is left out of the image. Write the content with printf or echo instead.", s))
		case strings.HasSuffix(s, "\\"):
			notes = append(notes, fmt.Sprintf("The sandbox-setup entry %q ends with a backslash, which would join it to the next line of the Dockerfile, so it is left out of the image.", s))
		default:
			line("RUN " + s)
		}
	}
	return b.String(), notes
}

func appendNew(list []string, s string) []string {
	for _, have := range list {
		if have == s {
			return list
		}
	}
	return append(list, s)
}

// Dockerfile is the Dockerfile Compile renders, without the notes.
func (r Recipe) Dockerfile() string {
	d, _ := r.Compile()
	return d
}

// Tag is the image tag of the recipe, hutch-sandbox:<Hash of the
// Dockerfile>: an unchanged recipe finds the image it built before, a
// changed one builds anew.
func (r Recipe) Tag() string { return ImageRepo + ":" + Hash(r.Dockerfile()) }
