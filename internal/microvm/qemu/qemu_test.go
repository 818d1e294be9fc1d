package qemu

import (
	"slices"
	"strings"
	"testing"
)

func machine() Machine {
	return Machine{
		Accel: AccelTCG, TSCKHz: 2096014, CPUs: 2, MemoryMiB: 1024,
		Kernel: "/a/vmlinuz", Initrd: "/r/initrd.img", RootDisk: "/s/root.qcow2",
		AgentSocket: "/r/vm/1/agent.sock", ConsoleLog: "/r/vm/1/console.log",
		Shares: []Share{{Tag: "fs0", Socket: "/r/vm/1/vfs-0.sock"}, {Tag: "fs1", Socket: "/r/vm/1/vfs-1.sock"}},
	}
}

// TestArgs pins the command line: the recipe of feasibility §6 and the
// devices hutch relies on.
func TestArgs(t *testing.T) {
	m := machine()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(m.Args(), " ")
	want := "-nodefaults -no-user-config -nographic -no-reboot -M microvm,memory-backend=mem -accel tcg -cpu max -smp 2 -m 1024M" +
		" -object memory-backend-memfd,id=mem,size=1024M,share=on -global virtio-mmio.force-legacy=false" +
		" -kernel /a/vmlinuz -initrd /r/initrd.img" +
		" -append console=ttyS0 quiet panic=-1 reboot=t tsc_early_khz=2096014 -- agent --guest" +
		" -chardev file,id=console,path=/r/vm/1/console.log -serial chardev:console" +
		" -drive file=/s/root.qcow2,if=none,id=root,format=qcow2,discard=unmap -device virtio-blk-device,drive=root" +
		" -device virtio-serial-device -chardev socket,id=agent,path=/r/vm/1/agent.sock,server=on,wait=off" +
		" -device virtserialport,chardev=agent,name=hutch.agent" +
		" -chardev socket,id=fs0,path=/r/vm/1/vfs-0.sock -device vhost-user-fs-device,queue-size=1024,chardev=fs0,tag=fs0" +
		" -chardev socket,id=fs1,path=/r/vm/1/vfs-1.sock -device vhost-user-fs-device,queue-size=1024,chardev=fs1,tag=fs1"
	if got != want {
		t.Errorf("Args:\n got %s\nwant %s", got, want)
	}
}

func TestArgs_KVMAndProxy(t *testing.T) {
	m := machine()
	m.Accel, m.Shares, m.EgressCommand = AccelKVM, nil, "/r/bin/hutch microvm egress-pipe /r/vm/1/egress.sock"
	args := m.Args()
	if i := slices.Index(args, "-cpu"); i < 0 || args[i+1] != "host" {
		t.Errorf("KVM cpu: %v", args)
	}
	if strings.Contains(m.KernelCmdline(), "tsc_early_khz") {
		t.Errorf("KVM command line has the TCG clock flag: %s", m.KernelCmdline())
	}
	got := strings.Join(args, " ")
	if !strings.Contains(got, "-netdev user,id=net0,restrict=on,guestfwd=tcp:10.0.2.100:3128-cmd:/r/bin/hutch microvm egress-pipe /r/vm/1/egress.sock -device virtio-net-device,netdev=net0") {
		t.Errorf("proxy network missing: %s", got)
	}
	m.EgressCommand = ""
	if strings.Contains(strings.Join(m.Args(), " "), "netdev") {
		t.Error("a VM without a proxy has a network card")
	}
}

func TestValidate(t *testing.T) {
	for name, change := range map[string]func(*Machine){
		"accel":        func(m *Machine) { m.Accel = "hvf" },
		"cpus":         func(m *Machine) { m.CPUs = 0 },
		"memory":       func(m *Machine) { m.MemoryMiB = 32 },
		"kernel":       func(m *Machine) { m.Kernel = "" },
		"agent socket": func(m *Machine) { m.AgentSocket = "" },
		"comma path":   func(m *Machine) { m.RootDisk = "/s/a,b.qcow2" },
		"comma share":  func(m *Machine) { m.Shares[0].Socket = "/x,y" },
		"tag space":    func(m *Machine) { m.Shares[1].Tag = "a b" },
	} {
		t.Run(name, func(t *testing.T) {
			m := machine()
			m.Shares = slices.Clone(m.Shares)
			change(&m)
			if err := m.Validate(); err == nil {
				t.Errorf("Validate accepted %+v", m)
			}
		})
	}
}

func TestHardwareVirt(t *testing.T) {
	for _, tt := range []struct {
		cpuinfo string
		want    bool
	}{
		{"processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr constant_tsc nonstop_tsc\n", false},
		{"processor\t: 0\nflags\t\t: fpu vme vmx ept\n", true},
		{"flags\t\t: fpu svm npt\n", true},
		{"flags\t\t: fpu vmxnot\n", false},
		{"", false},
	} {
		if got := hardwareVirt(tt.cpuinfo); got != tt.want {
			t.Errorf("hardwareVirt(%q) = %v, want %v", tt.cpuinfo, got, tt.want)
		}
	}
}

func TestParseAccel(t *testing.T) {
	for in, want := range map[string]Accel{"kvm": AccelKVM, " TCG ": AccelTCG} {
		if got, err := ParseAccel(in); err != nil || got != want {
			t.Errorf("ParseAccel(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseAccel("whpx"); err == nil {
		t.Error("ParseAccel(whpx) accepted")
	}
}

// TestHostTSCKHz: the measured frequency is plausible for an x86 host
// (between 100 MHz and 10 GHz); nothing about its exact value.
func TestHostTSCKHz(t *testing.T) {
	if khz := HostTSCKHz(); khz < 100_000 || khz > 10_000_000 {
		t.Errorf("HostTSCKHz() = %d", khz)
	}
}
