package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// projectConfig is what `hutch project config --json` prints: what the
// sandbox applies of the project's devcontainer.json, resolved as the
// next `hutch project up` would resolve it. The schema is stable: keys
// are added, never renamed or removed, and they are the Go names of the
// types they come from (project.Spec's fields, project.ImageBuild,
// project.EnvVar, project.Mount, devcontainer.Feature and
// devcontainer.Lifecycle), so the JSON reads like the spec it shows.
type projectConfig struct {
	// Project is the checkout, symlinks resolved.
	Project string
	// ConfigFile is the devcontainer.json found (or given with --config);
	// "" when the project has none.
	ConfigFile string
	// Applied says whether the sandbox applies ConfigFile. It does not
	// when the file is new or changed since it was approved, when
	// sandbox-devcontainer is off, or when the sandbox refuses it; a
	// note says which, and every other field then shows what applies
	// without the file.
	Applied bool
	// Image is what the container is made from (project.Spec.Image):
	// sandbox-image as given, or the tag of the recipe built on Base.
	// With features, the recipe builds on the image they are installed
	// into, whose tag follows from what fetching them finds: Image is
	// then the sandbox's image once it exists, "" before.
	Image string
	// Base is the image the recipe's layers go on: the image the
	// devcontainer's Dockerfile builds (Build.Tag), its image, or
	// sandbox-base. "" when sandbox-image is used as it is.
	Base  string              `json:",omitempty"`
	Build *project.ImageBuild `json:",omitempty"`
	// Features are the file's features as the sandbox installs them on
	// Base (project.Spec.Features); nil when there are none, or when
	// sandbox-image is used as it is (a note says so).
	Features *project.Features `json:",omitempty"`
	// User is who commands run as, in the engine's --user form, and
	// UserFrom where it came from.
	User     string
	UserFrom string
	// Workdir is the working directory: the project, mounted at its own
	// path.
	Workdir string
	// Env is the container's environment (containerEnv, sandbox-env,
	// HOME); RemoteEnv is what each command gets on top of it (remoteEnv;
	// a ${containerEnv:...} in it is filled from the container's
	// environment when a command runs). Values sandbox-env sets are shown
	// as "…": they often hold tokens.
	Env       []project.EnvVar
	RemoteEnv []project.EnvVar `json:",omitempty"`
	// Mounts are the sandbox's mounts, each with where it came from.
	Mounts []configMount
	// Lifecycle are the lifecycle commands the sandbox runs, by hook,
	// each entry with its origin (devcontainer.json or the image's
	// metadata), in the order they run.
	Lifecycle map[string][]devcontainer.Lifecycle `json:",omitempty"`
	// Metadata says whether an image's devcontainer.metadata label was
	// merged under the file.
	Metadata configMetadata
	// Notes are what the sandbox refuses or does differently, and why.
	Notes []string `json:",omitempty"`
}

// configMount is a project.Mount with where it came from (Mount.Origin
// is left out of the spec's JSON: it does not shape the container).
type configMount struct {
	project.Mount
	// Origin is the devcontainer.json, the image's devcontainer.metadata,
	// "sandbox-mount in <settings file>", or one of hutch's own mounts
	// ("hutch: the project", "hutch: the home volume", "hutch: the relay
	// directory").
	Origin string
}

// configMetadata says what became of an image's devcontainer.metadata
// label.
type configMetadata struct {
	// Image is the image whose label was looked for; "" when none was.
	Image string `json:",omitempty"`
	// Merged is true when the label was read and merged under the file,
	// as `hutch project up` merges it.
	Merged bool
	// Status says what happened, in a sentence.
	Status string
}

