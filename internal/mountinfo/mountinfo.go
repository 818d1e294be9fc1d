// Package mountinfo reads /proc/<pid>/mountinfo (proc(5)), which says what
// is mounted where: the microVM guest checks its shares with it, and
// latemount what is left beneath a mount point before removing it.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Entry is one line of a mountinfo file, reduced to what hutch asks of it.
type Entry struct {
	Target string // the mount point, unescaped
	FSType string
	Source string // for virtiofs: the tag
}

// Parse reads a mountinfo file: "id parent
// major:minor root mountpoint options [optional...] - fstype source
// superoptions", with spaces, tabs, newlines and backslashes in paths
// escaped as \ooo. Entries come in mount order, so a later one at the
// same point is on top.
func Parse(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 7 || sep < 0 || sep+2 >= len(fields) {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("mountinfo line %d is malformed: %q", n, sc.Text()))
		}
		out = append(out, Entry{
			Target: unescape(fields[4]),
			FSType: fields[sep+1],
			Source: unescape(fields[sep+2]),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// unescape undoes the kernel's \ooo escapes.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Self is the mount table of this process's mount namespace.
func Self() ([]Entry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer func() { _ = f.Close() }()
	return Parse(f)
}
