package features

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Limits cap what a feature may bring: a feature comes from whoever
// published it (or, for a local folder, from whoever can write the
// project), and hutch unpacks it on the host.
type Limits struct {
	// Artifact is the most bytes a downloaded archive (an OCI layer, a
	// tarball) may have. Default 64 MiB.
	Artifact int64
	// Extracted is the most bytes of files a feature may unpack or copy
	// to. Default 64 MiB.
	Extracted int64
	// Files is the most files and folders a feature may hold. Default
	// 10000.
	Files int
}

// The default Limits. The largest published features (a JDK installer
// with its helper scripts) are well under a megabyte: the scripts
// download what they install.
const (
	DefaultArtifactLimit  = 64 << 20
	DefaultExtractedLimit = 64 << 20
	DefaultFileLimit      = 10000
)

func (l Limits) orDefaults() Limits {
	if l.Artifact <= 0 {
		l.Artifact = DefaultArtifactLimit
	}
	if l.Extracted <= 0 {
		l.Extracted = DefaultExtractedLimit
	}
	if l.Files <= 0 {
		l.Files = DefaultFileLimit
	}
	return l
}

// maxNotes bounds the notes about left-out entries one feature gives.
const maxNotes = 5

// skipped collects the entries an unpack or copy left out, for notes.
type skipped struct {
	feature string
	what    []string
	n       int
}

func (s *skipped) add(what string) {
	s.n++
	if len(s.what) < maxNotes {
		s.what = append(s.what, what)
	}
}

func (s *skipped) notes() []string {
	if s.n == 0 {
		return nil
	}
	msg := fmt.Sprintf("feature %s: left out %s", s.feature, strings.Join(s.what, ", "))
	if s.n > len(s.what) {
		msg += fmt.Sprintf(" and %d more", s.n-len(s.what))
	}
	return []string{msg + ": features are installed from their regular files and folders only"}
}

// mebibytes renders a limit for a message.
func mebibytes(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// errTooLarge is returned by capReader past its cap.
var errTooLarge = errors.New("too large")

// capReader fails with errTooLarge once more than n bytes were read.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.n+1 {
		p = p[:c.n+1]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	if c.n < 0 {
		return n, errTooLarge
	}
	return n, err
}

// unpack extracts a feature archive (a tar, gzip-compressed or not: the
// packaging tools write both under the .tgz name) from r into dir, an
// empty folder of hutch's own. Only regular files and folders are
// created, with modes 0644 or 0755 by their execute bit; links, devices
// and FIFOs are left out (and noted). An absolute name or one with a ".."
// component, a name given twice, more than lim.Files entries or more than
// lim.Extracted bytes of files fail it with class errdefs.ErrInvalid.
func unpack(feature string, r io.Reader, dir string, lim Limits) ([]string, error) {
	bad := func(format string, args ...any) error {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: ", feature)+fmt.Sprintf(format, args...))
	}
	br := bufio.NewReader(r)
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, bad("the archive is not valid gzip: %v", err)
		}
		defer func() { _ = zr.Close() }()
		in = zr
	}
	// Tar headers and padding count besides file contents: a bound on
	// the stream stops a compressed archive that only expands, whatever
	// its entries claim.
	in = &capReader{r: in, n: lim.Extracted + int64(lim.Files)*2048 + 1<<20}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()

	skip := &skipped{feature: feature}
	tr := tar.NewReader(in)
	var entries int
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errTooLarge) {
			return nil, bad("the archive expands to more than the %s a feature may unpack to", mebibytes(lim.Extracted))
		}
		if err != nil {
			return nil, bad("the archive is not a valid tar: %v", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader || hdr.Typeflag == tar.TypeXHeader {
			continue
		}
		entries++
		if entries > lim.Files {
			return nil, bad("the archive holds more than %d files and folders, the most a feature may have", lim.Files)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return nil, bad("the archive entry %q is unsafe: %v; hutch does not unpack it", hdr.Name, err)
		}
		if name == "" {
			continue // the archive's top folder itself
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return nil, bad("unpacking %s: %v", name, err)
			}
		case tar.TypeReg, '\x00':
			total += hdr.Size
			if hdr.Size < 0 || total > lim.Extracted {
				return nil, bad("the archive's files are larger than the %s a feature may unpack to", mebibytes(lim.Extracted))
			}
			if err := writeEntry(root, name, hdr, tr); err != nil {
				if errors.Is(err, errTooLarge) {
					return nil, bad("the archive expands to more than the %s a feature may unpack to", mebibytes(lim.Extracted))
				}
				if errors.Is(err, fs.ErrExist) {
					return nil, bad("the archive holds %s twice", name)
				}
				return nil, bad("unpacking %s: %v", name, err)
			}
		case tar.TypeSymlink, tar.TypeLink:
			skip.add(fmt.Sprintf("the link %s -> %s", name, hdr.Linkname))
		case tar.TypeChar, tar.TypeBlock:
			skip.add("the device " + name)
		case tar.TypeFifo:
			skip.add("the FIFO " + name)
		default:
			skip.add(fmt.Sprintf("%s (tar type %q)", name, hdr.Typeflag))
		}
	}
	return skip.notes(), nil
}

// entryName checks an archive entry's name and returns it cleaned and
// relative ("" for the top folder): tools write "./install.sh" or
// "install.sh", never an absolute name or one that climbs out.
func entryName(name string) (string, error) {
	switch {
	case strings.ContainsRune(name, 0):
		return "", errors.New("it holds a NUL byte")
	case strings.HasPrefix(name, "/"):
		return "", errors.New("it is an absolute path")
	}
	for comp := range strings.SplitSeq(name, "/") {
		if comp == ".." {
			return "", errors.New("it climbs out of the feature's folder with \"..\"")
		}
	}
	name = path.Clean(name)
	if name == "." {
		return "", nil
	}
	return name, nil
}

// writeEntry creates a regular file for hdr beneath root and copies its
// contents.
func writeEntry(root *os.Root, name string, hdr *tar.Header, r io.Reader) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	mode := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(mode) // whatever the umask
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
