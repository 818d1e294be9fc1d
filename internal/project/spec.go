package project

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// Engine flavours.
const (
	FlavorDocker = "docker"
	FlavorPodman = "podman"
)

// DefaultPidsLimit is the process ceiling every project sandbox gets: a
// team of agents can fork-bomb a machine by accident.
const DefaultPidsLimit = 4096

// GatewayHost is the name by which a bridged container reaches the host:
// host.containers.internal under Podman (which resolves it itself),
// host.docker.internal otherwise.
func GatewayHost(flavor string) string {
	if flavor == FlavorPodman {
		return "host.containers.internal"
	}
	return "host.docker.internal"
}

// EnvVar is one variable of the container's environment.
type EnvVar struct {
	Name, Value string
}

// String is the variable in the engine's NAME=VALUE form.
func (e EnvVar) String() string { return e.Name + "=" + e.Value }

// Input is everything Resolve decides from. The caller gathers it: the
// resolved project, the host user, the parsed settings and the
// devcontainer.json, and what it learnt of the engine.
type Input struct {
	// Project is the absolute, cleaned, symlink-resolved project path.
	Project string
	// Home is the user's home directory on the host, resolved the same
	// way ("" when unknown).
	Home string
	// HostUID and HostGID are the caller's ids (negative when unknown).
	HostUID, HostGID int
	// Settings are the project's effective settings (Effective).
	Settings Resolved
	// Devcontainer is the project's devcontainer.json: nil when there is
	// none, when it is not trusted or when sandbox-devcontainer is off.
	Devcontainer *devcontainer.Config
	// Flavor is FlavorDocker or FlavorPodman, and Rootless whether the
	// engine runs without root.
	Flavor   string
	Rootless bool
	// RelayDir is the host directory mounted read-only at /sandbox/relay
	// ("" for none).
	RelayDir string
	// Dockerfile is the content of the Dockerfile the devcontainer's
	// build property names (BuildPaths), read beneath the project without
	// following links; nil when there is no build or it could not be
	// found. It is what gets built, and what the build's tag hashes.
	Dockerfile []byte
}

// ImageBuild is a Dockerfile build a devcontainer.json asks for, with
// paths resolved on the host. The executor builds it through the engine
// and tags the result Tag, which the Recipe names as its base.
type ImageBuild struct {
	// Dockerfile and Context are absolute paths inside the project.
	Dockerfile, Context string
	Args                map[string]string
	Target              string
	// Tag is what the result is tagged (BuildTag): hutch-devcontainer:<hash
	// of the project and the build's inputs as written>.
	Tag string
	// Content is the Dockerfile as Resolve was given it (Input.Dockerfile):
	// the executor builds this, whatever the file holds by then.
	Content []byte `json:"-"`
}

