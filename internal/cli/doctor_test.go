package cli

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/settings"
)

// fakeMachine builds probes from a description of a machine.
type fakeMachine struct {
	engine   *engineInfo // nil: unreachable
	programs map[string]string
	env      map[string]string
	files    map[string]bool // path -> openable
	state    string
	perm     fs.FileMode
	stateErr error
	// hwVirt: the processor advertises vmx or svm; virtiofsd: its path
	// ("" = not installed); guest: guest assets are built.
	hwVirt    bool
	virtiofsd string
	guest     bool
	// kube is the cluster kube mode finds (zero: none configured), and
	// kubeErr why it does not answer.
	kube    kubeInfo
	kubeErr error
	// network and allow are the global sandbox.network settings.
	network netpolicy.Mode
	allow   []string
}

func (m fakeMachine) probes() doctorProbes {
	return doctorProbes{
		Engine: func(context.Context) (engineInfo, error) {
			if m.engine == nil {
				return engineInfo{}, engine.Unreachable("unix:///var/run/docker.sock", errors.New("dial unix /var/run/docker.sock: connect: no such file or directory"))
			}
			return *m.engine, nil
		},
		LookPath: func(f string) (string, error) {
			if p, ok := m.programs[f]; ok {
				return p, nil
			}
			return "", &fs.PathError{Op: "lookpath", Path: f, Err: fs.ErrNotExist}
		},
		Getenv: func(k string) string { return m.env[k] },
		Stat: func(p string) error {
			if _, ok := m.files[p]; ok {
				return nil
			}
			return &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
		},
		OpenRW: func(p string) error {
			if m.files[p] {
				return nil
			}
			return &fs.PathError{Op: "open", Path: p, Err: syscall.EACCES}
		},
		StateDir:     func() (string, fs.FileMode, error) { return m.state, m.perm, m.stateErr },
		HardwareVirt: func() bool { return m.hwVirt },
		Virtiofsd: func() (string, error) {
			if m.virtiofsd == "" {
				return "", errors.New("virtiofsd not found")
			}
			return m.virtiofsd, nil
		},
		Guest: func(dir string) (assets.Manifest, error) {
			if !m.guest {
				return assets.Manifest{}, &fs.PathError{Op: "stat", Path: filepath.Join(dir, "manifest.json"), Err: fs.ErrNotExist}
			}
			return assets.Manifest{Version: 1, Created: time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC), Source: "hutch-sandbox:dev (sha256:4477c7d056ca); kernel linux-image-6.1.0-57-cloud-amd64 6.1.192-3"}, nil
		},
		Kube: func(context.Context) (kubeInfo, error) { return m.kube, m.kubeErr },
		Network: func() (settings.Network, error) {
			return settings.ResolveNetwork(settings.Runtime{Network: m.network, NetworkAllow: m.allow}, settings.Runtime{}, false), nil
		},
	}
}

