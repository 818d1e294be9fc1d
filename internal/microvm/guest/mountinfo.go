package guest

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// mountEntry is one line of /proc/self/mountinfo, reduced to what the
// guest asks of it.
type mountEntry struct {
	Target string // the mount point, unescaped
	FSType string
	Source string // for virtiofs: the tag
}

// parseMountinfo reads /proc/<pid>/mountinfo (proc(5)): "id parent
// major:minor root mountpoint options [optional...] - fstype source
// superoptions", with spaces, tabs, newlines and backslashes in paths
// escaped as \ooo. Entries come in mount order, so a later one at the
// same point is on top.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
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
		out = append(out, mountEntry{
			Target: unescapeOctal(fields[4]),
			FSType: fields[sep+1],
			Source: unescapeOctal(fields[sep+2]),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// unescapeOctal undoes the kernel's \ooo escapes.
func unescapeOctal(s string) string {
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

// mountsAt returns the entries mounted at target, bottom first.
func mountsAt(entries []mountEntry, target string) []mountEntry {
	var out []mountEntry
	for _, e := range entries {
		if e.Target == target {
			out = append(out, e)
		}
	}
	return out
}

// tagMounted reports whether the virtiofs share tag is mounted at target.
func tagMounted(entries []mountEntry, tag, target string) bool {
	for _, e := range mountsAt(entries, target) {
		if e.FSType == "virtiofs" && e.Source == tag {
			return true
		}
	}
	return false
}
