package imagebuild

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

// Where apt's sources are read from to pick the debootstrap mirror.
var (
	aptSourcesList = "/etc/apt/sources.list"
	aptSourcesDir  = "/etc/apt/sources.list.d"
)

// buildLocalBase makes LocalBase: debootstrap --variant=minbase of
// bookworm into a temporary directory, tarred with numeric owners and
// imported. This is host set-up, so it runs debootstrap (installed with
// apt-get when missing) rather than a container.
func (b *builder) buildLocalBase(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("building the base image locally: debootstrap needs root; run `hutch image build` as root, or make " + DefaultBase + " available to the engine")
	}
	if err := b.ensureDebootstrap(ctx); err != nil {
		return fmt.Errorf("installing debootstrap: %w", err)
	}
	mirror := FindMirror(aptSourcesList, aptSourcesDir)
	dir, err := os.MkdirTemp("", "hutch-debootstrap-")
	if err != nil {
		return fmt.Errorf("building the base image locally: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	root := filepath.Join(dir, "rootfs")

	start := time.Now()
	b.say("Running debootstrap --variant=minbase %s %s %s (about a minute)", suite, root, mirror)
	if err := b.run(ctx, "debootstrap", "--variant=minbase", suite, root, mirror); err != nil {
		return fmt.Errorf("debootstrap of Debian %s from %s: %w", suite, mirror, err)
	}
	b.say("debootstrap done in %s", time.Since(start).Round(time.Second))
	// Leave out the downloaded packages and lists: the image stays small
	// and apt-get update fetches fresh lists anyway.
	for _, pat := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*"} {
		matches, _ := filepath.Glob(filepath.Join(root, pat))
		for _, m := range matches {
			if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() {
				_ = os.Remove(m)
			}
		}
	}

	b.say("Importing the root file system as %s", LocalBase)
	if err := b.importRootfs(ctx, root, LocalBase); err != nil {
		return fmt.Errorf("importing the base image %s: %w", LocalBase, err)
	}
	return nil
}

// ensureDebootstrap installs debootstrap with apt-get when it is missing.
func (b *builder) ensureDebootstrap(ctx context.Context) error {
	if _, err := exec.LookPath("debootstrap"); err == nil {
		return nil
	}
	b.say("debootstrap is missing: installing it with apt-get install -y debootstrap")
	if err := b.run(ctx, "apt-get", "install", "-y", "--no-install-recommends", "debootstrap"); err == nil {
		return nil
	}
	b.say("Retrying after apt-get update")
	if err := b.run(ctx, "apt-get", "update"); err != nil {
		return err
	}
	return b.run(ctx, "apt-get", "install", "-y", "--no-install-recommends", "debootstrap")
}

// run runs a host program with its output going to the progress writer.
func (b *builder) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = b.out
	cmd.Stderr = b.out
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	b.log.Debug("running", "cmd", cmd.String())
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", cmd.String(), err)
	}
	return nil
}

// importRootfs streams root as a tar archive (numeric owners) into the
// engine's image import.
func (b *builder) importRootfs(ctx context.Context, root, ref string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeRootfsTar(pw, root)) }()
	defer func() { _ = pr.Close() }()
	rc, err := b.eng.Client.ImageImport(ctx,
		client.ImageImportSource{Source: pr, SourceName: "-"},
		ref,
		client.ImageImportOptions{
			Message: "hutch: debootstrap --variant=minbase " + suite,
			Changes: []string{
				`CMD ["/bin/bash"]`,
				"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			},
		})
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	dec := json.NewDecoder(rc)
	for {
		var msg jsonstream.Message
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the engine's answer: %w", err)
		}
		if msg.Error != nil {
			return errors.New(msg.Error.Message)
		}
	}
}

// writeRootfsTar writes the tree under root to w as a tar archive with
// numeric owners, hard links kept as links.
func writeRootfsTar(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		target := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.Format = tar.FormatPAX
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, seen := links[key]; seen {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				links[key] = rel
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(path) //nolint:gosec // G122: a tree debootstrap just made in hutch's own temp dir
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// FindMirror returns the Debian mirror apt is configured with, read from
// the one-line sources file list and the *.list and *.sources files of
// dir, else DefaultMirror.
func FindMirror(list, dir string) string {
	files := []string{list}
	entries, _ := os.ReadDir(dir)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources") {
			files = append(files, filepath.Join(dir, n))
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if m := ParseMirror(data, strings.HasSuffix(f, ".sources")); m != "" {
			return m
		}
	}
	return DefaultMirror
}

// ParseMirror returns the first http(s) URI of a "deb" entry for the
// bookworm suite itself (not -updates or -security) in an apt sources
// file: one-line format ("deb [opts] URI SUITE COMPONENTS...") or, when
// deb822 is true, the deb822 format of *.sources files. It returns "" when
// there is none.
func ParseMirror(data []byte, deb822 bool) string {
	if deb822 {
		return parseDeb822(data)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options, possibly several fields
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 2 && usable(f[0], []string{f[1]}) {
			return strings.TrimSuffix(f[0], "/")
		}
	}
	return ""
}

// parseDeb822 reads the stanzas of a deb822 sources file.
func parseDeb822(data []byte) string {
	for _, stanza := range strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n\n") {
		fields := map[string]string{}
		key := ""
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
				continue
			}
			if (line[0] == ' ' || line[0] == '\t') && key != "" {
				fields[key] += " " + strings.TrimSpace(line)
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			key = strings.ToLower(strings.TrimSpace(k))
			fields[key] = strings.TrimSpace(v)
		}
		if e, ok := fields["enabled"]; ok && strings.EqualFold(e, "no") {
			continue
		}
		if !contains(strings.Fields(fields["types"]), "deb") {
			continue
		}
		suites := strings.Fields(fields["suites"])
		for _, uri := range strings.Fields(fields["uris"]) {
			if usable(uri, suites) {
				return strings.TrimSuffix(uri, "/")
			}
		}
	}
	return ""
}

// usable reports whether uri is an http(s) mirror serving the bookworm
// suite itself.
func usable(uri string, suites []string) bool {
	return (strings.HasPrefix(uri, "http://") || strings.HasPrefix(uri, "https://")) && contains(suites, suite)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