// Spec is what a project sandbox is made of: everything the executor
// needs to build its image and create it, and nothing it must decide.
type Spec struct {
	// Name is the container's name (ContainerName).
	Name string
	// Image is sandbox-image as given, or the Recipe's tag.
	Image string
	// Build, when set, is the devcontainer's Dockerfile build: its
	// result is the Recipe's base (Recipe.Base is then Build.Tag).
	Build *ImageBuild `json:",omitempty"`
	// Features, when set, are the devcontainer's features: they are
	// installed on the Recipe's base, and the Recipe is built on the
	// result (its Base is then FeaturesTag's, known once they are
	// fetched).
	Features *Features `json:",omitempty"`
	// Recipe is the image to build when Image is not present; nil when
	// sandbox-image is used (the executor then makes /sandbox/home
	// writable itself, since the image may lack it).
	Recipe *Recipe
	// Workdir is the project: it is mounted at its own path.
	Workdir string
	// Mounts are the project, the home volume, the relay dir (when
	// given), then the devcontainer's and the settings' mounts, one per
	// target.
	Mounts []Mount
	// Env is the container's environment, in order; HOME is always set,
	// and is also what every exec gets.
	Env []EnvVar
	// RemoteEnv is what every command gets on top of Env: the
	// devcontainer's remoteEnv, never part of the container's
	// configuration (a value from ${localEnv:...} may be a secret). A
	// value may still hold ${containerEnv:...}, filled from the
	// container's environment when a command runs.
	RemoteEnv []EnvVar `json:",omitempty"`
	// Lifecycle are the devcontainer's lifecycle commands the sandbox
	// runs, by hook (initializeCommand never: it is the host's).
	Lifecycle map[string][]devcontainer.Lifecycle `json:",omitempty"`
	// LifecycleTimeout bounds each lifecycle command
	// (sandbox-lifecycle-timeout); it shapes nothing of the container.
	LifecycleTimeout time.Duration `json:"-"`
	// User is the user the container runs as, as the engine's --user.
	User string
	// UserOrigin names the setting User came from ("remoteUser in
	// <devcontainer.json>", "sandbox-user in <settings file>"), "" for
	// the caller's own ids: for the error when the image lacks the user.
	UserOrigin string `json:"-"`
	// UsernsKeepID maps the caller's ids into the container unchanged
	// (rootless Podman with a non-root user), so files in the project
	// keep their owner.
	UsernsKeepID bool
	// Network is the engine's network mode: NetworkBridge, NetworkHost
	// or NetworkNone.
	Network string
	// Egress is sandbox-network as a policy: open (the container has a
	// network of its own, Network bridge or host), or allowlist or none
	// (Network none: hutch's egress proxy, reached through the agent at
	// EgressAddr, is the only way out, and Env points the proxy
	// variables at it). Allow is sandbox-network-allow. Neither the mode
	// between allowlist and none nor Allow shapes the container: the
	// proxy reads them per connection (Policy).
	Egress netpolicy.Mode
	Allow  []string
	// ExtraHosts are host:address entries to add (the gateway name under
	// Docker on a bridge).
	ExtraHosts []string
	// MemoryBytes and NanoCPUs are ceilings (0 = unlimited); PidsLimit is
	// always set.
	MemoryBytes int64
	NanoCPUs    int64
	PidsLimit   int64
	Labels      map[string]string
	// Notes are advisories for the user; they never fail a bring-up.
	Notes []string
	// AdoptEditor: an editor's running container labelled for the
	// project is entered instead of hutch's own (sandbox-devcontainer;
	// off means neither devcontainer.json nor the editor's container is
	// used).
	AdoptEditor bool
	// Hash identifies everything that shapes the container (LabelSpec): a
	// container whose label differs was made from other settings.
	Hash string
}

var (
	envName = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
	userRef = lazyregexp.New(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)
)

