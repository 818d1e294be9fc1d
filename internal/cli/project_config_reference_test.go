package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailscale/hujson"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// corpusDir holds the real devcontainer.json files of issue 22.
const corpusDir = "../devcontainer/testdata/corpus"

// docDifferences is the section the differences are documented in, one
// list item per entry of the differences table, led by its name in bold
// (TestProjectConfig_DifferencesDocumented).
const docDifferences = "docs/devcontainer.md#differences-from-the-reference-cli"

// mergedFails are the entries whose --include-merged-configuration the
// reference CLI cannot give here, even without their features (a
// ghcr.io feature cannot be resolved without a registry; see
// withoutFeatures): their compose files need docker compose. Any other
// entry must give it: the stand-ins make their images inspectable.
var mergedFails = map[string]bool{
	"docker-from-docker-compose": true, "mastodon": true, "rails": true,
}

// checkoutsDir holds stand-in checkout files of entries whose
// devcontainer.json names files of their repository the corpus does not
// hold (moby's root Dockerfile is the engine's own build): checkouts/<entry>/
// is overlaid on the entry's copy, as TestCLI_Corpus does. Without moby's,
// hutch refuses the file (its Dockerfile does not exist) and only the
// reference would read the rest of it.
const checkoutsDir = "../devcontainer/testdata/checkouts"

// difference is one way in which what hutch applies of a file differs
// from what the reference CLI reports: Field (user, workspaceFolder,
// containerEnv, remoteEnv, mount, lifecycle), Key (the variable, the
// mount's target, the hook) and each side's value, "" for absent.
type difference struct {
	Field, Key string
	Ref, Hutch string
	// RefHas and HutchHas tell an empty value from an absent one.
	RefHas, HutchHas bool
}

