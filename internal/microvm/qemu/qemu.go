// Package qemu turns the description of one microVM into the
// qemu-system-x86_64 command line hutch boots it with, and says which
// accelerator the host offers. It starts nothing: internal/sandbox/microvm
// runs what Args returns.
//
// The recipe is the one measured in reference/feasibility.md §6: the
// microvm machine type with a Debian cloud kernel, the host's TSC
// frequency on the kernel command line under TCG (without it one boot in
// eight hangs calibrating), reboot=t with -no-reboot so that a guest
// "reboot" ends QEMU (a poweroff does not on microvm), and a shared memfd
// memory backend with modern virtio-mmio for vhost-user virtiofs.
package qemu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Accel is how QEMU runs guest code.
type Accel string

const (
	// AccelKVM runs the guest on the processor's virtualisation extensions.
	AccelKVM Accel = "kvm"
	// AccelTCG emulates the processor in software: slow, one host core per
	// busy vCPU, but available everywhere.
	AccelTCG Accel = "tcg"
)

// Share is one directory exported to the guest by a virtiofsd.
type Share struct {
	// Tag is what the guest mounts (mount -t virtiofs <tag> <dir>).
	Tag string
	// Socket is the virtiofsd's vhost-user socket.
	Socket string
}

// Machine is one microVM.
type Machine struct {
	// Binary is the QEMU executable; empty means qemu-system-x86_64 on PATH.
	Binary string
	// Accel is the accelerator; TSCKHz is the host TSC frequency passed to
	// the guest under TCG (0 leaves the guest to calibrate).
	Accel  Accel
	TSCKHz int64
	// CPUs is the number of vCPUs (whole CPUs only) and MemoryMiB the
	// guest's memory.
	CPUs      int
	MemoryMiB int64
	// Kernel and Initrd boot the guest; Initrd's /init is the hutch agent.
	Kernel, Initrd string
	// RootDisk is the guest's /dev/vda, a qcow2 overlay.
	RootDisk string
	// AgentSocket is the host end of the virtio-serial port hutch.agent;
	// QEMU listens on it.
	AgentSocket string
	// ConsoleLog receives the guest's serial console.
	ConsoleLog string
	// Shares are the virtiofs exports, in the order the guest sees them.
	Shares []Share
	// EgressCommand, when set, gives the guest a network card whose only
	// reachable address is ProxyAddr (inside the guest's user-mode
	// network): QEMU runs this command for each connection the guest makes
	// there, with the connection as its stdin and stdout, and nothing else
	// leaves the VM. (A guestfwd to a character device would carry one
	// connection at a time; a command is spawned per connection.) Empty:
	// no network card at all.
	EgressCommand string
}

// AgentPort is the name of the virtio-serial port the guest agent serves on.
const AgentPort = "hutch.agent"

// ProxyAddr is where a guest with a network reaches the host's proxy.
const ProxyAddr = "10.0.2.100:3128"

// Validate checks that every field Args needs is set and sane.
func (m Machine) Validate() error {
	switch {
	case m.Accel != AccelKVM && m.Accel != AccelTCG:
		return fmt.Errorf("microVM: accelerator %q is neither kvm nor tcg", m.Accel)
	case m.CPUs < 1:
		return fmt.Errorf("microVM: %d vCPUs; at least 1", m.CPUs)
	case m.MemoryMiB < 64:
		return fmt.Errorf("microVM: %d MiB of memory; at least 64", m.MemoryMiB)
	case m.Kernel == "" || m.Initrd == "" || m.RootDisk == "":
		return errors.New("microVM: kernel, initrd and root disk are required")
	case m.AgentSocket == "" || m.ConsoleLog == "":
		return errors.New("microVM: agent socket and console log are required")
	}
	for _, p := range []string{m.Kernel, m.Initrd, m.RootDisk, m.AgentSocket, m.ConsoleLog, m.EgressCommand} {
		// QEMU splits option values on commas (",," escapes one); hutch's
		// own paths never hold one, so refuse rather than escape.
		if strings.Contains(p, ",") {
			return fmt.Errorf("microVM: path %q contains a comma, which QEMU options cannot hold", p)
		}
	}
	for i, s := range m.Shares {
		if s.Tag == "" || s.Socket == "" || strings.Contains(s.Socket, ",") || strings.ContainsAny(s.Tag, ", ") {
			return fmt.Errorf("microVM: share %d (%q at %q) is incomplete or holds a comma", i, s.Tag, s.Socket)
		}
	}
	return nil
}