// Resolve decides the sandbox of in.Project. It refuses (ErrInvalid) a
// project CheckProject refuses, and any mount CheckMount refuses or that
// would cover the project or the relay dir, from devcontainer.json or
// settings alike, naming where the mount came from: dropping a mount the
// user asked for would be worse than saying no. It refuses
// (ErrFailedPrecondition) a devcontainer.json that describes a Docker
// Compose project unless sandbox-image names the service's image
// (composeRefusal). Everything else it cannot apply becomes a note.
//
// The rules, where the settings leave a choice:
//
//   - Image: sandbox-image as-is; otherwise a Recipe whose base is the
//     image the devcontainer's Dockerfile builds (Build; it wins over the
//     file's image, as in the reference CLI), else the devcontainer's
//     image, else sandbox-base, with the devcontainer's Features
//     installed on it first.
//   - Mounts: devcontainer mounts, then sandbox-mount; when two target
//     the same path the later one wins (settings over devcontainer) and a
//     note says which was dropped.
//   - Env: containerEnv, then remoteEnv, then sandbox-env; a later value
//     replaces an earlier one in place. HOME is /sandbox/home, appended
//     last, unless sandbox-env sets HOME (a devcontainer's HOME is
//     dropped with a note: logins must land in the home volume).
//   - User: sandbox-user host is the caller's uid:gid; root is 0:0
//     (explicit, not "the image's default", which may be anyone); unset
//     is the devcontainer's remoteUser, else containerUser, else the
//     caller's uid:gid; anything else is passed as-is.
//   - Network: open is a bridge, with the gateway name added under
//     Docker (Podman resolves host.containers.internal itself); host is
//     the host's network; allowlist and none are the engine's none, with
//     HTTP_PROXY, HTTPS_PROXY and NO_PROXY (and their lower-case
//     spellings) pointing at EgressAddr unless sandbox-env sets them, and
//     a note.
func Resolve(in Input) (Spec, error) {
	if err := CheckProject(in.Project, in.Home); err != nil {
		return Spec{}, err
	}
	project := path.Clean(in.Project)
	st := in.Settings
	dc := in.Devcontainer
	sp := Spec{
		Name:        ContainerName(project),
		Workdir:     project,
		MemoryBytes: st.MemoryBytes,
		NanoCPUs:    int64(math.Round(st.CPUs * 1e9)),
		PidsLimit:   DefaultPidsLimit,
		AdoptEditor: st.Devcontainer,

		LifecycleTimeout: cmp.Or(st.LifecycleTimeout, DefaultLifecycleTimeout),
	}
	var notes []string
	note := func(format string, a ...any) { notes = append(notes, fmt.Sprintf(format, a...)) }

	dcFile := "devcontainer.json"
	if dc != nil {
		if dc.Path != "" {
			dcFile = dc.Path
		}
		if err := composeRefusal(dc, dcFile, st.Image); err != nil {
			return Spec{}, err
		}
		notes = append(notes, dc.Notes...)
		if len(dc.Ignored) > 0 {
			note("These keys of %s are not applied in the sandbox: %s. Put what they set up into sandbox-packages, sandbox-setup or sandbox-image.", dcFile, strings.Join(dc.Ignored, ", "))
		}
		notes = append(notes, engineAsks(dc, dcFile)...)
		if n := workspaceNote(dc, dcFile, project); n != "" {
			notes = append(notes, n)
		}
		switch action := strings.TrimSpace(dc.ShutdownAction); {
		case strings.EqualFold(action, "none"):
		case action == "":
			note("%s does not set shutdownAction, so an editor stops its container when it closes. Set \"shutdownAction\": \"none\" so closing the editor does not stop a container a team of agents is working in.", dcFile)
		default:
			note("%s sets shutdownAction to %q, so an editor stops its container when it closes. Set \"shutdownAction\": \"none\" so closing the editor does not stop a container a team of agents is working in.", dcFile, action)
		}
	}

	// The image.
	if img := strings.TrimSpace(st.Image); img != "" {
		if !imageRef.MatchString(img) {
			return Spec{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("sandbox-image %q (from %s) is not an image reference such as %s.", img, st.Sources[KeyImage], DefaultBase))
		}
		sp.Image = img
		if dc != nil && dc.Build != nil {
			note("sandbox-image %s is used as-is, so the Dockerfile %s names is not built.", img, dcFile)
		} else if dc != nil && dc.Image != "" && dc.Image != img {
			note("sandbox-image %s is used as-is, so the image %s named in %s is not.", img, dc.Image, dcFile)
		}
		if f := resolveFeatures(dc, dcFile, img); f != nil {
			note("sandbox-image %s is used as-is, so the features of %s (%s) are not installed. Unset sandbox-image to have them installed.", img, dcFile, f.IDs())
		}
	} else {
		base := cmpOr(strings.TrimSpace(st.Base), DefaultBase)
		if dc != nil && dc.Build != nil {
			b, bn, err := resolveBuild(in, project, dc, dcFile)
			if err != nil {
				return Spec{}, err
			}
			sp.Build, base = b, b.Tag
			notes = append(notes, bn...)
		} else if dc != nil && dc.Image != "" {
			if imageRef.MatchString(dc.Image) {
				base = dc.Image
			} else {
				note("The image %q in %s is not an image reference, so the sandbox is generated on %s instead.", dc.Image, dcFile, base)
			}
		}
		sp.Features = resolveFeatures(dc, dcFile, base)
		r := &Recipe{Base: base, Packages: st.Packages, Agents: st.Agents, Setup: st.Setup}
		_, rn := r.Compile()
		notes = append(notes, rn...)
		sp.Recipe, sp.Image = r, r.Tag()
	}

	// Mounts.
	mounts, mn, err := resolveMounts(in, project, dcFile)
	if err != nil {
		return Spec{}, err
	}
	sp.Mounts = mounts
	notes = append(notes, mn...)

	// Env.
	env, remote, en := resolveEnv(st, dc, dcFile)
	sp.Env, sp.RemoteEnv = env, remote
	if dc != nil {
		sp.Lifecycle = lifecycle(dc, dcFile, note)
	}
	notes = append(notes, en...)

	// User.
	host := ""
	if in.HostUID >= 0 && in.HostGID >= 0 {
		host = fmt.Sprintf("%d:%d", in.HostUID, in.HostGID)
	}
	user, un := resolveUser(st, dc, dcFile, host)
	sp.User = user
	sp.UserOrigin = userOrigin(st, dc, dcFile, user)
	notes = append(notes, un...)
	sp.UsernsKeepID = in.Flavor == FlavorPodman && in.Rootless && user != "" && !isRoot(user)

	// Network.
	network, ok := parseNetwork(st.Network)
	if !ok {
		note("sandbox-network %q (from %s) is not open, allowlist, none or host; the sandbox uses open.", st.Network, st.Sources[KeyNetwork])
		network = NetworkOpen
	}
	sp.Egress = policyOf(network, st.NetworkAllow).Mode
	switch network {
	case NetworkOpen:
		sp.Network = NetworkBridge
		if in.Flavor != FlavorPodman {
			sp.ExtraHosts = []string{GatewayHost(in.Flavor) + ":host-gateway"}
		}
	case NetworkHost:
		sp.Network = NetworkHost
	case NetworkAllowlist, NetworkNone:
		sp.Network = NetworkNone
		sp.Env = withProxyVars(sp.Env)
	}
	switch network {
	case NetworkAllowlist:
		sp.Allow = st.NetworkAllow
		if len(sp.Allow) == 0 {
			note("sandbox-network is allowlist, but sandbox-network-allow lists no host, so every connection out of the sandbox is refused. List the hosts the agents need, their model APIs included (hutch project settings set sandbox-network-allow api.anthropic.com,github.com).")
		} else {
			note("sandbox-network is allowlist: the sandbox has no network of its own; while a hutch command runs in it, hutch's egress proxy lets it reach %s and nothing else (no service on the host either).", strings.Join(sp.Allow, ", "))
		}
	case NetworkNone:
		note("sandbox-network is none: hutch's egress proxy refuses every connection out of this sandbox, so agent CLIs cannot reach their model APIs and agents cannot reach services on the host. Use open, or allowlist with sandbox-network-allow, unless that is what you want.")
	}

	sp.Notes = notes
	sp.Hash = specHash(sp)
	configFile := ""
	if dc != nil {
		configFile = dc.Path
	}
	sp.Labels = Labels(project, configFile, sp.Hash)
	return sp, nil
}