func (d difference) String() string {
	side := func(has bool, v string) string {
		if !has {
			return "(absent)"
		}
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%s %s: reference %s, hutch %s", d.Field, d.Key, side(d.RefHas, d.Ref), side(d.HutchHas, d.Hutch))
}

// comparison is one corpus entry, both sides.
type comparison struct {
	project string // the copy both ran on
	id      string // ${devcontainerId} of the copy
	user    string // the caller's uid:gid
	ref     refConfig
	hutch   projectConfig
	// fileEnv are the containerEnv names devcontainer.json itself sets
	// (the reference's merged configuration adds the image's).
	fileEnv map[string]bool
}

// allowed is one deliberate difference: what it is (the name of its item
// in the documentation), why, and where it is documented; explains
// reports whether it accounts for d.
type allowed struct {
	what, why, doc string
	explains       func(c *comparison, d difference) bool
}

// differences is the one table of every way hutch may differ from the
// reference CLI on the corpus. Each entry names the section of
// docs/devcontainer.md that explains it to users; a difference no entry
// explains fails the test, and so does an entry no file needs.
var differences = []allowed{
	{
		what: "workspaceFolder and the workspace mount",
		why:  "hutch mounts the project at its own path, where commands start, so paths and git worktrees agree inside and out, and ${containerWorkspaceFolder} is that path (it mounts it at the file's workspace folder too); the reference uses workspaceFolder, or /workspaces/<basename>",
		doc:  docDifferences,
		explains: func(c *comparison, d difference) bool {
			ws := c.ref.Workspace.WorkspaceFolder
			switch {
			case d.Field == "workspaceFolder":
				return d.Ref == ws && d.Hutch == c.project
			case d.Field == "mount" && d.Key == c.ref.workspaceTarget():
				return d.RefHas && !d.HutchHas
			case d.Field == "mount" && d.Key == c.project:
				return !d.RefHas && d.Hutch == "bind "+c.project
			case d.Field == "mount" && d.Key == ws:
				// A compose file's workspace: the reference leaves it to
				// the service; hutch mounts the project there too.
				return !d.RefHas && d.Hutch == "bind "+c.project
			case d.Field == "mount" && ws != "" && d.RefHas && !d.HutchHas && strings.HasPrefix(d.Key, ws+"/"):
				// A mount the file puts below ${containerWorkspaceFolder}:
				// hutch's is below the project's own path.
				return c.hutchMounts()[c.project+strings.TrimPrefix(d.Key, ws)] == d.Ref
			case d.Field == "mount" && ws != "" && !d.RefHas && d.HutchHas && strings.HasPrefix(d.Key, c.project+"/"):
				return c.ref.effective().mounts[ws+strings.TrimPrefix(d.Key, c.project)] == d.Hutch
			}
			return d.RefHas && d.HutchHas && ws != "" && strings.ReplaceAll(d.Ref, ws, c.project) == d.Hutch
		},
	},
	{
		what: "the home volume and the relay directory",
		why:  "hutch adds its own mounts: a named volume at /sandbox/home that keeps logins across rebuilds, and its relay directory, read-only at /sandbox/relay",
		doc:  docDifferences,
		explains: func(c *comparison, d difference) bool {
			return d.Field == "mount" && !d.RefHas && (d.Key == project.HomeTarget || d.Key == project.RelayTarget)
		},
	},
	{
		what: "HOME",
		why:  "hutch sets HOME=/sandbox/home, the home volume, so logins persist",
		doc:  docDifferences,
		explains: func(c *comparison, d difference) bool {
			return d.Field == "containerEnv" && d.Key == "HOME" && d.Hutch == project.HomeTarget
		},
	},
	{
		what: "user without remoteUser or containerUser",
		why:  "with no remoteUser (nor containerUser, nor one in the image's metadata) hutch runs as your uid:gid, so files in the project keep their owner; the reference as the image's user",
		doc:  docDifferences,
		explains: func(c *comparison, d difference) bool {
			return d.Field == "user" && d.Ref == "" && d.Hutch == c.user
		},
	},
	{
		what: "the image's containerEnv",
		why:  "an image's and its features' containerEnv are built into the image as ENV, so the container has them from the image; hutch does not give them to the container again (where ${PATH} in them would stay as text), the reference lists them with the file's",
		doc:  docDifferences,
		explains: func(c *comparison, d difference) bool {
			return d.Field == "containerEnv" && d.RefHas && !d.HutchHas && !c.fileEnv[d.Key] && c.hutch.Metadata.Merged
		},
	},
	{
		what: "the metadata of an image not built yet",
		why:  "hutch project config merges an image's devcontainer.metadata label once the image exists (hutch project up builds it, then merges it); the reference reads the label of the Dockerfile's FROM image before building",
		doc:  docDifferences,
		explains: func(c *comparison, d difference) bool {
			if c.hutch.Metadata.Merged || c.hutch.Build == nil || c.ref.Merged == nil {
				return false
			}
			switch d.Field {
			case "user":
				return c.ref.fileUser() == "" && d.Ref != "" && d.Hutch == c.user
			case "containerEnv":
				return d.RefHas && !d.HutchHas && !c.fileEnv[d.Key]
			}
			return false
		},
	},
	{
		what: "a file that mounts the engine's socket",
		why:  "a file that mounts /var/run/docker.sock is refused as a whole (whoever reaches the socket is root on the host), so nothing of it applies until the mount is removed",
		doc:  docDifferences,
		explains: func(c *comparison, d difference) bool {
			return !c.hutch.Applied && slices.ContainsFunc(c.hutch.Notes, func(n string) bool {
				return strings.Contains(n, "is not applied: Refusing to mount /var/run/docker.sock at /var/run/docker.sock")
			})
		},
	},
	{
		what: "postAttachCommand",
		why:  "an editor runs it each time it attaches; hutch has no such moment (every command is its own), so it is not run and config does not list it (a note says so); the reference lists it with the other lifecycle commands",
		doc:  docDifferences,
		explains: func(c *comparison, d difference) bool {
			return d.Field == "lifecycle" && d.Key == "postAttachCommand" && d.RefHas && !d.HutchHas
		},
	},
	{
		what: "${devcontainerId}",
		why:  "hutch fills it from the id labels it stamps on the sandbox, as an editor does; the reference leaves it as written without a container",
		doc:  docDifferences,
		explains: func(c *comparison, d difference) bool {
			return d.RefHas && d.HutchHas && strings.Contains(d.Ref, "${devcontainerId}") &&
				strings.ReplaceAll(d.Ref, "${devcontainerId}", c.id) == d.Hutch
		},
	},
}

// refConfig is what read-configuration prints, as far as the comparison
// reads it.
type refConfig struct {
	Configuration map[string]json.RawMessage `json:"configuration"`
	Workspace     struct {
		WorkspaceFolder string `json:"workspaceFolder"`
		WorkspaceMount  string `json:"workspaceMount"`
	} `json:"workspace"`
	Merged map[string]json.RawMessage `json:"mergedConfiguration"`
}

// fileUser is the file's own remoteUser, else its containerUser.
func (r refConfig) fileUser() string {
	var user, containerUser string
	_ = json.Unmarshal(r.Configuration["remoteUser"], &user)
	_ = json.Unmarshal(r.Configuration["containerUser"], &containerUser)
	return cmp.Or(user, containerUser)
}

// workspaceTarget is where the reference mounts the workspace; "" when
// it does not (a compose file mounts it, if anything does).
func (r refConfig) workspaceTarget() string {
	if r.Workspace.WorkspaceMount == "" {
		return ""
	}
	b, _ := json.Marshal(r.Workspace.WorkspaceMount)
	_, _, target := refMount(b)
	return target
}

// TestProjectConfig_ReferenceCLI compares, for every file of the corpus,
// the user, working directory, environment, mounts and lifecycle
// commands `hutch project config --json` reports with what the
// reference devcontainer CLI's read-configuration reports on the same
// copy (with the image's metadata merged where it can be), and fails on
// any difference the differences table does not explain.
func TestProjectConfig_ReferenceCLI(t *testing.T) {
	refCLI := testenv.DevcontainerCLI(t)
	docker := testenv.Docker(t)
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	testenv.DevcontainerStandIns(t, docker, func(ctx context.Context, w io.Writer) (string, error) {
		return imagebuild.ResolveBase(ctx, eng, imagebuild.DefaultBase, w)
	})
	slugs := corpusSlugs(t)
	if len(slugs) < 20 {
		t.Fatalf("the corpus has %d entries, want at least 20", len(slugs))
	}
	var mu sync.Mutex
	used := map[string][]string{}
	t.Run("corpus", func(t *testing.T) {
		for _, slug := range slugs {
			t.Run(slug, func(t *testing.T) {
				t.Parallel()
				c := compareEntry(t, refCLI, slug)
				var unexplained []difference
				for _, d := range diff(c) {
					i := slices.IndexFunc(differences, func(a allowed) bool { return a.explains(c, d) })
					if i < 0 {
						unexplained = append(unexplained, d)
						continue
					}
					mu.Lock()
					used[differences[i].what] = append(used[differences[i].what], slug)
					mu.Unlock()
				}
				if len(unexplained) > 0 {
					var b strings.Builder
					for _, d := range unexplained {
						fmt.Fprintf(&b, "  %s\n", d)
					}
					refJSON, _ := json.MarshalIndent(c.ref, "", "  ")
					hutchJSON, _ := json.MarshalIndent(c.hutch, "", "  ")
					t.Errorf("%d differences no entry of the differences table explains (document each in %s and add it there, or fix hutch):\n%s\nreference:\n%s\nhutch:\n%s",
						len(unexplained), docDifferences, b.String(), refJSON, hutchJSON)
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	for _, a := range differences {
		if len(used[a.what]) == 0 {
			t.Errorf("no corpus file differs by %q: remove it from the table (and its documentation) if hutch no longer differs so", a.what)
			continue
		}
		slices.Sort(used[a.what])
		t.Logf("%s: %s", a.what, strings.Join(slices.Compact(used[a.what]), ", "))
	}
}

func corpusSlugs(t *testing.T) []string {
	t.Helper()
	des, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	for _, de := range des {
		if de.IsDir() {
			slugs = append(slugs, de.Name())
		}
	}
	return slugs
}

// compareEntry copies the entry to a checkout of its own under a home
// of its own, and asks both sides about it.
func compareEntry(t *testing.T, refCLI, slug string) *comparison {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	cfg := filepath.Join(root, "config")
	proj := filepath.Join(home, "code", slug)
	if err := os.CopyFS(proj, os.DirFS(filepath.Join(corpusDir, slug))); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(proj, ".git"), cfg} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(checkoutsDir, slug)); err == nil {
		if err := os.CopyFS(proj, os.DirFS(filepath.Join(checkoutsDir, slug))); err != nil {
			t.Fatalf("stand-in checkout files of %s: %v", slug, err)
		}
	}
	c := &comparison{project: proj, user: fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())}

	// hutch, in process, with the same HOME and nothing else of the
	// environment.
	e := newEnv(t)
	e.extra = map[string]string{"HOME": home, "HUTCH_CONFIG_DIR": cfg}
	e.ok("project", "-C", proj, "trust")
	if err := json.Unmarshal([]byte(e.ok("project", "-C", proj, "config", "--json")), &c.hutch); err != nil {
		t.Fatal(err)
	}
	if !c.hutch.Applied && slices.ContainsFunc(c.hutch.Notes, func(n string) bool { return strings.Contains(n, "describes a Docker Compose project") }) {
		// Refused until sandbox-image names the service's image, as
		// the note says: compare the file as it then applies, on the
		// stand-ins' base.
		e.ok("project", "-C", proj, "settings", "set", "sandbox-image", testenv.DevcontainerBaseRef)
		c.hutch = projectConfig{}
		if err := json.Unmarshal([]byte(e.ok("project", "-C", proj, "config", "--json")), &c.hutch); err != nil {
			t.Fatal(err)
		}
		if !c.hutch.Applied {
			t.Fatalf("with sandbox-image, the compose file is still not applied: %q", c.hutch.Notes)
		}
	}
	c.id = devcontainer.ID(map[string]string{project.LabelLocalFolder: proj, project.LabelConfigFile: c.hutch.ConfigFile})

	// The reference, with the same HOME; PATH finds node, DOCKER_HOST
	// the engine.
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		env = append(env, "DOCKER_HOST="+h)
	}
	out, err := readConfiguration(refCLI, proj, "", env, true)
	if err != nil {
		// Its features cannot be resolved here: merge the image's
		// metadata without them (hutch does not install features yet,
		// nor read a feature's metadata before it is built).
		if stripped, ok := withoutFeatures(t, c.hutch.ConfigFile); ok {
			out, err = readConfiguration(refCLI, proj, stripped, env, true)
		}
	}
	switch {
	case err == nil && mergedFails[slug]:
		t.Logf("the reference now gives the merged configuration of %s: take it out of mergedFails", slug)
	case err != nil && !mergedFails[slug]:
		t.Fatalf("read-configuration --include-merged-configuration: %v", err)
	case err != nil:
		if out, err = readConfiguration(refCLI, proj, "", env, false); err != nil {
			t.Fatalf("read-configuration: %v", err)
		}
	}
	if err := json.Unmarshal(out, &c.ref); err != nil {
		t.Fatalf("read-configuration printed %s: %v", out, err)
	}
	c.fileEnv = map[string]bool{}
	for k := range stringMap(c.ref.Configuration["containerEnv"]) {
		c.fileEnv[k] = true
	}
	return c
}

// withoutFeatures writes a copy of the devcontainer.json at path beside
// it with its features left out, and returns its path; false when the
// file has none.
func withoutFeatures(t *testing.T, path string) (string, bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := hujson.Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		return "", false
	}
	n := len(obj.Members)
	obj.Members = slices.DeleteFunc(obj.Members, func(m hujson.ObjectMember) bool {
		name, ok := m.Name.Value.(hujson.Literal)
		return ok && name.String() == "features"
	})
	if len(obj.Members) == n {
		return "", false
	}
	stripped := filepath.Join(filepath.Dir(path), "devcontainer.without-features.json")
	if err := os.WriteFile(stripped, v.Pack(), 0o644); err != nil {
		t.Fatal(err)
	}
	return stripped, true
}

// readConfiguration runs the reference CLI's read-configuration.
func readConfiguration(cli, dir, config string, env []string, merged bool) ([]byte, error) {
	args := []string{"read-configuration", "--workspace-folder", dir}
	if config != "" {
		args = append(args, "--config", config)
	}
	if merged {
		args = append(args, "--include-merged-configuration")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v\n%s", err, lastLines(stderr.String(), 10))
	}
	return stdout.Bytes(), nil
}

// hutchMounts maps each target hutch mounts to "type source", as diff
// writes them.
func (c *comparison) hutchMounts() map[string]string {
	h := map[string]string{}
	for _, m := range c.hutch.Mounts {
		h[m.Target] = m.Type + " " + m.Source
	}
	return h
}

// diff lists every difference between the two sides of c.
func diff(c *comparison) []difference {
	var out []difference
	add := func(field, key string, ref, hutch string, refHas, hutchHas bool) {
		if refHas == hutchHas && ref == hutch {
			return
		}
		out = append(out, difference{Field: field, Key: key, Ref: ref, Hutch: hutch, RefHas: refHas, HutchHas: hutchHas})
	}
	r := c.ref.effective()
	add("user", "", r.user, c.hutch.User, true, true)
	add("workspaceFolder", "", c.ref.Workspace.WorkspaceFolder, c.hutch.Workdir, true, true)
	for _, part := range []struct {
		field string
		ref   map[string]string
		hutch []project.EnvVar
	}{{"containerEnv", r.containerEnv, c.hutch.Env}, {"remoteEnv", r.remoteEnv, c.hutch.RemoteEnv}} {
		h := map[string]string{}
		for _, v := range part.hutch {
			h[v.Name] = v.Value
		}
		for _, k := range sortedUnion(part.ref, h) {
			rv, rok := part.ref[k]
			hv, hok := h[k]
			add(part.field, k, rv, hv, rok, hok)
		}
	}
	h := c.hutchMounts()
	for _, k := range sortedUnion(r.mounts, h) {
		rv, rok := r.mounts[k]
		hv, hok := h[k]
		add("mount", k, rv, hv, rok, hok)
	}
	hl := map[string]string{}
	for hook, entries := range c.hutch.Lifecycle {
		var cmds []string
		for _, e := range entries {
			for _, cmd := range e.Commands {
				cmds = append(cmds, renderCommand(cmd))
			}
		}
		hl[hook] = strings.Join(cmds, "; ")
	}
	for _, k := range sortedUnion(r.lifecycle, hl) {
		rv, rok := r.lifecycle[k]
		hv, hok := hl[k]
		add("lifecycle", k, rv, hv, rok, hok)
	}
	return out
}

func sortedUnion(a, b map[string]string) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// renderCommand is one lifecycle command as the comparison writes it:
// [name] then the shell string or the JSON argv.
func renderCommand(c devcontainer.Command) string {
	s := c.Shell
	if c.Argv != nil {
		b, _ := json.Marshal(c.Argv)
		s = string(b)
	}
	if c.Name != "" {
		s = "[" + c.Name + "] " + s
	}
	return s
}

// refEffective is the reference's side, normalised as hutch's is.
type refEffective struct {
	user                    string
	containerEnv, remoteEnv map[string]string
	// mounts maps a target to "type source", the workspace's included.
	mounts map[string]string
	// lifecycle maps a hook to its commands, rendered as renderCommand.
	lifecycle map[string]string
}

// effective reads the merged configuration when there is one, else the
// file's: remoteUser else containerUser, the two environments, the
// mounts (the workspace's too) and the lifecycle commands.
func (r refConfig) effective() refEffective {
	cfg, merged := r.Merged, true
	if cfg == nil {
		cfg, merged = r.Configuration, false
	}
	out := refEffective{
		containerEnv: stringMap(cfg["containerEnv"]),
		remoteEnv:    stringMap(cfg["remoteEnv"]),
		mounts:       map[string]string{},
		lifecycle:    map[string]string{},
	}
	var user, containerUser string
	_ = json.Unmarshal(cfg["remoteUser"], &user)
	_ = json.Unmarshal(cfg["containerUser"], &containerUser)
	out.user = cmp.Or(user, containerUser)
	var mounts []json.RawMessage
	_ = json.Unmarshal(cfg["mounts"], &mounts)
	if r.Workspace.WorkspaceMount != "" {
		b, _ := json.Marshal(r.Workspace.WorkspaceMount)
		mounts = append([]json.RawMessage{b}, mounts...)
	}
	for _, raw := range mounts {
		typ, source, target := refMount(raw)
		out.mounts[target] = typ + " " + source
	}
	for _, hook := range devcontainer.Hooks {
		var cmds []string
		if merged {
			var entries []json.RawMessage
			_ = json.Unmarshal(cfg[hook+"s"], &entries)
			for _, e := range entries {
				cmds = append(cmds, refCommands(e)...)
			}
		} else if raw, ok := cfg[hook]; ok {
			cmds = refCommands(raw)
		}
		if len(cmds) > 0 {
			out.lifecycle[hook] = strings.Join(cmds, "; ")
		}
	}
	return out
}

// refMount reads a mount as the reference writes it: a --mount string or
// an object. Without a type, a mount is a volume, as docker's --mount
// says.
func refMount(raw json.RawMessage) (typ, source, target string) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		typ = "volume"
		for field := range strings.SplitSeq(s, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "type":
				typ = v
			case "source", "src":
				source = v
			case "target", "destination", "dst":
				target = v
			}
		}
		return typ, source, target
	}
	var m struct{ Type, Source, Target string }
	_ = json.Unmarshal(raw, &m)
	return cmp.Or(m.Type, "volume"), m.Source, m.Target
}

