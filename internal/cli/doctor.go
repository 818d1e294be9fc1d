package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
	"github.com/hutchsandbox/hutch/internal/microvm/qemu"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/kube"
	"github.com/hutchsandbox/hutch/internal/sandbox/microvm"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/settings"
)

func newDoctorCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what this machine offers hutch, and which modes can run here",
		Long: `Check the container engine (its version and the negotiated API version),
Podman, KVM, QEMU, the cgroup version and the state dir, then say for each
sandbox mode whether it can run here and, when not, why.

Each line is ok, missing (not there; the reason says what needs it), bad
(there but unusable) or no (a mode that cannot run here). Doctor changes
nothing: it does not create the state dir or start anything, and it exits 0
whatever it finds.

--json prints an array of {name, status, detail}, one per line of the
report.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			checks := diagnose(cmd.Context(), g.doctorProbes())
			if asJSON {
				return printJSON(g.stdout, doctorChecks(checks))
			}
			return renderDoctor(g.stdout, checks)
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

// doctorChecks is the report as hutch doctor --json prints it.
func doctorChecks(checks []check) []api.DoctorCheck {
	out := make([]api.DoctorCheck, 0, len(checks))
	for _, c := range checks {
		out = append(out, api.DoctorCheck{Name: c.Name, Status: c.Status, Detail: c.Reason})
	}
	return out
}

// engineInfo is what doctor reports of a connected engine.
type engineInfo struct {
	Host, Flavor, ServerVersion, APIVersion string
}

// kubeInfo is what doctor reports of the cluster kube mode would use.
type kubeInfo struct {
	// Configured: there is a cluster to look for (a kubeconfig, or the
	// service account of a pod). When false, the other fields are empty.
	Configured bool
	// Host is the API server's address, Namespace where pods would go,
	// Source where the credentials come from; all empty when the
	// configuration cannot be read.
	Host, Namespace, Source string
}

// doctorProbes is everything doctor reads from the machine, as functions
// so that tests replace the machine with fakes.
type doctorProbes struct {
	// Engine connects to the container engine named by the environment.
	Engine func(ctx context.Context) (engineInfo, error)
	// LookPath finds a program on PATH (exec.LookPath).
	LookPath func(file string) (string, error)
	// Getenv reads an environment variable.
	Getenv func(key string) string
	// Stat reports whether a path exists (an error wrapping
	// fs.ErrNotExist when it does not).
	Stat func(path string) error
	// OpenRW opens a device read-write and closes it again.
	OpenRW func(path string) error
	// StateDir returns the state dir hutch would use and its permission
	// bits, and checks it as hutch does before use. A state dir that does
	// not exist yet is an error wrapping fs.ErrNotExist.
	StateDir func() (path string, perm fs.FileMode, err error)
	// HardwareVirt reports whether the processor advertises vmx or svm.
	HardwareVirt func() bool
	// Virtiofsd finds the virtiofsd program (outside PATH on Debian).
	Virtiofsd func() (string, error)
	// Guest loads the manifest of the microVM guest assets in dir.
	Guest func(dir string) (assets.Manifest, error)
	// Kube finds the cluster of kube mode's settings and asks its API
	// server, within kubeTimeout; the error is why it does not answer.
	Kube func(ctx context.Context) (kubeInfo, error)
	// Network reads the global sandbox.network of the state dir.
	Network func() (settings.Network, error)
}

// The paths and programs doctor looks at.
const (
	kvmDevice         = "/dev/kvm"
	qemuProgram       = "qemu-system-x86_64"
	cgroupControllers = "/sys/fs/cgroup/cgroup.controllers"
)

// kubeTimeout bounds how long doctor waits for a cluster's API server.
const kubeTimeout = 5 * time.Second

// The statuses of a check.
const (
	checkOK      = "ok"
	checkMissing = "missing"
	checkBad     = "bad"
	checkNo      = "no"
)

// check is one line of doctor's report.
type check struct {
	Name, Status, Reason string
}

// doctorProbes returns the probes of the real machine.
func (g *globals) doctorProbes() doctorProbes {
	return doctorProbes{
		Engine: func(ctx context.Context) (engineInfo, error) {
			e, err := engine.Connect(ctx)
			if err != nil {
				return engineInfo{}, err
			}
			defer func() { _ = e.Close() }()
			return engineInfo{Host: e.Host, Flavor: string(e.Flavor), ServerVersion: e.ServerVersion, APIVersion: e.APIVersion}, nil
		},
		LookPath: exec.LookPath,
		Getenv:   g.env,
		Stat: func(p string) error {
			_, err := os.Stat(p)
			return err
		},
		OpenRW: func(p string) error {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			return f.Close()
		},
		StateDir:     g.probeStateDir,
		HardwareVirt: qemu.HardwareVirt,
		Virtiofsd:    qemu.FindVirtiofsd,
		Guest:        loadGuest,
		Kube:         g.probeKube,
		Network:      g.probeNetwork,
	}
}

// probeNetwork reads the global egress policy of containers and pods.
func (g *globals) probeNetwork() (settings.Network, error) {
	state, _, err := g.probeStateDir()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return settings.Network{}, err
	}
	rs, err := settings.LoadRuntime(settings.GlobalPath(state))
	if err != nil {
		return settings.Network{}, err
	}
	return settings.ResolveNetwork(rs, settings.Runtime{}, false), nil
}

// networkCheck shows the egress policy containers and pods get unless a
// conversation sets its own, so open egress is seen, never assumed.
func networkCheck(p doctorProbes) check {
	n, err := p.Network()
	if err != nil {
		return check{"network", checkBad, err.Error()}
	}
	reason := n.Describe()
	if n.Mode == netpolicy.ModeOpen {
		reason += "; commands in containers and pods can reach any host (hutch sandbox network --global allowlist --allow HOSTS to close it)"
	}
	return check{"network", checkOK, reason}
}

// probeKube connects to the cluster as kube mode would, from the
// sandbox.kube.* settings of the state dir, and pings it.
func (g *globals) probeKube(ctx context.Context) (kubeInfo, error) {
	state, _, _ := g.probeStateDir()
	rs, err := settings.LoadRuntime(settings.GlobalPath(state))
	if err != nil {
		return kubeInfo{Configured: true}, err
	}
	if !kube.Configured(rs.Kube.Kubeconfig) {
		return kubeInfo{}, nil
	}
	c, err := kube.Connect(rs.Kube.Kubeconfig, rs.Kube.Namespace)
	if err != nil {
		return kubeInfo{Configured: true}, err
	}
	info := kubeInfo{Configured: true, Host: c.Config.Host, Namespace: c.Namespace, Source: c.Source}
	if c, err = c.WithTimeout(kubeTimeout); err != nil {
		return info, err
	}
	ctx, cancel := context.WithTimeout(ctx, kubeTimeout)
	defer cancel()
	return info, c.Ping(ctx)
}

// loadGuest loads a guest's manifest; a directory without one is
// fs.ErrNotExist (not built yet), anything else is a broken build.
func loadGuest(dir string) (assets.Manifest, error) {
	if _, err := os.Stat(filepath.Join(dir, assets.ManifestName)); err != nil {
		return assets.Manifest{}, err
	}
	return assets.Load(dir)
}

// probeStateDir finds the state dir as ResolveLayout does, without
// creating it, and runs ResolveLayout's checks on one that exists.
func (g *globals) probeStateDir() (string, fs.FileMode, error) {
	dir := g.stateDir
	if dir == "" {
		dir = g.env("HUTCH_STATE_DIR")
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "~/.hutch", 0, fmt.Errorf("cannot find a home directory for the state dir: %w", err)
		}
		dir = filepath.Join(home, ".hutch")
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return dir, 0, err
	}
	if _, err := service.ResolveLayout(service.LayoutOptions{StateDir: dir, Workspace: g.workspace, Getenv: g.getenv}); err != nil {
		return dir, fi.Mode().Perm(), err
	}
	return dir, fi.Mode().Perm(), nil
}

// diagnose runs every check against p.
func diagnose(ctx context.Context, p doctorProbes) []check {
	var out []check
	eng, engErr := p.Engine(ctx)
	if engErr != nil {
		out = append(out, check{"engine", checkMissing, engErr.Error()})
	} else {
		reason := fmt.Sprintf("%s %s, API %s, at %s", eng.Flavor, eng.ServerVersion, eng.APIVersion, eng.Host)
		e := &engine.Engine{Flavor: engine.Flavor(eng.Flavor), ServerVersion: eng.ServerVersion}
		var notes []string
		if !e.CanUpdateLimits() {
			notes = append(notes, "boosts and temporary limits need Podman 5.1 or later")
		}
		if e.KillsBuildSteps() {
			notes = append(notes, fmt.Sprintf("before 4.6, Podman sometimes kills a step of an image build run beside other work, and hutch builds it again, up to %d times", engine.KilledStepAttempts))
		}
		if len(notes) > 0 {
			reason += " (" + strings.Join(notes, "; ") + ")"
		}
		out = append(out, check{"engine", checkOK, reason})
	}
	out = append(out, podmanCheck(p, eng, engErr == nil))
	out = append(out, kvmCheck(p))
	if path, err := p.LookPath(qemuProgram); err == nil {
		out = append(out, check{"qemu", checkOK, path})
	} else {
		out = append(out, check{"qemu", checkMissing, qemuProgram + " is not on PATH (microVM modes need it: apt-get install qemu-system-x86)"})
	}
	if err := p.Stat(cgroupControllers); err == nil {
		out = append(out, check{"cgroup", checkOK, "v2 (" + cgroupControllers + " exists)"})
	} else {
		out = append(out, check{"cgroup", checkOK, "v1 (no " + cgroupControllers + "); the engine still applies limits"})
	}
	out = append(out, stateDirCheck(p))
	out = append(out, networkCheck(p))
	for _, k := range sandbox.Kinds {
		switch k {
		case sandbox.KindGondolin:
			out = append(out, gondolinCheck(p))
			continue
		case sandbox.KindKube:
			out = append(out, kubeCheck(ctx, p))
			continue
		}
		out = append(out, modeCheck(k, engErr == nil))
	}
	return out
}

// gondolinCheck says whether gondolin:default can boot here: QEMU,
// qemu-img and virtiofsd installed, guest assets built, and on what
// accelerator.
func gondolinCheck(p doctorProbes) check {
	name := "mode " + modeLabel(sandbox.KindGondolin)
	if _, err := p.LookPath(qemuProgram); err != nil {
		return check{name, checkNo, "needs " + qemuProgram + " (see qemu)"}
	}
	if _, err := p.LookPath("qemu-img"); err != nil {
		return check{name, checkNo, "needs qemu-img (apt-get install qemu-utils)"}
	}
	if _, err := p.Virtiofsd(); err != nil {
		return check{name, checkNo, "needs virtiofsd (apt-get install qemu-system-common)"}
	}
	dir := p.Getenv("HUTCH_MICROVM_ASSETS")
	if dir == "" {
		state, _, _ := p.StateDir()
		dir = microvm.DefaultAssetDir(state)
	}
	m, err := p.Guest(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return check{name, checkNo, "no guest in " + dir + ": build one with hutch microvm image build"}
		}
		return check{name, checkBad, err.Error()}
	}
	accel := "software emulation (TCG, slow: no usable KVM)"
	if p.OpenRW(kvmDevice) == nil && p.HardwareVirt() {
		accel = "KVM"
	}
	return check{name, checkOK, fmt.Sprintf("boots on %s; guest in %s, built %s from %s", accel, dir, m.Created.Format("2006-01-02"), m.Source)}
}

// kubeCheck says whether kube:<image> can run here: a cluster is
// configured and its API server answers. Not configured is a mode not set
// up, as gondolin without a guest; a configuration that cannot be read is
// bad.
func kubeCheck(ctx context.Context, p doctorProbes) check {
	name := "mode " + modeLabel(sandbox.KindKube)
	info, err := p.Kube(ctx)
	switch {
	case !info.Configured:
		return check{name, checkNo, "no cluster configured: set sandbox.kube.kubeconfig or KUBECONFIG, or write ~/.kube/config (a hutch running in a pod uses its service account)"}
	case err != nil && info.Host == "":
		return check{name, checkBad, err.Error()}
	case err != nil:
		return check{name, checkNo, err.Error()}
	}
	return check{name, checkOK, fmt.Sprintf("the API server at %s answers (%s); pods go to namespace %s; nodes must find the agent image (hutch kube agent-image) and reach the workspace (sandbox.kube.storage)", info.Host, info.Source, info.Namespace)}
}

func podmanCheck(p doctorProbes, eng engineInfo, engineOK bool) check {
	host := p.Getenv("DOCKER_HOST")
	atPodman := engineOK && eng.Flavor == string(engine.FlavorPodman) || strings.Contains(host, "podman")
	path, err := p.LookPath("podman")
	switch {
	case err != nil && atPodman:
		return check{"podman", checkMissing, fmt.Sprintf("podman is not on PATH, but DOCKER_HOST points at a Podman socket (%s)", host)}
	case err != nil:
		return check{"podman", checkMissing, "podman is not on PATH (optional: Docker is enough)"}
	case atPodman:
		return check{"podman", checkOK, fmt.Sprintf("%s; DOCKER_HOST points at it (%s)", path, host)}
	case host == "":
		return check{"podman", checkOK, path + "; DOCKER_HOST is not set, so hutch uses the default Docker socket"}
	}
	return check{"podman", checkOK, fmt.Sprintf("%s; DOCKER_HOST points elsewhere (%s)", path, host)}
}

func kvmCheck(p doctorProbes) check {
	if err := p.Stat(kvmDevice); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return check{"kvm", checkMissing, kvmDevice + " is not present: microVMs run under software emulation (TCG), slowly"}
		}
		return check{"kvm", checkMissing, fmt.Sprintf("cannot look at %s: %v", kvmDevice, err)}
	}
	if err := p.OpenRW(kvmDevice); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return check{"kvm", checkBad, fmt.Sprintf("%s is present but cannot be opened (%v); add the user to the kvm group (until then microVMs run under software emulation)", kvmDevice, err)}
	}
	if !p.HardwareVirt() {
		return check{"kvm", checkNo, kvmDevice + " opens, but the processor advertises no vmx or svm: microVMs run under software emulation (TCG)"}
	}
	return check{"kvm", checkOK, kvmDevice + " is present and opens; microVMs run on KVM"}
}

func stateDirCheck(p doctorProbes) check {
	path, perm, err := p.StateDir()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return check{"state dir", checkMissing, path + " does not exist yet; hutch creates it (mode 0700) on first use"}
	case err != nil:
		return check{"state dir", checkBad, err.Error()}
	}
	return check{"state dir", checkOK, fmt.Sprintf("%s, mode %04o", path, perm)}
}

func modeCheck(k sandbox.Kind, engineOK bool) check {
	name := "mode " + modeLabel(k)
	switch k {
	case sandbox.KindHost:
		return check{name, checkOK, "commands run on the host, unisolated: only the shared and full door policies run there"}
	case sandbox.KindContainer, sandbox.KindImage:
		if !engineOK {
			return check{name, checkNo, "needs the container engine, which does not answer (see engine)"}
		}
		if k == sandbox.KindContainer {
			return check{name, checkOK, "the engine answers; the named container must exist and run"}
		}
		return check{name, checkOK, "the engine answers; the image must be in the engine or pullable"}
	}
	if k == sandbox.KindCloudflare {
		return check{name, checkOK, "runs through a bridge at $HUTCH_BRIDGE_URL (docs/bridge.md), checked at start"}
	}
	if service.Runnable(sandbox.Mode{Kind: k}) {
		return check{name, checkOK, "in this build"}
	}
	return check{name, checkNo, "not in this build yet"}
}

// renderDoctor writes the checks as an aligned table.
func renderDoctor(w io.Writer, checks []check) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	out := &printer{w: tw}
	out.println("CHECK\tSTATUS\tDETAIL")
	for _, c := range checks {
		out.printf("%s\t%s\t%s\n", c.Name, c.Status, c.Reason)
	}
	return out.flush(tw)
}
