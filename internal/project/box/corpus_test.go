package box_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features/featuretest"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// The devcontainer corpus (real projects' files, see its README.md), the
// stand-ins of the ghcr.io features it names, and the stand-in checkout
// files of entries whose devcontainer.json needs files of its repository
// the corpus does not hold (checkouts/<entry>/, overlaid on the entry's
// copy; the README's "What differs from the real repositories").
const (
	corpusDir       = "../../devcontainer/testdata/corpus"
	featureStandIns = "../../devcontainer/testdata/features/ghcr.io/devcontainers/features"
	checkoutsDir    = "../../devcontainer/testdata/checkouts"
)

// corpusMinJudged is the fewest entries the corpus gate may judge (all
// but corpusCannot's), so that the 90% is over a corpus worth the name.
const corpusMinJudged = 21

// corpusRefused are the entries hutch refuses, each for a documented
// reason, with the words of the refusal.
var corpusRefused = map[string]string{
	// The engine's socket: whoever reaches it is root on the host.
	"claude-code": "Refusing to mount /var/run/docker.sock",
	// The same, from the metadata of its docker-from-docker feature,
	// which binds the socket.
	"kubernetes-helm": "Refusing to mount /var/run/docker.sock",
	// Docker Compose projects: hutch runs one container and no compose
	// services, and the file describes the service's container, not
	// sandbox-base (project.composeRefusal).
	"docker-from-docker-compose": "describes a Docker Compose project",
	"mastodon":                   "describes a Docker Compose project",
	"rails":                      "describes a Docker Compose project",
}

// corpusCannot are the entries that cannot come up here for a reason of
// the corpus itself, not of hutch: the reason, and words of the failure
// that shows it. They are brought up all the same, and must fail so: an
// entry that comes up, or fails otherwise, is an error (the row is
// stale).
var corpusCannot = map[string]struct{ why, shows string }{
	"codex": {"its Dockerfile installs packages the stand-in's Debian does not have (just, aggregate), then downloads from deb.nodesource.com and sh.rustup.rs, and COPYs files the corpus lacks",
		"Could not build the image of"},
	"dotnet-runtime": {"its Dockerfile installs packages the stand-in's Debian does not have (llvm-9, clang-9, lldb-6.0), then downloads V8 from blob.core.windows.net",
		"Could not build the image of"},
	"home-assistant": {"its Dockerfile downloads from dl.yarnpkg.com and github.com and COPYs requirements files the corpus lacks",
		"Could not build the image of"},
	"try-node": {"its Dockerfile adds the yarn apt repository from dl.yarnpkg.com",
		"Could not build the image of"},
	"vscode": {"its Dockerfile downloads fonts and noVNC from github.com and COPYs files the corpus lacks",
		"Could not build the image of"},
	"kubernetes": {"the corpus lacks local-features/etcd/devcontainer-feature.json (the index did not hold it); its local features download from github.com besides",
		"feature ./local-features/etcd: it has no devcontainer-feature.json"},
	"nextjs": {"its local feature ./headless-browser installs packages the stand-in's Debian does not have (gconf-service, libgconf-2-4, libappindicator1), and ./rust downloads from raw.githubusercontent.com",
		"Could not install the features of"},
	"django": {"its postCreateCommand installs Django from its sources with pip, and PyPI is not reachable here",
		"The postCreateCommand from devcontainer.json"},
	"typescript": {"its postCreateCommand runs `sudo apt install graphviz` without `apt-get update`, and the stand-in's package lists are empty",
		"The postCreateCommand from devcontainer.json"},
}

// corpusDeliberate are the entries that fail because of what hutch does
// differently from the reference CLI on purpose (docs/devcontainer.md):
// the difference, and words of the failure that shows it. They count as
// failed; one that comes up, or fails otherwise, is an error.
var corpusDeliberate = map[string]struct{ why, shows string }{}

// corpusOutcome is what became of one entry.
type corpusOutcome struct {
	name string
	// kind is "up", "refused", "cannot" (corpusCannot, as expected) or
	// "failed".
	kind   string
	detail string
	took   time.Duration
}

