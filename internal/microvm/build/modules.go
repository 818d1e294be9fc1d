package build

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// GuestModules are the kernel modules the guest loads, before their
// dependencies are added: the virtio-mmio transport of QEMU's microvm
// machine, the root disk, the console the agent speaks over, the shared
// workspace (virtiofs), and the network (not used yet, kept so that an
// asset directory does not have to be rebuilt when it is).
var GuestModules = []string{"virtio_mmio", "virtio_blk", "virtio_console", "virtiofs", "virtio_net"}

// module is one kernel module to put into the initrd.
type module struct {
	// Name is the module's name, with '_' where a file name may have '-'.
	Name string
	// Path is slash-separated and relative to lib/modules/<version>,
	// e.g. kernel/drivers/virtio/virtio_mmio.ko.
	Path string
}

// modinfo is what the build needs from a module's .modinfo section.
type modinfo struct {
	// Name is the name= field, "" when the section has none.
	Name string
	// Depends are the modules that must be loaded first (depends=).
	Depends []string
}

// parseModinfo reads a .modinfo section: NUL-separated key=value strings.
// Padding (empty strings) and strings without '=' are skipped; of repeated
// keys the first counts. Names are normalised the way the kernel does, '-'
// to '_'.
func parseModinfo(section []byte) modinfo {
	var info modinfo
	var haveName, haveDepends bool
	for _, field := range bytes.Split(section, []byte{0}) {
		key, value, ok := strings.Cut(string(field), "=")
		if !ok {
			continue
		}
		switch {
		case key == "name" && !haveName:
			info.Name, haveName = moduleName(value), true
		case key == "depends" && !haveDepends:
			haveDepends = true
			for _, d := range strings.Split(value, ",") {
				if d = strings.TrimSpace(d); d != "" {
					info.Depends = append(info.Depends, moduleName(d))
				}
			}
		}
	}
	return info
}

// moduleName normalises a module name or file name stem: the kernel treats
// '-' and '_' in module names as the same character.
func moduleName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// readModinfoELF returns the .modinfo section of the module file at path.
func readModinfoELF(path string) ([]byte, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading kernel module %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Kernel module %s has no .modinfo section", path))
	}
	data, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("reading the .modinfo section of %s: %w", path, err)
	}
	return data, nil
}

// parseBuiltin reads modules.builtin (one path per line, e.g.
// kernel/fs/ext4/ext4.ko) into the set of names built into the kernel.
func parseBuiltin(data []byte) map[string]bool {
	out := make(map[string]bool)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		base := path.Base(line)
		if i := strings.Index(base, ".ko"); i > 0 {
			base = base[:i]
		}
		out[moduleName(base)] = true
	}
	return out
}

// orderModules returns the modules to load for roots, every module after
// all modules it depends on, each once. deps maps each module present as a
// file to its dependencies; a module in builtin is part of the kernel and
// is skipped. The order is deterministic: roots in the order given,
// dependencies in the order listed. A module that is neither in deps nor
// builtin, or a dependency cycle, is refused with errdefs.ErrFailedPrecondition.
func orderModules(roots []string, deps map[string][]string, builtin map[string]bool) ([]string, error) {
	const (
		visiting = 1
		done     = 2
	)
	state := make(map[string]int)
	var out, stack []string
	var visit func(name string) error
	visit = func(name string) error {
		if builtin[name] {
			return nil
		}
		switch state[name] {
		case done:
			return nil
		case visiting:
			i := len(stack) - 1
			for i > 0 && stack[i] != name {
				i--
			}
			cycle := append(append([]string(nil), stack[i:]...), name)
			return errdefs.New(errdefs.ErrFailedPrecondition,
				fmt.Sprintf("kernel modules depend on each other in a cycle: %s", strings.Join(cycle, " -> ")))
		}
		d, ok := deps[name]
		if !ok {
			if len(stack) == 0 {
				return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("kernel module %s is missing", name))
			}
			return errdefs.New(errdefs.ErrFailedPrecondition,
				fmt.Sprintf("kernel module %s is missing (needed by %s)", name, strings.Join(reversed(stack), " <- ")))
		}
		state[name] = visiting
		stack = append(stack, name)
		for _, dep := range d {
			if err := visit(dep); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = done
		out = append(out, name)
		return nil
	}
	for _, r := range roots {
		if err := visit(moduleName(r)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// moduleIndex is what a kernel's module directory holds, by module name.
type moduleIndex struct {
	// files are the uncompressed .ko files with that name, relative to
	// the module directory, slash-separated.
	files map[string][]string
	// compressed are modules present only as .ko.xz, .ko.zst or .ko.gz.
	compressed map[string]string
	// builtin are the modules built into the kernel (modules.builtin).
	builtin map[string]bool
}

// indexModules lists the module files under modDir (lib/modules/<version>).
func indexModules(modDir string) (moduleIndex, error) {
	idx := moduleIndex{files: make(map[string][]string), compressed: make(map[string]string)}
	err := filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(modDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		base := d.Name()
		switch {
		case strings.HasSuffix(base, ".ko"):
			name := moduleName(strings.TrimSuffix(base, ".ko"))
			idx.files[name] = append(idx.files[name], rel)
		case strings.HasSuffix(base, ".ko.xz"), strings.HasSuffix(base, ".ko.zst"), strings.HasSuffix(base, ".ko.gz"):
			idx.compressed[moduleName(base[:strings.Index(base, ".ko")])] = rel
		}
		return nil
	})
	if err != nil {
		return moduleIndex{}, fmt.Errorf("listing kernel modules in %s: %w", modDir, err)
	}
	data, err := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		idx.builtin = map[string]bool{}
	case err != nil:
		return moduleIndex{}, fmt.Errorf("reading the list of built-in modules: %w", err)
	default:
		idx.builtin = parseBuiltin(data)
	}
	return idx, nil
}

// resolveModules finds roots and everything they depend on in modDir and
// returns them in load order. readModinfo returns a module file's .modinfo
// section (readModinfoELF outside tests).
func resolveModules(modDir string, roots []string, readModinfo func(path string) ([]byte, error)) ([]module, error) {
	idx, err := indexModules(modDir)
	if err != nil {
		return nil, err
	}
	deps := make(map[string][]string)
	paths := make(map[string]string)
	queue := make([]string, 0, len(roots))
	for _, r := range roots {
		queue = append(queue, moduleName(r))
	}
	seen := make(map[string]bool)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] || idx.builtin[name] {
			continue
		}
		seen[name] = true
		files := idx.files[name]
		switch {
		case len(files) == 0 && idx.compressed[name] != "":
			return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"kernel module %s is compressed (%s); hutch puts only uncompressed modules into the initrd, as Debian's cloud kernel ships them",
				name, idx.compressed[name]))
		case len(files) == 0:
			continue // orderModules names it, with who needs it
		case len(files) > 1:
			sort.Strings(files)
			return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"kernel module %s is there more than once (%s); hutch cannot tell which one the kernel would load",
				name, strings.Join(files, ", ")))
		}
		section, err := readModinfo(filepath.Join(modDir, filepath.FromSlash(files[0])))
		if err != nil {
			return nil, err
		}
		info := parseModinfo(section)
		deps[name] = info.Depends
		paths[name] = files[0]
		queue = append(queue, info.Depends...)
	}
	order, err := orderModules(roots, deps, idx.builtin)
	if err != nil {
		return nil, err
	}
	mods := make([]module, len(order))
	for i, name := range order {
		mods[i] = module{Name: name, Path: paths[name]}
	}
	return mods, nil
}