// engineAsks notes what a devcontainer.json asks of the engine that the
// sandbox never grants, and the parts hutch does not run.
func engineAsks(dc *devcontainer.Config, dcFile string) []string {
	var notes []string
	var asks []string
	if len(dc.CapAdd) > 0 {
		asks = append(asks, "capAdd "+strings.Join(dc.CapAdd, ", "))
	}
	if len(dc.SecurityOpt) > 0 {
		asks = append(asks, "securityOpt "+strings.Join(dc.SecurityOpt, ", "))
	}
	if dc.Privileged {
		asks = append(asks, "privileged")
	}
	if len(asks) > 0 {
		notes = append(notes, fmt.Sprintf("%s asks for %s; the sandbox grants no capabilities beyond the engine's defaults, keeps its seccomp and AppArmor profiles and is never privileged, so agents cannot use them to leave it.", dcFile, strings.Join(asks, "; ")))
	}
	if len(dc.ComposeFiles) > 0 {
		// Only with sandbox-image (composeRefusal).
		notes = append(notes, fmt.Sprintf("%s describes a Docker Compose project (%s); hutch runs one container per project and does not start compose services: sandbox-image stands in for the image of %s, and the other services are not started.", dcFile, strings.Join(dc.ComposeFiles, ", "), composeService(dc)))
	}
	return notes
}