// TestCLI_Corpus brings every entry of the devcontainer corpus up with
// `hutch project up`, as a user would: the entry copied into a fresh
// project, approved with `hutch project trust`, with nothing forced in
// the settings but no agent CLIs (sandbox-agents []), its images and
// features served by their stand-ins (testenv.DevcontainerStandIns; the
// in-process registry as the mirror of ghcr.io, HUTCH_FEATURE_MIRRORS).
// An entry that comes up must run commands as the user the file asks
// for (its remoteUser, else the image's devcontainer.metadata's, else its
// containerUser, else the caller's uid, hutch's default), in the project
// at its own path (hutch's documented rule, whatever workspaceFolder
// says). Entries hutch refuses must be refused with the documented
// reason (corpusRefused); entries that cannot come up for a reason of the
// corpus must fail for that reason (corpusCannot), as must those that
// fail for a deliberate difference of hutch's (corpusDeliberate, counted
// as failed). Entries with stand-in checkout files (checkoutsDir) get
// them in their copy. The gate is over the entries judged here (all but
// corpusCannot's): it fails when fewer than corpusMinJudged are judged,
// or when fewer than 90% of them come up or are refused.
func TestCLI_Corpus(t *testing.T) {
	t.Parallel()
	slow(t)
	start := time.Now()
	cli := testenv.Docker(t)
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	testenv.DevcontainerStandIns(t, cli, func(ctx context.Context, w io.Writer) (string, error) {
		return imagebuild.ResolveBase(ctx, eng, imagebuild.DefaultBase, w)
	})
	reg := featuretest.NewRegistry(t)
	standIns, err := os.ReadDir(featureStandIns)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range standIns {
		// One folder answers every major the corpus asks.
		for _, tag := range []string{"1", "2", "latest"} {
			reg.PushDir(t, "devcontainers/features/"+e.Name()+":"+tag, filepath.Join(featureStandIns, e.Name()))
		}
	}
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	for name := range corpusRefused {
		if !slices.Contains(names, name) {
			t.Errorf("corpusRefused names %s, which the corpus does not hold", name)
		}
	}
	for name := range corpusCannot {
		if !slices.Contains(names, name) {
			t.Errorf("corpusCannot names %s, which the corpus does not hold", name)
		}
	}
	for name := range corpusDeliberate {
		if !slices.Contains(names, name) {
			t.Errorf("corpusDeliberate names %s, which the corpus does not hold", name)
		}
	}
	checkouts, err := os.ReadDir(checkoutsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range checkouts {
		if e.IsDir() && !slices.Contains(names, e.Name()) {
			t.Errorf("%s/%s stands in for files of an entry the corpus does not hold", checkoutsDir, e.Name())
		}
	}

	var mu sync.Mutex
	var outcomes []corpusOutcome
	t.Run("entry", func(t *testing.T) {
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				began := time.Now()
				o := bringUpCorpusEntry(t, name, reg.Host)
				o.name, o.took = name, time.Since(began)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			})
		}
	})

	slices.SortFunc(outcomes, func(a, b corpusOutcome) int { return cmp.Compare(a.name, b.name) })
	count := map[string]int{}
	var report strings.Builder
	for _, o := range outcomes {
		count[o.kind]++
		fmt.Fprintf(&report, "  %-28s %-8s %5.1fs  %s\n", o.name, o.kind, o.took.Seconds(), o.detail)
	}
	judged := len(outcomes) - count["cannot"]
	share := 0.0
	if judged > 0 {
		share = float64(count["up"]+count["refused"]) / float64(judged)
	}
	// The measure is over the whole corpus; the entries that
	// cannot come up on this offline machine are counted against it
	// there, and the gate below is over the rest.
	overall := float64(count["up"]+count["refused"]) / float64(max(1, len(outcomes)))
	t.Logf("devcontainer corpus, %d entries in %s:\n%s"+
		"judged here %d: up %d / refused for a documented reason %d / failed %d: %.0f%% of the judged up or refused\n"+
		"not judged here %d: cannot come up here for a reason of the corpus (failed as expected)\n"+
		"of all %d: %.0f%% up or refused",
		len(outcomes), time.Since(start).Round(time.Second), report.String(),
		judged, count["up"], count["refused"], count["failed"], 100*share,
		count["cannot"], len(outcomes), 100*overall)
	if judged < corpusMinJudged {
		t.Errorf("%d corpus entries are judged here (all but corpusCannot's); want at least %d", judged, corpusMinJudged)
	}
	if share < 0.9 {
		t.Errorf("%.0f%% of the corpus entries judged here came up or were refused for a documented reason; want at least 90%%", 100*share)
	}
}

// bringUpCorpusEntry copies the corpus entry name into a fresh project,
// approves it, brings it up and checks who and where commands run.
func bringUpCorpusEntry(t *testing.T, name, registry string) corpusOutcome {
	// The checkout is named after its project, as a clone is.
	f := newFixtureNamed(t, nil, name)
	f.writeSettings(t, map[string]any{project.KeyAgents: []string{}})
	b := f.trackBuilds(t)
	b.recipes = true
	if err := os.CopyFS(f.project, os.DirFS(filepath.Join(corpusDir, name))); err != nil {
		t.Fatal(err)
	}
	overlayCheckout(t, f.project, name)
	f.extraEnv = []string{"HUTCH_FEATURE_MIRRORS=ghcr.io=" + registry}
	f.mustHutch(t, "trust")
	out, errOut, code := f.hutch(t, "up")
	b.record(errOut)
	if want, ok := corpusRefused[name]; ok {
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("up: exit %d, want a refusal saying %q\n%s", code, want, errOut)
			return corpusOutcome{kind: "failed", detail: "not refused as documented: " + lastLine(errOut)}
		}
		return corpusOutcome{kind: "refused", detail: want}
	}
	if c, ok := corpusCannot[name]; ok {
		if code == 0 || !strings.Contains(errOut, c.shows) {
			t.Errorf("up: exit %d, want it to fail (%s) saying %q; if it comes up now, remove its row from corpusCannot\n%s", code, c.why, c.shows, errOut)
			return corpusOutcome{kind: "failed", detail: "not as corpusCannot says: " + lastLine(errOut)}
		}
		o := corpusOutcome{kind: "cannot", detail: c.why}
		if strings.Contains(c.shows, "Command from") {
			// Only a lifecycle command failed: the sandbox is up, and
			// runs commands as the file says.
			if up := checkCorpusSandbox(t, f, name); up.kind != "up" {
				return up
			}
		}
		return o
	}
	if d, ok := corpusDeliberate[name]; ok {
		if code == 0 || !strings.Contains(errOut, d.shows) {
			t.Errorf("up: exit %d, want it to fail (%s) saying %q; if it comes up now, remove its row from corpusDeliberate\n%s", code, d.why, d.shows, errOut)
		}
		return corpusOutcome{kind: "failed", detail: d.why}
	}
	if code != 0 {
		t.Errorf("up: exit %d\n%s", code, errOut)
		return corpusOutcome{kind: "failed", detail: lastLine(errOut)}
	}
	checkRetiredNotes(t, f, out+errOut)
	return checkCorpusSandbox(t, f, name)
}