// KernelCmdline is the guest kernel's command line: the serial console,
// no reboot loop on panic, a reboot that ends QEMU, the TSC frequency
// under TCG, and, after "--", the arguments of /init (the hutch agent).
func (m Machine) KernelCmdline() string {
	args := []string{"console=ttyS0", "quiet", "panic=-1", "reboot=t"}
	if m.Accel == AccelTCG && m.TSCKHz > 0 {
		args = append(args, "tsc_early_khz="+strconv.FormatInt(m.TSCKHz, 10))
	}
	return strings.Join(append(args, "--", "agent", "--guest"), " ")
}

// Args returns QEMU's argv after the program name. Call Validate first.
func (m Machine) Args() []string {
	mem := strconv.FormatInt(m.MemoryMiB, 10) + "M"
	cpu := "max"
	if m.Accel == AccelKVM {
		cpu = "host"
	}
	a := []string{
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-M", "microvm,memory-backend=mem",
		"-accel", string(m.Accel),
		"-cpu", cpu,
		"-smp", strconv.Itoa(m.CPUs),
		"-m", mem,
		// vhost-user (virtiofsd) maps guest memory: it must be a shared fd.
		"-object", "memory-backend-memfd,id=mem,size=" + mem + ",share=on",
		// libvhost-user refuses legacy virtio devices.
		"-global", "virtio-mmio.force-legacy=false",
		"-kernel", m.Kernel,
		"-initrd", m.Initrd,
		"-append", m.KernelCmdline(),
		"-chardev", "file,id=console,path=" + m.ConsoleLog,
		"-serial", "chardev:console",
		"-drive", "file=" + m.RootDisk + ",if=none,id=root,format=qcow2,discard=unmap",
		"-device", "virtio-blk-device,drive=root",
		"-device", "virtio-serial-device",
		"-chardev", "socket,id=agent,path=" + m.AgentSocket + ",server=on,wait=off",
		"-device", "virtserialport,chardev=agent,name=" + AgentPort,
	}
	for i, s := range m.Shares {
		id := "fs" + strconv.Itoa(i)
		a = append(a,
			"-chardev", "socket,id="+id+",path="+s.Socket,
			"-device", "vhost-user-fs-device,queue-size=1024,chardev="+id+",tag="+s.Tag)
	}
	if m.EgressCommand != "" {
		host, port, _ := strings.Cut(ProxyAddr, ":")
		a = append(a,
			// restrict=on: the guest reaches nothing through slirp but
			// the guestfwd below, whose command connects to the host's
			// proxy.
			"-netdev", "user,id=net0,restrict=on,guestfwd=tcp:"+host+":"+port+"-cmd:"+m.EgressCommand,
			"-device", "virtio-net-device,netdev=net0")
	}
	return a
}

// Command returns the program to run.
func (m Machine) Command() string {
	if m.Binary != "" {
		return m.Binary
	}
	return "qemu-system-x86_64"
}

// DetectAccel returns kvm when the host can run guests on hardware
// virtualisation, else tcg. A /dev/kvm alone is not enough: some hosts
// expose one backed by a paravirtual module (kvm_pvm) that only boots
// specially built kernels, and a standard kernel hangs on it. The
// processor must also advertise vmx or svm.
func DetectAccel() Accel {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return AccelTCG
	}
	_ = f.Close()
	if !HardwareVirt() {
		return AccelTCG
	}
	return AccelKVM
}

// HardwareVirt reports whether the processor advertises hardware
// virtualisation (vmx or svm in /proc/cpuinfo).
func HardwareVirt() bool {
	data, err := os.ReadFile("/proc/cpuinfo")
	return err == nil && hardwareVirt(string(data))
}

func hardwareVirt(cpuinfo string) bool {
	for line := range strings.SplitSeq(cpuinfo, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		for _, f := range strings.Fields(val) {
			if f == "vmx" || f == "svm" {
				return true
			}
		}
		return false
	}
	return false
}

// ParseAccel reads an accelerator name from configuration ("" = detect).
func ParseAccel(s string) (Accel, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return DetectAccel(), nil
	case "kvm":
		return AccelKVM, nil
	case "tcg":
		return AccelTCG, nil
	}
	return "", fmt.Errorf("microVM accelerator %q: use kvm or tcg", s)
}

// FindVirtiofsd returns the virtiofsd executable: Debian ships QEMU's in
// /usr/lib/qemu, outside PATH.
func FindVirtiofsd() (string, error) {
	for _, p := range []string{"/usr/lib/qemu/virtiofsd", "/usr/libexec/virtiofsd"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("virtiofsd"); err == nil {
		return p, nil
	}
	return "", errors.New("virtiofsd not found (Debian: apt-get install qemu-system-common, which puts it at /usr/lib/qemu/virtiofsd)")
}