// composeRefusal refuses a devcontainer.json that describes a Docker
// Compose project, unless sandbox-image (image) names the image of the
// service to work in. The reference CLI starts the compose project and
// works in the service's container, built or pulled as the compose file
// says; hutch runs one container and no compose services, and applying
// the file's user, features and lifecycle commands to sandbox-base in
// the service's place would give an environment the file does not
// describe (its remoteUser missing from the image, its commands failing
// for want of the service's tools). So it says what to do instead.
func composeRefusal(dc *devcontainer.Config, dcFile, image string) error {
	if len(dc.ComposeFiles) == 0 || strings.TrimSpace(image) != "" {
		return nil
	}
	return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
		"%s describes a Docker Compose project (%s): an editor starts its services and works in the container of %s. hutch runs one container per project and starts no compose services, so it cannot make the environment the file describes. Set sandbox-image to the image of %s (hutch project settings set sandbox-image IMAGE) to have the file applied on it, or set sandbox-devcontainer to false to ignore the file.",
		dcFile, strings.Join(dc.ComposeFiles, ", "), composeService(dc), composeService(dc)))
}

// composeService names the compose service a devcontainer.json works in.
func composeService(dc *devcontainer.Config) string {
	if s := strings.TrimSpace(dc.Service); s != "" {
		return "the service " + s
	}
	return "the service the agents work in"
}

// workspaceNote says where the project is when the file puts it
// elsewhere than its own path, and the two lines that make an editor
// mount it as hutch does; "" when the file already does.
func workspaceNote(dc *devcontainer.Config, dcFile, project string) string {
	if dc.IdentityMapped(project) {
		return ""
	}
	where := dc.WorkspaceFolder
	how := "its workspaceFolder"
	if where == "" {
		where = path.Join("/workspaces", path.Base(project))
		how = "the spec's default workspace folder"
	}
	also := ""
	if target, ok := fileWorkspace(dc, project); ok {
		also = fmt.Sprintf(", and also at %s, so that commands that name that path find it", target)
	}
	return fmt.Sprintf("%s puts the project at %s (%s); the sandbox mounts it at its own path, %s, where commands start, so that paths and git worktrees agree inside and out%s (${containerWorkspaceFolder} is %s). To have editors do the same, set in %s:\n"+
		"  \"workspaceMount\": \"source=${localWorkspaceFolder},target=${localWorkspaceFolder},type=bind\",\n"+
		"  \"workspaceFolder\": \"${localWorkspaceFolder}\"", dcFile, where, how, project, also, project, dcFile)
}

// systemDirs are targets a workspace folder is never mounted on: the
// image's own system and hutch's paths.
var systemDirs = []string{"/bin", "/boot", "/dev", "/etc", "/hutch", "/lib", "/lib64", "/proc", "/root", "/run", "/sandbox", "/sbin", "/sys", "/tmp", "/usr", "/var"}

// fileWorkspace is where the file itself would mount the project, when
// that is not the project's own path: its workspaceMount's target when
// that mounts the project, else its workspaceFolder, else the spec's
// /workspaces/<basename>. The sandbox mounts the project there too, so
// that a lifecycle command or script that names the path (cd
// /workspaces/app) finds it. ok is false when the file mounts something
// else there (a parent folder, a volume), and for a target that is / or
// a system or hutch folder, or beneath one.
func fileWorkspace(dc *devcontainer.Config, project string) (target string, ok bool) {
	if dc.IdentityMapped(project) {
		return "", false
	}
	target = dc.WorkspaceFolder
	if m := strings.TrimSpace(dc.WorkspaceMount); m != "" {
		var src, typ string
		target = ""
		for field := range strings.SplitSeq(m, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(field), "=")
			switch strings.ToLower(k) {
			case "source", "src":
				src = v
			case "target", "destination", "dst":
				target = v
			case "type":
				typ = strings.ToLower(v)
			}
		}
		if (typ != "" && typ != "bind") || path.Clean(src) != project {
			return "", false
		}
	}
	if target == "" {
		target = path.Join("/workspaces", path.Base(project))
	}
	if !path.IsAbs(target) {
		return "", false
	}
	target = path.Clean(target)
	if target == "/" || target == project {
		return "", false
	}
	for _, d := range systemDirs {
		if target == d || strings.HasPrefix(target, d+"/") {
			return "", false
		}
	}
	return target, true
}