// checkRetiredNotes checks that `up` said, for each feature the entry
// names by a retired bare name ("docker-in-docker": "latest"), which
// ghcr.io feature it read it as.
func checkRetiredNotes(t *testing.T, f *fixture, output string) {
	t.Helper()
	path := filepath.Join(f.project, ".devcontainer", "devcontainer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file, err := devcontainer.Parse(path, data, devcontainer.Vars{LocalWorkspaceFolder: f.project})
	if err != nil {
		t.Fatal(err)
	}
	for _, feat := range file.Features {
		ref, err := features.ParseRef(feat.ID)
		if err != nil || !ref.Retired {
			continue
		}
		want := "Feature " + feat.ID + ": a bare name is the retired form of the bundled features; it is read as " + ref.Reference()
		if !strings.Contains(output, want) {
			t.Errorf("up did not say %q\n%s", want, output)
		}
	}
}

// overlayCheckout adds the stand-in checkout files of the entry name, if
// it has any, to its copy in dir. They are files the corpus does not hold
// (checkoutsDir); none may replace a file of the entry (os.CopyFS does
// not overwrite).
func overlayCheckout(t *testing.T, dir, name string) {
	t.Helper()
	src := filepath.Join(checkoutsDir, name)
	if _, err := os.Stat(src); os.IsNotExist(err) {
		return
	}
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatalf("stand-in checkout files of %s: %v", name, err)
	}
}

// checkCorpusSandbox checks who and where commands run in the entry's
// sandbox, which is up.
func checkCorpusSandbox(t *testing.T, f *fixture, name string) corpusOutcome {
	t.Helper()
	out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", `id -u; id -un 2>/dev/null || echo "?"; pwd`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantUser, why := corpusUser(t, f, name)
	got := ""
	if len(lines) == 3 {
		got = lines[1]
		if wantUser == "" {
			got, wantUser = lines[0], strconv.Itoa(os.Getuid())
		}
	}
	switch {
	case len(lines) != 3:
		t.Errorf("id and pwd in the sandbox: %q", out)
	case got != wantUser:
		t.Errorf("commands run as %s, want %s (%s)", got, wantUser, why)
	case lines[2] != f.project:
		t.Errorf("commands run in %s, want the project at its own path, %s", lines[2], f.project)
	default:
		return corpusOutcome{kind: "up", detail: fmt.Sprintf("user %s (%s)", got, why)}
	}
	return corpusOutcome{kind: "failed", detail: "user or working directory: " + strings.ReplaceAll(out, "\n", " ")}
}

// corpusUser is the user commands should run as in the entry's sandbox,
// and why: the file's remoteUser, else the remoteUser of its image's
// devcontainer.metadata (the sandbox's image holds the base's entries),
// else the same for containerUser; "" is hutch's default, the caller.
func corpusUser(t *testing.T, f *fixture, name string) (string, string) {
	t.Helper()
	path := filepath.Join(f.project, ".devcontainer", "devcontainer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file, err := devcontainer.Parse(path, data, devcontainer.Vars{LocalWorkspaceFolder: f.project})
	if err != nil {
		t.Fatal(err)
	}
	in := f.inspect(t, f.name)
	img, err := f.cli.ImageInspect(context.Background(), in.Container.Config.Image)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := devcontainer.ParseMetadata(img.Config.Labels[devcontainer.MetadataLabel], devcontainer.Vars{})
	image := devcontainer.Merge(entries...)
	if image == nil {
		image = &devcontainer.Config{}
	}
	switch {
	case file.RemoteUser != "":
		return file.RemoteUser, "the file's remoteUser"
	case image.RemoteUser != "":
		return image.RemoteUser, "the image metadata's remoteUser"
	case file.ContainerUser != "":
		return file.ContainerUser, "the file's containerUser"
	case image.ContainerUser != "":
		return image.ContainerUser, "the image metadata's containerUser"
	}
	return "", "hutch's default: the caller's uid"
}

// lastLine is the last non-empty line of s, for a one-line summary.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
