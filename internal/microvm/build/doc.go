// Package build makes the guest that hutch's microVM mode (gondolin:default)
// boots: an asset directory holding
//
//   - vmlinuz ("kernel"): the kernel of Debian's cloud kernel package;
//   - initrd.img ("initrd"): a gzip-compressed newc cpio archive with the
//     kernel modules the guest needs (virtio-mmio, block, console, virtiofs
//     and net, plus what they depend on) under lib/modules/<version>/, and
//     hutch/modules, their absolute guest paths one per line in load order.
//     It has no /init: hutch appends a second archive with its own binary as
//     /init when it boots the guest;
//   - rootfs.ext4 ("rootfs"): a raw ext4 image (label hutch-root) of a local
//     Docker image's filesystem, with owners, modes, setuid bits, file
//     capabilities, symlinks, hardlinks and device nodes kept, plus free
//     space for the guest's writes;
//   - manifest.json, written last (see package assets), which hutch checks
//     before every boot.
//
// The kernel package comes from apt (resolved from the metapackage
// linux-image-cloud-amd64, downloaded once into a cache directory) or from a
// given .deb. Debian ships no modules.dep inside the package, so the module
// closure is computed here from each module's .modinfo ELF section.
//
// The root filesystem is made without mounting anything: a container is
// created from the image (never started), its filesystem exported through
// the Engine API into GNU tar running as root (only root can keep the
// image's file owners), and the extracted tree turned into an image with
// mke2fs -d.
//
// A build happens in a staging directory next to the target and replaces
// the target only when complete, so an interrupted build never leaves a
// half-written directory that looks valid. Ordering modules, parsing apt and
// .modinfo output, sizing the image and parsing sizes are pure functions;
// the rest are thin steps around apt-get, dpkg-deb, tar and mke2fs.
package build