func (p *projectCmd) configCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show what the sandbox applies of the project's devcontainer.json",
		Long: `Show what the sandbox applies of the project's devcontainer.json, resolved
as the next hutch project up would: the file, the image or the Dockerfile
build and the features, the user commands run as, the working directory,
the container's environment and each command's (remoteEnv), the mounts and
where each came from, the lifecycle commands by hook, and notes on what is
refused or done differently, and why.

Like every project command, it applies the file only once you approved it
(hutch project trust); for a file that is new or changed it says so and
shows what applies without it. When the container engine answers and the
image the sandbox would use is there (the recipe's tag, sandbox-image, or
the devcontainer's image or build), the image's devcontainer.metadata
label is merged under the file as up merges it, and Metadata says whether
it was. Values sandbox-env sets are shown as …, as in hutch project
settings.

--json prints one object whose keys are stable (added to, never renamed):
Project, ConfigFile, Applied, Image, Base, Build {Dockerfile, Context,
Args, Target, Tag}, Features {Base, File, Dir, List [{ID, Options}],
Order, RemoteUser, ContainerUser}, User, UserFrom, Workdir,
Env [{Name, Value}], RemoteEnv [{Name, Value}], Mounts [{Type, Source,
Target, ReadOnly, Origin}], Lifecycle {hook: [{Origin, Commands [{Name,
Shell, Argv}]}]}, Metadata {Image, Merged, Status} and Notes.`,
		Example: "  hutch project config\n" +
			"  hutch project config --json | jq .Mounts\n" +
			"  hutch project --config .devcontainer/cuda/devcontainer.json config",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := p.resolveConfig(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(p.g.stdout)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				return enc.Encode(c)
			}
			return printConfig(p.g.stdout, c)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (its keys are listed above)")
	return cmd
}

// resolveConfig resolves the project's sandbox as load does, without
// needing the engine: when it answers, its flavour shapes the spec and
// the image's devcontainer.metadata label is merged; when it does not,
// the spec is the one a Docker engine would get. A devcontainer.json
// the sandbox refuses becomes a note, as in status.
func (p *projectCmd) resolveConfig(ctx context.Context) (projectConfig, error) {
	l, err := p.settings()
	if err != nil {
		return projectConfig{}, err
	}
	dc, err := p.devcontainer(l)
	if err != nil {
		return projectConfig{}, err
	}
	svc, err := p.g.service()
	if err != nil {
		return projectConfig{}, err
	}
	name := project.ContainerName(l.dir)
	in := project.Input{
		Project: l.dir, Home: p.home(), HostUID: os.Getuid(), HostGID: os.Getgid(),
		Settings: l.settings, Devcontainer: dc, Flavor: project.FlavorDocker,
		RelayDir: box.RelayDir(svc.Layout().StateDir, name),
	}
	eng, engErr := engine.Connect(ctx)
	if engErr == nil {
		defer func() { _ = eng.Close() }()
		in.Flavor = string(eng.Flavor)
		in.Rootless = eng.Flavor == engine.FlavorPodman && rootless(ctx, eng)
	}
	if in.Dockerfile, err = dockerfileOf(l, dc); err != nil {
		l.notes = append(l.notes, fmt.Sprintf("%s is not applied: %v", l.dcPath, err))
		in.Devcontainer = nil
	}
	spec, err := project.Resolve(in)
	if err != nil && in.Devcontainer != nil {
		l.notes = append(l.notes, fmt.Sprintf("%s is not applied: %v", l.dcPath, err))
		in.Devcontainer = nil
		spec, err = project.Resolve(in)
	}
	if err != nil {
		return projectConfig{}, err
	}
	dc = in.Devcontainer
	spec.Notes = append(slices.Clone(l.notes), spec.Notes...)

	meta := configMetadata{Status: "No devcontainer.json applies, so no image's devcontainer.metadata label is merged."}
	image := spec.Image
	if dc != nil {
		spec, meta, image = p.mergeMetadata(ctx, l, in, spec, eng, engErr)
	}
	c := configView(l, dc, spec, meta)
	c.Image = image
	return c, nil
}