// placed is a mount and where it came from, for notes and refusals.
type placed struct {
	Mount
	origin string
}

const homeOrigin = "the home volume"

// resolveMounts is the sandbox's mounts: the fixed ones, then the
// devcontainer's, then the settings', checked and one per target.
func resolveMounts(in Input, project, dcFile string) ([]Mount, []string, error) {
	name := ContainerName(project)
	all := []placed{
		{Mount{Type: MountBind, Source: project, Target: project}, "the project"},
		{Mount{Type: MountVolume, Source: HomeVolume(name), Target: HomeTarget}, homeOrigin},
	}
	if in.RelayDir != "" {
		all = append(all, placed{Mount{Type: MountBind, Source: path.Clean(in.RelayDir), Target: RelayTarget, ReadOnly: true}, "the relay directory"})
	}
	if dc := in.Devcontainer; dc != nil {
		if target, ok := fileWorkspace(dc, project); ok {
			all = append(all, placed{Mount{Type: MountBind, Source: project, Target: target, Origin: dcFile + " (its workspace folder)"}, dcFile + "'s workspace folder"})
		}
	}
	check := func(m Mount, origin, advice string) error {
		if err := refuseMount(m, in.Home, advice); err != nil {
			return err
		}
		reserved := ""
		switch m.Target {
		case project:
			reserved = "the project is already mounted there, at its own path."
		case RelayTarget:
			reserved = "hutch mounts its relay directory there."
		}
		if reserved != "" {
			return errdefs.New(errdefs.ErrInvalid, describeMount(m)+": "+reserved+" "+advice)
		}
		all = append(all, placed{m, origin})
		return nil
	}
	if dc := in.Devcontainer; dc != nil {
		advice := fmt.Sprintf("Remove it from the mounts in %s, or set sandbox-devcontainer to false to ignore that file.", dcFile)
		for _, d := range dc.Mounts {
			m := Mount{Type: d.Type, Source: d.Source, Target: d.Target, ReadOnly: d.ReadOnly, Origin: dcFile}
			if m.Type == MountBind && path.IsAbs(m.Source) {
				m.Source = path.Clean(m.Source)
			}
			if path.IsAbs(m.Target) {
				m.Target = path.Clean(m.Target)
			}
			if err := check(m, dcFile, advice); err != nil {
				return nil, nil, err
			}
		}
	}
	source := cmpOr(in.Settings.Sources[KeyMount], "the settings")
	for _, raw := range in.Settings.Mounts {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		m, err := ParseMount(raw, in.Home)
		if err != nil {
			return nil, nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s Fix it in sandbox-mount in %s.", err.Error(), source))
		}
		m.Origin = "sandbox-mount in " + source
		if err := check(m, "sandbox-mount", fmt.Sprintf("Remove it from sandbox-mount in %s.", source)); err != nil {
			return nil, nil, err
		}
	}

	// One mount per target: the last wins, where it stands.
	var notes []string
	last := map[string]int{}
	for i, p := range all {
		last[p.Target] = i
	}
	var out []Mount
	for i, p := range all {
		j := last[p.Target]
		if j == i {
			out = append(out, p.Mount)
			continue
		}
		w := all[j]
		if p.origin == homeOrigin {
			notes = append(notes, fmt.Sprintf("%s puts %s at %s in place of the home volume %s, so logins and shell history are kept there instead.", w.origin, describeSource(w.Mount), HomeTarget, p.Source))
			continue
		}
		notes = append(notes, fmt.Sprintf("Two mounts target %s: %s from %s is used, and %s from %s is not.", p.Target, describeSource(w.Mount), w.origin, describeSource(p.Mount), p.origin))
	}
	return out, notes, nil
}

// describeSource names what a mount mounts, for a note.
func describeSource(m Mount) string {
	switch {
	case m.Type == MountVolume && m.Source == "":
		return "an anonymous volume"
	case m.Type == MountVolume:
		return "the volume " + m.Source
	}
	return m.Source
}