// refCommands renders a lifecycle entry (a string, an array, or an
// object of either, in its order, as hutch keeps it) as renderCommand
// does.
func refCommands(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		return []string{renderCommand(devcontainer.Command{Shell: s})}
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		if len(argv) == 0 {
			return nil
		}
		return []string{renderCommand(devcontainer.Command{Argv: argv})}
	}
	var out []string
	for _, m := range orderedMembers(raw) {
		for _, c := range refCommands(m.raw) {
			out = append(out, "["+m.name+"] "+c)
		}
	}
	return out
}

// orderedMembers lists an object's members in their order.
func orderedMembers(raw json.RawMessage) []struct {
	name string
	raw  json.RawMessage
} {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []struct {
		name string
		raw  json.RawMessage
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return out
		}
		out = append(out, struct {
			name string
			raw  json.RawMessage
		}{name, v})
	}
	return out
}

func stringMap(raw json.RawMessage) map[string]string {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// lastLines is the end of a log, where the reference CLI says what
// failed.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestProjectConfig_DifferencesDocumented: every entry of the
// differences table is an item of the documentation's section, led by
// its name in bold, so that users can read what the test allows.
func TestProjectConfig_DifferencesDocumented(t *testing.T) {
	file, anchor, _ := strings.Cut(docDifferences, "#")
	data, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Differences from the reference CLI\n")
	if !ok || anchor != "differences-from-the-reference-cli" {
		t.Fatalf("%s has no section ## Differences from the reference CLI (#%s)", file, anchor)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	for _, a := range differences {
		if a.doc != docDifferences {
			t.Errorf("%q is documented in %s; the test checks %s only", a.what, a.doc, docDifferences)
		}
		if !strings.Contains(section, "\n- **"+a.what+"**: ") {
			t.Errorf("%s lacks the item \"- **%s**: ...\" (%s)", file, a.what, a.why)
		}
	}
}

// TestProjectConfig_UnexplainedDifferenceFails: the comparison sees a
// difference in each field it compares, the lifecycle forms of both
// sides compare equal, and the table explains none of these.
func TestProjectConfig_UnexplainedDifferenceFails(t *testing.T) {
	var ref refConfig
	if err := json.Unmarshal([]byte(`{
	  "configuration": {
	    "remoteUser": "vscode",
	    "containerEnv": {"A": "1"},
	    "remoteEnv": {"B": "2"},
	    "mounts": ["source=data,target=/data,type=volume", {"type": "bind", "source": "/src", "target": "/dst"}],
	    "postCreateCommand": {"one": "make", "two": ["echo", "x"]},
	    "postStartCommand": "run"
	  },
	  "workspace": {"workspaceFolder": "/p", "workspaceMount": "type=bind,source=/p,target=/p"}
	}`), &ref); err != nil {
		t.Fatal(err)
	}
	c := &comparison{project: "/p", user: "1000:1000", ref: ref, fileEnv: map[string]bool{"A": true}, hutch: projectConfig{
		Applied: true, User: "node", Workdir: "/p",
		Env:       []project.EnvVar{{Name: "A", Value: "one"}},
		RemoteEnv: []project.EnvVar{{Name: "C", Value: "3"}},
		Mounts: []configMount{
			{Mount: project.Mount{Type: "bind", Source: "/p", Target: "/p"}},
			{Mount: project.Mount{Type: "bind", Source: "data", Target: "/data"}},
			{Mount: project.Mount{Type: "bind", Source: "/src", Target: "/dst"}},
		},
		Lifecycle: map[string][]devcontainer.Lifecycle{
			"postCreateCommand": {{Commands: []devcontainer.Command{{Name: "one", Shell: "make"}, {Name: "two", Argv: []string{"echo", "x"}}}}},
			"postStartCommand":  {{Commands: []devcontainer.Command{{Shell: "run", Name: ""}, {Shell: "more"}}}},
		},
	}}
	var got []string
	for _, d := range diff(c) {
		got = append(got, d.String())
		if i := slices.IndexFunc(differences, func(a allowed) bool { return a.explains(c, d) }); i >= 0 {
			t.Errorf("%s is explained by %q", d, differences[i].what)
		}
	}
	want := []string{
		`user : reference "vscode", hutch "node"`,
		`containerEnv A: reference "1", hutch "one"`,
		`remoteEnv B: reference "2", hutch (absent)`,
		`remoteEnv C: reference (absent), hutch "3"`,
		`mount /data: reference "volume data", hutch "bind data"`,
		`lifecycle postStartCommand: reference "run", hutch "run; more"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