// mergeMetadata merges the devcontainer.metadata label of what the
// sandbox would be made from, when the engine has it, through the same
// refine the box applies at up: the sandbox itself when it was made from
// this spec (up enters it, and its labels hold its image's), else the
// image up creates it from, else the one that image's recipe builds on
// (a recipe's image carries its base's labels). It also returns the
// image the container is made from, "" while that is not known (with
// features, the recipe builds on the image they are installed into,
// whose tag follows from what fetching them finds).
func (p *projectCmd) mergeMetadata(ctx context.Context, l *loaded, in project.Input, spec project.Spec, eng *engine.Engine, engErr error) (project.Spec, configMetadata, string) {
	image := spec.Image
	if spec.Features != nil && spec.Recipe != nil {
		image = ""
	}
	if engErr != nil {
		return spec, configMetadata{Status: fmt.Sprintf("The container engine did not answer (%v), so no image's devcontainer.metadata label is merged here; hutch project up merges it.", engErr)}, image
	}
	res, err := eng.Client.ContainerInspect(ctx, spec.Name, client.ContainerInspectOptions{})
	switch {
	case err == nil && res.Container.Config != nil:
		labels := res.Container.Config.Labels
		if labels[project.LabelOwner] == "hutch" && labels[project.LabelProject] == l.dir && labels[project.LabelSpec] == spec.Hash {
			img := res.Container.Config.Image
			sp, meta := p.mergeLabel(l, in, spec, img, labels[devcontainer.MetadataLabel], "")
			return sp, meta, img
		}
	case err != nil && !engine.IsNotFound(err):
		return spec, configMetadata{Status: fmt.Sprintf("The sandbox %s could not be inspected (%v), so no image's devcontainer.metadata label is merged here.", spec.Name, err)}, image
	}
	var candidates []string
	partial := ""
	if image != "" {
		candidates = append(candidates, image)
	} else {
		partial = " The features' metadata is not in it: hutch project up installs them, then merges theirs too."
	}
	if spec.Recipe != nil && spec.Recipe.Base != "" && spec.Recipe.Base != image {
		candidates = append(candidates, spec.Recipe.Base)
	}
	for _, img := range candidates {
		res, err := eng.Client.ImageInspect(ctx, img)
		if err != nil {
			if engine.IsNotFound(err) {
				continue
			}
			return spec, configMetadata{Image: img, Status: fmt.Sprintf("%s could not be inspected (%v), so its devcontainer.metadata label is not merged here.", img, err)}, image
		}
		label := ""
		if res.Config != nil {
			label = res.Config.Labels[devcontainer.MetadataLabel]
		}
		sp, meta := p.mergeLabel(l, in, spec, img, label, partial)
		return sp, meta, image
	}
	return spec, configMetadata{Status: fmt.Sprintf("%s is not there yet, so its devcontainer.metadata label is not merged here; hutch project up merges it once the image is built.", strings.Join(candidates, " (or ")+strings.Repeat(")", len(candidates)-1))}, image
}

// mergeLabel merges the devcontainer.metadata label of img under the
// file, with the box's own refine; partial ends the status when the
// label is not all up will merge.
func (p *projectCmd) mergeLabel(l *loaded, in project.Input, spec project.Spec, img, label, partial string) (project.Spec, configMetadata) {
	if strings.TrimSpace(label) == "" {
		return spec, configMetadata{Image: img, Status: img + " has no devcontainer.metadata label." + partial}
	}
	refined, err := p.refine(l, in)(label)
	if err != nil {
		spec.Notes = append(spec.Notes, fmt.Sprintf("The devcontainer.metadata label of %s makes the sandbox refuse to start: %v", img, err))
		return spec, configMetadata{Image: img, Status: fmt.Sprintf("The devcontainer.metadata label of %s is refused (see the notes); what is shown leaves it out.", img)}
	}
	return refined, configMetadata{Image: img, Merged: true, Status: fmt.Sprintf("The devcontainer.metadata label of %s is merged under the file, as hutch project up merges it.", img) + partial}
}

