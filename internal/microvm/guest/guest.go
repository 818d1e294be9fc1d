// Package guest is what `hutch agent --guest` does as the init (pid 1) of
// a hutch microVM, and the guest half of the agent's /v1/guest endpoints.
//
// The VM boots the Debian cloud kernel with an initramfs made of the
// kernel modules the guest needs (listed in /hutch/modules, in load order)
// and the static hutch binary as /init; the command line ends with
// `-- agent --guest`. Run then, in order and failing loudly (a log line on
// the serial console, then the VM powers off: it never hangs):
//
//  1. mounts devtmpfs, proc and sysfs in the initramfs;
//  2. loads the modules;
//  3. waits for the root disk /dev/vda and mounts it (ext4, read-write);
//  4. switches root to it (moves /dev, /proc and /sys along);
//  5. mounts devpts, /dev/shm, /run and cgroup2, names the host "hutch",
//     brings lo up and sets PATH and HOME;
//  6. moves itself into the cgroup "agent" and makes "hutch" (pids and
//     memory controllers enabled) for the commands;
//  7. drops every capability but a short list from the bounding set and
//     sets no_new_privs, so that commands (root in the guest) can neither
//     mount nor load modules nor undo a read-only mount;
//  8. serves the agent protocol as pid 1 on the virtio port named
//     hutch.agent, one host session after the other, each begun with the
//     host's sync line (agent.SyncSession) so that a host reconnecting at
//     once never meets the previous session (see Port).
//
// The host-side runtime starts QEMU with -no-reboot, so the guest ends the
// VM with reboot(2). Parsing (module list, mountinfo, sysfs port names,
// capability sets) is pure and tested on its own; the syscalls live in
// the _linux files.
package guest

import "time"

// The guest's fixed layout, shared with the image builder and the host
// runtime.
const (
	// modulesList lists the modules of the initramfs, one absolute path
	// a line, in load order.
	modulesList = "/hutch/modules"
	// rootDevice is the root disk (ext4, label hutch-root).
	rootDevice = "/dev/vda"
	// newRoot is where the root disk is mounted before the switch.
	newRoot = "/newroot"
	// PortName is the name of the virtio-serial port that carries the
	// agent protocol between the host and the guest.
	PortName = "hutch.agent"
	// portsDir lists the virtio-serial ports, each with a "name" file.
	portsDir = "/sys/class/virtio-ports"
	// cgroupRoot is where cgroup2 is mounted in the guest.
	cgroupRoot = "/sys/fs/cgroup"
	// CommandCgroup is the cgroup every command runs in; its limits are
	// what a guest setup sets.
	CommandCgroup = cgroupRoot + "/hutch"
	// agentCgroup holds the agent itself: cgroup v2 keeps processes out
	// of a cgroup that enables controllers for its children.
	agentCgroup = cgroupRoot + "/agent"
	// hostname is the guest's host name.
	hostname = "hutch"
	// commandPath is the PATH of the agent and its commands.
	commandPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// commandHome is their HOME.
	commandHome = "/root"
)

// deviceWait bounds how long the guest waits for a device the kernel
// probes asynchronously (the root disk, the agent's port).
const deviceWait = 20 * time.Second