// env is an ordered environment where setting a name again replaces its
// value in place.
type env []EnvVar

func (e *env) set(name, value string) {
	for i := range *e {
		if (*e)[i].Name == name {
			(*e)[i].Value = value
			return
		}
	}
	*e = append(*e, EnvVar{name, value})
}

func (e *env) unset(name string) (string, bool) {
	for i, v := range *e {
		if v.Name == name {
			*e = append((*e)[:i], (*e)[i+1:]...)
			return v.Value, true
		}
	}
	return "", false
}

// resolveEnv is the container's environment (containerEnv, then
// sandbox-env, then HOME) and the environment each command gets on top
// of it (remoteEnv, less what sandbox-env or HOME decide).
func resolveEnv(st Resolved, dc *devcontainer.Config, dcFile string) (container, remote []EnvVar, notes []string) {
	var e, r env
	if dc != nil {
		for _, part := range []struct {
			key  string
			vars map[string]string
			to   *env
		}{{"containerEnv", dc.ContainerEnv, &e}, {"remoteEnv", dc.RemoteEnv, &r}} {
			for _, name := range sortedKeys(part.vars) {
				value := part.vars[name]
				switch {
				case !envName.MatchString(name):
					notes = append(notes, fmt.Sprintf("%s in %s sets %q, which is not a variable name (letters, digits and '_', not starting with a digit); it is not applied.", part.key, dcFile, name))
				case part.key == "containerEnv" && strings.Contains(value, "${containerEnv:"):
					notes = append(notes, fmt.Sprintf("containerEnv in %s sets %s from ${containerEnv:...}, which only remoteEnv may use; it is not applied. Move it to remoteEnv.", dcFile, name))
				default:
					part.to.set(name, value)
				}
			}
		}
	}
	dcHome, dcSetHome := e.unset("HOME")
	if h, ok := r.unset("HOME"); ok && !dcSetHome {
		dcHome, dcSetHome = h, true
	}
	userHome := false
	for i, raw := range st.Env {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		name, value, ok := strings.Cut(raw, "=")
		name = strings.TrimSpace(name)
		if !ok || !envName.MatchString(name) {
			what := fmt.Sprintf("entry %d", i+1)
			if ok {
				what = fmt.Sprintf("entry %d (%q)", i+1, name)
			}
			notes = append(notes, fmt.Sprintf("sandbox-env %s in %s is not NAME=VALUE with a name of letters, digits and '_' (not starting with a digit); it is ignored.", what, st.Sources[KeyEnv]))
			continue
		}
		userHome = userHome || name == "HOME"
		e.set(name, value)
		// The settings win over the file, for every command too.
		r.unset(name)
	}
	if !userHome {
		if dcSetHome && dcHome != HomeTarget {
			notes = append(notes, fmt.Sprintf("%s sets HOME to %q; the sandbox keeps HOME=%s, the home volume where logins persist. Set HOME in sandbox-env to override it.", dcFile, dcHome, HomeTarget))
		}
		e.set("HOME", HomeTarget)
	}
	return e, r, notes
}

// lifecycle is what the sandbox runs of the file's lifecycle commands:
// every hook but initializeCommand, which runs on the host and is
// refused with a note.
func lifecycle(dc *devcontainer.Config, dcFile string, note func(string, ...any)) map[string][]devcontainer.Lifecycle {
	var out map[string][]devcontainer.Lifecycle
	for _, h := range devcontainer.Hooks {
		entries := dc.Lifecycle[h]
		if len(entries) == 0 {
			continue
		}
		if h == "initializeCommand" {
			note("%s has an initializeCommand, which runs on the host; hutch never runs a project's commands on the host (agents can edit the project), so it is not run. Run it yourself if the project needs it.", dcFile)
			continue
		}
		if h == "postAttachCommand" {
			note("%s has a postAttachCommand, which an editor runs each time it attaches; hutch has no such moment (every command is its own), so it is not run. Run it with hutch project exec when you need it.", dcFile)
			continue
		}
		if out == nil {
			out = map[string][]devcontainer.Lifecycle{}
		}
		out[h] = entries
	}
	return out
}