// configView shapes the spec into what config prints: origins put back
// on the user and the mounts, values from sandbox-env hidden.
func configView(l *loaded, dc *devcontainer.Config, sp project.Spec, meta configMetadata) projectConfig {
	c := projectConfig{
		Project: l.dir, ConfigFile: l.dcPath, Applied: dc != nil,
		Image: sp.Image, Build: sp.Build, Features: sp.Features,
		User: sp.User, UserFrom: userFrom(dc, sp, l.dcPath),
		Workdir:   sp.Workdir,
		Env:       hideSettingsEnv(sp.Env, l.settings.Env),
		RemoteEnv: sp.RemoteEnv,
		Lifecycle: sp.Lifecycle,
		Metadata:  meta,
		Notes:     sp.Notes,
	}
	if sp.Recipe != nil {
		c.Base = cmp.Or(sp.Recipe.Base, project.DefaultBase)
	}
	for _, m := range sp.Mounts {
		c.Mounts = append(c.Mounts, configMount{Mount: m, Origin: mountFrom(dc, sp, l.dcPath, m)})
	}
	if c.Env == nil {
		c.Env = []project.EnvVar{}
	}
	return c
}

// userFrom names where the spec's user came from. The resolver names
// the file for a user the image's metadata set (it sees them merged);
// the file's own keys tell the two apart.
func userFrom(dc *devcontainer.Config, sp project.Spec, dcFile string) string {
	switch {
	case sp.User == "":
		return "the image's default user (your uid and gid are not known)"
	case strings.HasPrefix(sp.UserOrigin, "sandbox-user"):
		return sp.UserOrigin
	case sp.UserOrigin != "" && dc != nil:
		if key := strings.TrimSpace(dc.RemoteUser); key != "" {
			if key == sp.User {
				return "remoteUser in " + dcFile
			}
		} else if strings.TrimSpace(dc.ContainerUser) == sp.User {
			return "containerUser in " + dcFile
		}
		return devcontainer.ImageOrigin
	case sp.UserOrigin != "":
		return sp.UserOrigin
	}
	return "your uid:gid (no remoteUser, containerUser or sandbox-user sets one)"
}

// mountFrom names where a mount came from: hutch's own by its target,
// one the resolver credits to the file but whose target the file does
// not name came from the image's metadata.
func mountFrom(dc *devcontainer.Config, sp project.Spec, dcFile string, m project.Mount) string {
	if m.Origin == "" {
		switch m.Target {
		case sp.Workdir:
			return "hutch: the project"
		case project.HomeTarget:
			return "hutch: the home volume"
		case project.RelayTarget:
			return "hutch: the relay directory"
		}
		return "hutch"
	}
	if m.Origin == dcFile && dc != nil && !slices.ContainsFunc(dc.Mounts, func(d devcontainer.Mount) bool { return path.Clean(d.Target) == m.Target }) {
		return devcontainer.ImageOrigin
	}
	return m.Origin
}

// hideSettingsEnv replaces the values of the variables sandbox-env sets
// (which win over the file's) with "…".
func hideSettingsEnv(vars []project.EnvVar, settingsEnv []string) []project.EnvVar {
	set := map[string]bool{}
	for _, raw := range settingsEnv {
		if name, _, ok := strings.Cut(raw, "="); ok {
			set[strings.TrimSpace(name)] = true
		}
	}
	out := slices.Clone(vars)
	for i := range out {
		if set[out[i].Name] {
			out[i].Value = "…"
		}
	}
	return out
}

