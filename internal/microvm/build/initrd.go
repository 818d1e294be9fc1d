package build

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
)

// ModuleList is the initrd's file listing the modules to load: absolute
// guest paths, one per line, in load order.
const ModuleList = "hutch/modules"

// writeInitrd writes the initrd to w: a gzip-compressed newc cpio archive
// holding mods (read from modDir, i.e. lib/modules/<version> of the
// extracted kernel package) at lib/modules/<version>/<path>, the
// directories above them, and ModuleList. Every entry is owned by root and
// carries mtime, so the same kernel package gives the same bytes.
func writeInitrd(w io.Writer, modDir, version string, mods []module, mtime time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	cw := cpio.NewWriter(zw)

	base := path.Join("lib/modules", version)
	dirs := map[string]bool{path.Dir(ModuleList): true}
	var list strings.Builder
	for _, m := range mods {
		name := path.Join(base, m.Path)
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		fmt.Fprintf(&list, "/%s\n", name)
	}
	// Sorted, a directory comes before everything inside it.
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted)
	for _, d := range sorted {
		hdr := &cpio.Header{Name: d, Mode: cpio.TypeDir | 0o755, Links: 2, ModTime: mtime}
		if err := cw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing the initrd: %w", err)
		}
	}
	for _, m := range mods {
		if err := addFile(cw, path.Join(base, m.Path), filepath.Join(modDir, filepath.FromSlash(m.Path)), mtime); err != nil {
			return err
		}
	}
	hdr := &cpio.Header{Name: ModuleList, Mode: cpio.TypeReg | 0o644, Size: int64(list.Len()), ModTime: mtime}
	if err := cw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing the initrd: %w", err)
	}
	if _, err := io.WriteString(cw, list.String()); err != nil {
		return fmt.Errorf("writing the initrd: %w", err)
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("writing the initrd: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("writing the initrd: %w", err)
	}
	return nil
}

// addFile copies the regular file src into the archive as name.
func addFile(cw *cpio.Writer, name, src string, mtime time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("writing the initrd: %w", err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("writing the initrd: %w", err)
	}
	hdr := &cpio.Header{Name: name, Mode: cpio.TypeReg | 0o644, Size: info.Size(), ModTime: mtime}
	if err := cw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing the initrd: %w", err)
	}
	if n, err := io.Copy(cw, f); err != nil {
		return fmt.Errorf("writing the initrd: %s: %w", src, err)
	} else if n != info.Size() {
		return fmt.Errorf("writing the initrd: %s changed size while being copied", src)
	}
	return nil
}
