package build

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// KernelMetapackage is Debian's metapackage of the cloud kernel: the
// smallest Debian kernel that boots under QEMU's microvm machine, with
// virtio-mmio and virtiofs as modules (and no 9p at all).
const KernelMetapackage = "linux-image-cloud-amd64"

// kernelPackage is the kernel package a build uses.
type kernelPackage struct {
	// Package and Version are the .deb's control fields.
	Package, Version string
	// Deb is the .deb's path.
	Deb string
}

// parseAptDepends returns the kernel package the metapackage depends on,
// from `apt-cache depends <meta>`, whose lines look like
//
//	linux-image-cloud-amd64
//	  Depends: linux-image-6.1.0-57-cloud-amd64
//
// The first Depends (or alternative, "|Depends") naming a linux-image-
// package counts; virtual packages (<name>) are skipped.
func parseAptDepends(out, meta string) (string, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line = strings.TrimPrefix(line, "|")
		dep, ok := strings.CutPrefix(line, "Depends:")
		if !ok {
			continue
		}
		dep = strings.TrimSpace(dep)
		if strings.HasPrefix(dep, "<") || !strings.HasPrefix(dep, "linux-image-") || dep == meta {
			continue
		}
		if i := strings.IndexAny(dep, " :("); i >= 0 { // "pkg:amd64" or "pkg (>= 1)"
			dep = dep[:i]
		}
		return dep, nil
	}
	return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
		"apt-cache lists no kernel package that %s depends on; run apt-get update, or pass --kernel-deb with a downloaded linux-image-*-cloud-amd64 .deb", meta))
}

// parseAptCandidate returns the version apt would install, from
// `apt-cache policy <pkg>` ("  Candidate: 6.1.192-3"); "" when there is
// none ("Candidate: (none)") or the package is unknown.
func parseAptCandidate(out string) string {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Candidate:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "(none)" {
			return ""
		}
		return v
	}
	return ""
}

// parseDebFields reads the output of `dpkg-deb -f <deb> Package Version`.
func parseDebFields(out string) (pkg, version string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "Package":
			pkg = strings.TrimSpace(v)
		case "Version":
			version = strings.TrimSpace(v)
		}
	}
	return pkg, version
}

// debFields returns a .deb's Package and Version, or an error when the
// file is not a readable package.
func (b *builder) debFields(ctx context.Context, deb string) (pkg, version string, err error) {
	out, err := b.run(ctx, "", "dpkg-deb", "-f", deb, "Package", "Version")
	if err != nil {
		return "", "", err
	}
	pkg, version = parseDebFields(string(out))
	if pkg == "" || version == "" {
		return "", "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s has no Package or Version field; is it a Debian package?", deb))
	}
	return pkg, version, nil
}

// kernelDeb returns the kernel package to use: the given .deb, else the
// cloud kernel apt resolves, from the cache or downloaded into it.
func (b *builder) kernelDeb(ctx context.Context) (kernelPackage, error) {
	if deb := b.opts.KernelDeb; deb != "" {
		if _, err := os.Stat(deb); err != nil {
			return kernelPackage{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Kernel package %s: %v", deb, unwrapPath(err)))
		}
		pkg, version, err := b.debFields(ctx, deb)
		if err != nil {
			if ctx.Err() != nil || errdefs.IsInvalid(err) {
				return kernelPackage{}, err
			}
			return kernelPackage{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Kernel package %s is not a readable Debian package (%v)", deb, err))
		}
		b.say("Kernel: using %s (%s %s)", deb, pkg, version)
		return kernelPackage{Package: pkg, Version: version, Deb: deb}, nil
	}

	b.say("Kernel: resolving %s with apt-cache", KernelMetapackage)
	out, err := b.run(ctx, "", "apt-cache", "depends", KernelMetapackage)
	if err != nil {
		if ctx.Err() != nil {
			return kernelPackage{}, err
		}
		return kernelPackage{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"apt-cache does not know %s (%v); run apt-get update, or pass --kernel-deb with a downloaded linux-image-*-cloud-amd64 .deb",
			KernelMetapackage, err))
	}
	pkg, err := parseAptDepends(string(out), KernelMetapackage)
	if err != nil {
		return kernelPackage{}, err
	}
	out, err = b.run(ctx, "", "apt-cache", "policy", pkg)
	if err != nil {
		return kernelPackage{}, err
	}
	version := parseAptCandidate(string(out))
	if version == "" {
		return kernelPackage{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"apt has no installable version of %s; run apt-get update, or pass --kernel-deb", pkg))
	}
	b.say("Kernel: %s is %s %s", KernelMetapackage, pkg, version)

	if deb := b.cachedDeb(ctx, pkg, version); deb != "" {
		b.say("Kernel: using cached %s", deb)
		return kernelPackage{Package: pkg, Version: version, Deb: deb}, nil
	}
	deb, err := b.download(ctx, pkg, version)
	if err != nil {
		return kernelPackage{}, err
	}
	return kernelPackage{Package: pkg, Version: version, Deb: deb}, nil
}

