package project

import (
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// ImageRepo is the repository of generated sandbox images; the tag is the
// hash of the Dockerfile.
const ImageRepo = "hutch-sandbox"

// BaseTools are the packages every generated image gets, by their Debian
// names: what agents and their tools reach for first.
var BaseTools = []string{"ca-certificates", "curl", "git", "openssh-client", "less", "procps", "bash"}

// NodeTools run the agent CLIs; an image gets them when it installs one.
var NodeTools = []string{"nodejs", "npm"}

// toolPackage is one of BaseTools or NodeTools on every package manager
// the recipe knows: what shows it is there already (a command on PATH or
// a file), and its package's name on each.
type toolPackage struct {
	// Probes are commands, or absolute paths of files; any one found
	// means the tool is there, whatever installed it.
	Probes string
	// Apt is the name in BaseTools and NodeTools; Apk (Alpine), RPM
	// (dnf, microdnf, yum) and Zypper (openSUSE) the others.
	Apt, Apk, RPM, Zypper string
}

// toolPackages maps BaseTools and NodeTools to their packages. Only
// names without quotes or spaces, since they are written into the RUN
// step as they stand.
var toolPackages = map[string]toolPackage{
	"ca-certificates": {"/etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/ca-bundle.pem", "ca-certificates", "ca-certificates", "ca-certificates", "ca-certificates"},
	"curl":            {"curl", "curl", "curl", "curl", "curl"},
	"git":             {"git", "git", "git", "git", "git"},
	"openssh-client":  {"ssh", "openssh-client", "openssh-client", "openssh-clients", "openssh-clients"},
	"less":            {"less", "less", "less", "less", "less"},
	"procps":          {"ps", "procps", "procps", "procps-ng", "procps"},
	"bash":            {"bash", "bash", "bash", "bash", "bash"},
	"nodejs":          {"node", "nodejs", "nodejs", "nodejs", "nodejs"},
	"npm":             {"npm", "npm", "npm", "npm", "npm"},
}

// PackageManagers are the package managers the recipe's install step
// finds, in the order it looks for them.
var PackageManagers = []string{"apt-get", "apk", "dnf", "microdnf", "yum", "zypper"}

// MissingToolsMarker starts the line the install step prints before it
// fails on a base with none of PackageManagers and tools missing;
// MissingTools reads it back from the build's output.
const MissingToolsMarker = "hutch-recipe-missing:"

// AgentPackages maps the agents hutch can install to their npm packages.
var AgentPackages = map[string]string{
	"claude": "@anthropic-ai/claude-code",
	"codex":  "@openai/codex",
	"gemini": "@google/gemini-cli",
}

// Recipe is the generated image of a project sandbox: the agent CLIs on
// top of a base. The install step finds the base's package manager
// (apt-get, apk, dnf, microdnf, yum or zypper) and installs only the
// tools that are missing, so a base that has them all needs no network
// and no package manager; a base that lacks some and has no package
// manager hutch knows fails the build with MissingToolsMarker.
type Recipe struct {
	// Base is the image the layers go on ("" = DefaultBase).
	Base string
	// Packages are extra packages, by their apt names (on another
	// package manager they are passed to it as given), Agents the agent
	// CLIs to install (claude, codex, gemini), Setup extra commands, one
	// RUN layer each.
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

	tools := append([]string(nil), BaseTools...)
	if len(npm) > 0 {
		tools = append(tools, NodeTools...)
	}
	extra := pkgs[len(BaseTools):]
	if len(extra) > 0 && looksNonApt(base) {
		notes = append(notes, fmt.Sprintf("sandbox-packages are apt package names, and the base image %s looks like it has another package manager; hutch passes the packages to it as given, so name them as that package manager does.", base))
	}

	var b strings.Builder
	line := func(s string) { b.WriteString(s + "\n") }
	line("FROM " + base)
	// A devcontainer base often ends as a non-root user; the layers need
	// root, and the container's user is always set when it is created.
	line("USER root")
	line("ENV DEBIAN_FRONTEND=noninteractive")
	installStep(line, tools, extra)
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

// installStep writes the RUN step that installs tools (of toolPackages)
// and extra packages. It finds the base's package manager, takes a tool
// that answers to one of its probes, or whose package the manager lists
// as installed, as there, and installs the rest in one go; with nothing
// to install it needs neither a network nor a package manager. Without a
// package manager it knows and with something missing, it prints
// MissingToolsMarker and the missing names and fails. Every name written
// is a constant of toolPackages or passed aptName: no quote, space or
// shell syntax reaches the step from the settings.
func installStep(line func(string), tools, extra []string) {
	const c = " \\"
	line("RUN set -e;" + c)
	line("    pm=; for m in " + strings.Join(PackageManagers, " ") + "; do if command -v $m >/dev/null 2>&1; then pm=$m; break; fi; done;" + c)
	line(`    has() { case "$pm" in apt-get) dpkg -s "$1" >/dev/null 2>&1;; apk) apk info -e "$1" >/dev/null 2>&1;; dnf|microdnf|yum|zypper) rpm -q --whatprovides "$1" >/dev/null 2>&1;; *) return 1;; esac; };` + c)
	line("    need=; missing=;" + c)
	line(`    tool() { for x in $1; do case "$x" in /*) [ -e "$x" ] && return 0;; *) command -v "$x" >/dev/null 2>&1 && return 0;; esac; done;` + c)
	line(`      case "$pm" in apt-get) p=$2;; apk) p=$3;; dnf|microdnf|yum) p=$4;; zypper) p=$5;; *) missing="$missing $2"; return 0;; esac;` + c)
	line(`      has "$p" || need="$need $p"; };` + c)
	line(`    pkg() { if [ -z "$pm" ]; then missing="$missing $1"; elif ! has "$1"; then need="$need $1"; fi; };` + c)
	for _, t := range tools {
		tp := toolPackages[t]
		line(fmt.Sprintf("    tool '%s' %s %s %s %s;", tp.Probes, tp.Apt, tp.Apk, tp.RPM, tp.Zypper) + c)
	}
	for _, p := range extra {
		line("    pkg " + p + ";" + c)
	}
	line(`    if [ -n "$missing" ]; then echo "` + MissingToolsMarker + `$missing" >&2; exit 1; fi;` + c)
	line(`    if [ -z "$need" ]; then echo "hutch: every package is there already"; exit 0; fi;` + c)
	line(`    echo "hutch: installing with $pm:$need";` + c)
	line(`    case "$pm" in` + c)
	line(`      apt-get) apt-get update; apt-get install -y --no-install-recommends $need; rm -rf /var/lib/apt/lists/*;;` + c)
	line(`      apk) apk add --no-cache $need;;` + c)
	line(`      dnf|yum) $pm install -y $need; $pm clean all;;` + c)
	line(`      microdnf) microdnf install -y $need; microdnf clean all;;` + c)
	line(`      zypper) zypper --non-interactive install --no-recommends $need; zypper clean --all;;` + c)
	line("    esac")
}

// nonApt are names in an image reference that say its package manager is
// not apt-get.
var nonApt = []string{"alpine", "fedora", "centos", "rockylinux", "almalinux", "amazonlinux", "opensuse", "oraclelinux", "/ubi", "ubi8", "ubi9", "ubi10"}

// looksNonApt reports whether base names a distribution without apt-get,
// by its name alone (node:22-alpine, fedora:41); a base whose name does
// not say is taken for one with apt-get.
func looksNonApt(base string) bool {
	b := strings.ToLower(base)
	for _, n := range nonApt {
		if strings.Contains(b, n) {
			return true
		}
	}
	return false
}

// MissingTools reads the tools the install step found missing, on a base
// with no package manager it knows, from the build's output: the last
// line that starts with MissingToolsMarker (colour codes aside; the
// builder also prints the step itself, where the marker is mid-line).
// nil when there is none.
func MissingTools(output string) []string {
	var found []string
	for _, line := range strings.Split(output, "\n") {
		line = strings.TrimLeft(ansiCodes.ReplaceAllStringFunc(line, func(string) string { return "" }), " \t\r")
		if rest, ok := strings.CutPrefix(line, MissingToolsMarker); ok {
			found = strings.Fields(rest)
		}
	}
	return found
}

// ansiCodes are the colour codes the classic builder wraps a step's
// stderr in.
var ansiCodes = lazyregexp.New(`\x1b\[[0-9;]*m`)

// MissingToolsError is what to tell the user when the recipe's base has
// no package manager hutch knows and lacks tools: which, and what to do.
// devcontainerBuild says the base is the image devcontainer.json builds,
// whose Dockerfile could then install them.
func MissingToolsError(base string, missing []string, devcontainerBuild bool) string {
	fix := "Set sandbox-image to an image that has them, or sandbox-base to a Debian, Ubuntu, Alpine or Fedora image."
	if devcontainerBuild {
		fix = "Install them in the Dockerfile devcontainer.json builds, or set sandbox-image to an image that has them."
	}
	return fmt.Sprintf("The base image %s has no package manager hutch knows (%s) to install what the sandbox needs, and lacks %s. %s",
		base, strings.Join(PackageManagers, ", "), strings.Join(missing, ", "), fix)
}