// printConfig writes the text form: a table of the single values, then
// one list per section.
func printConfig(w io.Writer, c projectConfig) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	out := &printer{w: tw}
	out.printf("Project\t%s\n", c.Project)
	switch {
	case c.ConfigFile == "":
		out.printf("Config\t(none: looked for %s)\n", strings.Join(devcontainer.Candidates, ", "))
	case c.Applied:
		out.printf("Config\t%s\n", c.ConfigFile)
	default:
		out.printf("Config\t%s (not applied: see the notes)\n", c.ConfigFile)
	}
	switch {
	case c.Image == "" && c.Features != nil:
		out.printf("Image\t(hutch's recipe on the features installed on %s; its tag is known once hutch project up fetches them)\n", c.Base)
	case c.Base != "":
		out.printf("Image\t%s (hutch's recipe on %s)\n", c.Image, c.Base)
	default:
		out.printf("Image\t%s\n", c.Image)
	}
	if b := c.Build; b != nil {
		out.printf("Build\t%s, context %s\n", b.Dockerfile, b.Context)
		if b.Target != "" {
			out.printf("\ttarget %s\n", b.Target)
		}
		for _, k := range slices.Sorted(maps.Keys(b.Args)) {
			out.printf("\targ %s=%s\n", k, b.Args[k])
		}
	}
	var features []devcontainer.Feature
	if c.Features != nil {
		features = c.Features.List
	}
	for i, f := range features {
		label := ""
		if i == 0 {
			label = "Features"
		}
		var opts []string
		for _, k := range slices.Sorted(maps.Keys(f.Options)) {
			opts = append(opts, k+"="+f.Options[k])
		}
		if len(opts) > 0 {
			out.printf("%s\t%s (%s)\n", label, f.ID, strings.Join(opts, ", "))
		} else {
			out.printf("%s\t%s\n", label, f.ID)
		}
	}
	out.printf("User\t%s, from %s\n", cmp.Or(c.User, "(the image's)"), c.UserFrom)
	out.printf("Workdir\t%s\n", c.Workdir)
	out.printf("Metadata\t%s\n", c.Metadata.Status)
	if err := out.flush(tw); err != nil {
		return err
	}
	out = &printer{w: w}
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		out.println("")
		out.println(title)
		for _, l := range lines {
			// A note's later lines (a snippet to paste) are indented
			// under its first.
			out.println("  " + strings.ReplaceAll(l, "\n", "\n    "))
		}
	}
	section("Container environment:", envLines(c.Env))
	section("Each command's environment (remoteEnv), on top of it:", envLines(c.RemoteEnv))
	if out.err != nil {
		return out.err
	}
	if len(c.Mounts) > 0 {
		out.println("")
		out.println("Mounts:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		rows := &printer{w: tw}
		rows.println("  TARGET\tSOURCE\tTYPE\tFROM")
		for _, m := range c.Mounts {
			typ := m.Type
			if m.ReadOnly {
				typ += ", read-only"
			}
			rows.printf("  %s\t%s\t%s\t%s\n", m.Target, cmp.Or(m.Source, "(anonymous)"), typ, m.Origin)
		}
		if err := rows.flush(tw); err != nil {
			return err
		}
	}
	var life []string
	for _, h := range devcontainer.Hooks {
		for _, e := range c.Lifecycle[h] {
			for _, cmd := range e.Commands {
				life = append(life, fmt.Sprintf("%s (%s): %s", lifecycleName(h, cmd.Name), e.Origin, commandText(cmd)))
			}
		}
	}
	section("Lifecycle commands, in the order they run:", life)
	section("Notes:", c.Notes)
	return out.err
}

func envLines(vars []project.EnvVar) []string {
	lines := make([]string, len(vars))
	for i, v := range vars {
		lines[i] = v.String()
	}
	return lines
}

// lifecycleName is a hook, with the command's name in the object form.
func lifecycleName(hook, name string) string {
	if name == "" {
		return hook
	}
	return hook + " " + name
}

// commandText is a lifecycle command as it runs: the shell string, or
// the argv, each argument quoted where a shell would need it.
func commandText(c devcontainer.Command) string {
	if c.Argv == nil {
		return c.Shell
	}
	words := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		words[i] = shellWord(a)
	}
	return strings.Join(words, " ")
}