// cachedDeb returns a .deb of pkg at version already in the cache dir, or
// "". A file that dpkg-deb cannot read is not a hit (it is overwritten by
// the next download).
func (b *builder) cachedDeb(ctx context.Context, pkg, version string) string {
	matches, _ := filepath.Glob(filepath.Join(b.opts.CacheDir, pkg+"_*.deb"))
	sort.Strings(matches)
	for _, m := range matches {
		p, v, err := b.debFields(ctx, m)
		if err == nil && p == pkg && v == version {
			return m
		}
	}
	return ""
}

// download fetches pkg=version with apt-get into a fresh directory inside
// the cache dir and moves the .deb into the cache dir only when it is
// complete and readable, so an interrupted download is never taken for a
// cached package.
func (b *builder) download(ctx context.Context, pkg, version string) (string, error) {
	if err := os.MkdirAll(b.opts.CacheDir, 0o700); err != nil {
		return "", fmt.Errorf("creating the kernel cache dir: %w", err)
	}
	tmp, err := os.MkdirTemp(b.opts.CacheDir, "download-")
	if err != nil {
		return "", fmt.Errorf("creating the kernel cache dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	b.say("Kernel: downloading %s %s with apt-get into %s", pkg, version, b.opts.CacheDir)
	if _, err := b.run(ctx, tmp, "apt-get", "download", "-q", pkg+"="+version); err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"downloading %s %s with apt-get failed (%v); run apt-get update, or pass --kernel-deb", pkg, version, err))
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download %s left %d .deb files, want 1", pkg, len(debs))
	}
	p, v, err := b.debFields(ctx, debs[0])
	if err != nil {
		return "", err
	}
	if p != pkg || v != version {
		return "", fmt.Errorf("apt-get download %s=%s gave %s %s", pkg, version, p, v)
	}
	deb := filepath.Join(b.opts.CacheDir, filepath.Base(debs[0]))
	if err := os.Rename(debs[0], deb); err != nil {
		return "", fmt.Errorf("moving the kernel package into the cache: %w", err)
	}
	return deb, nil
}

// kernelTree is an extracted kernel package.
type kernelTree struct {
	// Version is the kernel release, the directory name under lib/modules.
	Version string
	// Image is the kernel image, boot/vmlinuz-<Version>.
	Image string
	// ModDir is lib/modules/<Version>.
	ModDir string
}

// extractKernel unpacks deb into dir and finds the kernel in it.
func (b *builder) extractKernel(ctx context.Context, k kernelPackage, dir string) (kernelTree, error) {
	b.say("Kernel: extracting %s", filepath.Base(k.Deb))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return kernelTree{}, err
	}
	if _, err := b.run(ctx, "", "dpkg-deb", "-x", k.Deb, dir); err != nil {
		return kernelTree{}, err
	}
	return findKernel(dir, k.Deb)
}

// findKernel finds the one kernel release in an extracted package: its
// module directory (lib/modules, or usr/lib/modules on merged-/usr
// releases) and its image in boot/.
func findKernel(dir, deb string) (kernelTree, error) {
	notKernel := func(why string) error {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is not a kernel image package: %s", deb, why))
	}
	var modRoot string
	for _, c := range []string{"lib/modules", "usr/lib/modules"} {
		if fi, err := os.Stat(filepath.Join(dir, c)); err == nil && fi.IsDir() {
			modRoot = filepath.Join(dir, c)
			break
		}
	}
	if modRoot == "" {
		return kernelTree{}, notKernel("it has no lib/modules")
	}
	entries, err := os.ReadDir(modRoot)
	if err != nil {
		return kernelTree{}, err
	}
	var versions []string
	for _, e := range entries {
		if e.IsDir() {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) != 1 {
		return kernelTree{}, notKernel(fmt.Sprintf("it has %d kernel releases under lib/modules (%s), want 1", len(versions), strings.Join(versions, ", ")))
	}
	v := versions[0]
	image := filepath.Join(dir, "boot", "vmlinuz-"+v)
	if fi, err := os.Stat(image); err != nil || !fi.Mode().IsRegular() {
		return kernelTree{}, notKernel(fmt.Sprintf("it has no boot/vmlinuz-%s", v))
	}
	return kernelTree{Version: v, Image: image, ModDir: filepath.Join(modRoot, v)}, nil
}

// unwrapPath drops the operation and path of a *fs.PathError, for messages
// that already name the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
