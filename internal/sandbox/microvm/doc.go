// Package microvm is the gondolin:default mode (alias microvm:default):
// one QEMU microVM per conversation, created and owned by the hutch
// process that serves it.
//
// A VM boots the guest assets of `hutch microvm image build` (verified
// against their manifest before every boot) with this hutch's own binary
// as the guest's init, so agent and daemon always match. Its root disk is
// a per-office qcow2 overlay over the shared root filesystem image: like a
// managed container's writable layer, it survives idle stops and
// re-creates, and goes when the runtime is removed or the root filesystem
// is rebuilt. Commands and file operations go to the agent over a
// virtio-serial port whose host end is a unix socket in a per-VM run
// directory: no network is involved, and HTTP/2 streams give each command
// its own stream, so cancelling one kills it in the guest.
//
// The door policy's projection becomes virtiofs shares (one virtiofsd per
// projected directory). Single files cannot be shared by virtiofs: they
// are copied in at boot; those under /workspace that the guest may write
// (MEMORY.md) are synced both ways every couple of seconds and once more
// at shutdown, last writer winning and a conflict logged; vault files are
// copied in owner-only 0600 and never read back.
//
// What the root disk keeps across re-creation must hold nothing a later
// plan does not grant, so no projected byte is written to it: /workspace
// is a fresh tmpfs at every boot (the shares' mount points, MEMORY.md and
// what a command writes beside them live in memory), and a copied file's
// content lives in a tmpfs of the guest, bind-mounted onto an empty file
// at its path. The paths of the files projected onto an office's disk are
// recorded beside the disk in the state dir, never on it; a boot whose
// plan lacks one (a vault entry removed or moved, a door downgraded) has
// the guest remove it before anything else.
//
// Limits are the VM's: whole vCPUs (a fractional CPU value is rounded up),
// its memory, and a pids ceiling on the guest cgroup commands run in. A
// change of what a VM was built from (assets, agent, mounts, vault file
// contents, limits, boost, a network card or not, the egress CA it
// trusts) re-creates it on the next command, once no command runs in it.
// The network and placeholder secrets are egress.go's.
//
// One hutch process owns a VM: it holds an exclusive lock on the VM's run
// directory for the VM's life, so a second process serving the same state
// dir refuses the office instead of booting a second VM on the same disk.
// A process that dies leaves its QEMU running; the next start finds it by
// its record (pid, start time, command line) and ends it.
package microvm