func TestDoctor_Golden(t *testing.T) {
	for name, m := range map[string]fakeMachine{
		"everything": {
			engine:   &engineInfo{Host: "unix:///var/run/docker.sock", Flavor: "docker", ServerVersion: "20.10.24", APIVersion: "1.41"},
			programs: map[string]string{"podman": "/usr/bin/podman", "qemu-system-x86_64": "/usr/bin/qemu-system-x86_64", "qemu-img": "/usr/bin/qemu-img"},
			files:    map[string]bool{"/dev/kvm": true, "/sys/fs/cgroup/cgroup.controllers": true},
			state:    "/home/ada/.hutch", perm: 0o700,
			hwVirt: true, virtiofsd: "/usr/lib/qemu/virtiofsd", guest: true,
			kube:    kubeInfo{Configured: true, Host: "https://10.0.0.7:6443", Namespace: "hutch", Source: "kubeconfig /home/ada/.kube/config"},
			network: netpolicy.ModeAllowlist, allow: []string{"github.com", "*.npmjs.org"},
		},
		"microvm_tcg": {
			engine:   &engineInfo{Host: "unix:///var/run/docker.sock", Flavor: "docker", ServerVersion: "20.10.24", APIVersion: "1.41"},
			programs: map[string]string{"qemu-system-x86_64": "/usr/bin/qemu-system-x86_64", "qemu-img": "/usr/bin/qemu-img"},
			files:    map[string]bool{"/dev/kvm": true, "/sys/fs/cgroup/cgroup.controllers": true},
			state:    "/root/.hutch", perm: 0o700,
			virtiofsd: "/usr/lib/qemu/virtiofsd", guest: true,
		},
		"microvm_no_guest": {
			engine:   &engineInfo{Host: "unix:///var/run/docker.sock", Flavor: "docker", ServerVersion: "20.10.24", APIVersion: "1.41"},
			programs: map[string]string{"qemu-system-x86_64": "/usr/bin/qemu-system-x86_64", "qemu-img": "/usr/bin/qemu-img"},
			files:    map[string]bool{"/sys/fs/cgroup/cgroup.controllers": true},
			state:    "/root/.hutch", perm: 0o700,
			virtiofsd: "/usr/lib/qemu/virtiofsd",
		},
		"bare": {
			files: map[string]bool{}, state: "/home/ada/.hutch",
			stateErr: &fs.PathError{Op: "lstat", Path: "/home/ada/.hutch", Err: fs.ErrNotExist},
		},
		"podman": {
			engine:   &engineInfo{Host: "unix:///run/podman/podman.sock", Flavor: "podman", ServerVersion: "4.9.3", APIVersion: "1.41"},
			programs: map[string]string{"podman": "/usr/bin/podman"},
			env:      map[string]string{"DOCKER_HOST": "unix:///run/podman/podman.sock"},
			files:    map[string]bool{"/dev/kvm": false},
			state:    "/srv/hutch", perm: 0o777,
			stateErr: errdefs.New(errdefs.ErrFailedPrecondition, "State dir /srv/hutch is world-writable (mode 0777); anyone could plant settings or read vaults. Fix with: chmod 0700 /srv/hutch"),
			kube:     kubeInfo{Configured: true},
			kubeErr:  errdefs.New(errdefs.ErrUnavailable, "kube mode finds no cluster: not running in one, and /srv/hutch/kubeconfig gives no usable config (stat /srv/hutch/kubeconfig: no such file or directory). Set sandbox.kube.kubeconfig or KUBECONFIG."),
		},
		"podman_elsewhere": {
			engine:   &engineInfo{Host: "tcp://10.0.0.5:2375", Flavor: "docker", ServerVersion: "27.3.1", APIVersion: "1.47"},
			programs: map[string]string{"podman": "/usr/bin/podman"},
			env:      map[string]string{"DOCKER_HOST": "tcp://10.0.0.5:2375"},
			files:    map[string]bool{"/sys/fs/cgroup/cgroup.controllers": true},
			state:    "/home/ada/.hutch", perm: 0o700,
			kube:    kubeInfo{Configured: true, Host: "https://10.0.0.5:6443", Namespace: "default", Source: "kubeconfig /home/ada/.kube/config"},
			kubeErr: errdefs.New(errdefs.ErrUnavailable, "The Kubernetes API server at https://10.0.0.5:6443 does not answer (kubeconfig /home/ada/.kube/config): Get \"https://10.0.0.5:6443/version?timeout=5s\": dial tcp 10.0.0.5:6443: connect: connection refused"),
		},
		"podman_debian12": {
			engine:   &engineInfo{Host: "unix:///run/podman/podman.sock", Flavor: "podman", ServerVersion: "4.3.1", APIVersion: "1.41"},
			programs: map[string]string{"podman": "/usr/bin/podman"},
			env:      map[string]string{"DOCKER_HOST": "unix:///run/podman/podman.sock"},
			files:    map[string]bool{"/sys/fs/cgroup/cgroup.controllers": true},
			state:    "/home/ada/.hutch", perm: 0o700,
		},
		"podman_socket_no_cli": {
			engine: &engineInfo{Host: "unix:///run/user/1000/podman/podman.sock", Flavor: "podman", ServerVersion: "5.4.0", APIVersion: "1.41"},
			env:    map[string]string{"DOCKER_HOST": "unix:///run/user/1000/podman/podman.sock"},
			files:  map[string]bool{"/sys/fs/cgroup/cgroup.controllers": true},
			state:  "/home/ada/.hutch", perm: 0o700,
		},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := renderDoctor(&out, diagnose(context.Background(), m.probes())); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "doctor", name+".golden"), out.String())
		})
	}
}

// TestDoctor_Command runs the command on this machine: whatever it finds,
// it reports every line and exits 0, and it does not create the state dir.
func TestDoctor_Command(t *testing.T) {
	e := newEnv(t)
	var out, errb bytes.Buffer
	g := &globals{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: e.getenv, logLevel: "warn"}
	cmd := newDoctorCmd(g)
	cmd.SetArgs([]string{})
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("doctor: %v\n%s", err, errb.String())
	}
	t.Logf("doctor on this machine:\n%s", out.String())
	for _, want := range []string{"\nengine ", "\npodman ", "\nkvm ", "\nqemu ", "\ncgroup ", "\nstate dir ", "\nmode host ", "\nmode gondolin:default ", "\nmode kube:<image> "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor output lacks %q:\n%s", strings.TrimSpace(want), out.String())
		}
	}
	if !strings.Contains(out.String(), e.state+" does not exist yet") {
		t.Errorf("doctor should report the missing state dir %s:\n%s", e.state, out.String())
	}
}