func resolveUser(st Resolved, dc *devcontainer.Config, dcFile, host string) (string, []string) {
	var notes []string
	fallback := func() string {
		if host == "" {
			notes = append(notes, "Your user and group ids are not known, so the sandbox runs as its image's default user.")
		}
		return host
	}
	u := strings.TrimSpace(st.User)
	switch strings.ToLower(u) {
	case "host":
		return fallback(), notes
	case "root":
		return "0:0", notes
	case "":
		if dc == nil {
			return fallback(), notes
		}
		key, du := "remoteUser", strings.TrimSpace(dc.RemoteUser)
		if du == "" {
			key, du = "containerUser", strings.TrimSpace(dc.ContainerUser)
		}
		switch {
		case du == "":
			return fallback(), notes
		case !userRef.MatchString(du):
			notes = append(notes, fmt.Sprintf("%s in %s is %q, which is not a user name or uid[:gid]; the sandbox runs as your own user instead.", key, dcFile, du))
			return fallback(), notes
		}
		return du, notes
	}
	if !userRef.MatchString(u) {
		notes = append(notes, fmt.Sprintf("sandbox-user %q (from %s) is not host, root, a user name or uid[:gid]; the sandbox runs as your own user instead.", u, st.Sources[KeyUser]))
		return fallback(), notes
	}
	return u, notes
}

func isRoot(user string) bool {
	name, _, _ := strings.Cut(user, ":")
	return name == "0" || name == "root"
}

// proxyVars are the variables that point commands at EgressAddr, each
// in both spellings: tools read one or the other.
var proxyVars = [][2]string{{"HTTP_PROXY", "http_proxy"}, {"HTTPS_PROXY", "https_proxy"}, {"NO_PROXY", "no_proxy"}}

// withProxyVars sets the proxy variables in vars: a spelling set (by
// sandbox-env or the devcontainer) is kept and given to the other one
// too, else the value that leads to EgressAddr.
func withProxyVars(vars []EnvVar) env {
	e := env(vars)
	get := func(name string) (string, bool) {
		i := slices.IndexFunc(e, func(v EnvVar) bool { return v.Name == name })
		if i < 0 {
			return "", false
		}
		return e[i].Value, true
	}
	for _, pair := range proxyVars {
		value := "http://" + EgressAddr
		if pair[0] == "NO_PROXY" {
			value = "localhost,127.0.0.1,::1"
		}
		if v, ok := get(pair[0]); ok {
			value = v
		} else if v, ok := get(pair[1]); ok {
			value = v
		}
		for _, name := range pair {
			if _, ok := get(name); !ok {
				e.set(name, value)
			}
		}
	}
	return e
}

// Policy is what hutch's egress proxy enforces for the sandbox as the
// spec was resolved (a running box reads the settings again per
// connection).
func (sp Spec) Policy() netpolicy.Policy { return policyOf(string(sp.Egress), sp.Allow) }

// specHash hashes what shapes the container: the image (a recipe's tag
// covers its Dockerfile) and the features installed under it, workdir,
// mounts, env, user, network and limits.
// Name, labels and notes are left out: they follow from these or do not
// shape anything; so are the allowlist and the choice between allowlist
// and none, which the proxy reads per connection.
func specHash(sp Spec) string {
	network := sp.Network
	if sp.Egress.Proxied() {
		// Its agent relays: a none container made without the relay
		// (before there were policies) is not this one.
		network += " egress=" + EgressAddr
	}
	shape := struct {
		Image, Workdir string
		// Features: omitted when there are none, so that the hash of a
		// sandbox without features is what it was before they were
		// installed.
		Features           *Features `json:",omitempty"`
		Mounts             []Mount
		Env                []EnvVar
		User               string
		UsernsKeepID       bool
		Network            string
		ExtraHosts         []string
		Memory, CPUs, Pids int64
	}{sp.Image, sp.Workdir, sp.Features, sp.Mounts, sp.Env, sp.User, sp.UsernsKeepID, network, sp.ExtraHosts, sp.MemoryBytes, sp.NanoCPUs, sp.PidsLimit}
	b, err := json.Marshal(shape)
	if err != nil {
		panic(err) // strings, bools and ints always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
