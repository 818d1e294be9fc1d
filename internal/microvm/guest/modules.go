package guest

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// parseModules reads a module list: one absolute, clean path a line, in
// load order; blank lines and lines starting with # are skipped.
func parseModules(r io.Reader) ([]string, error) {
	var mods []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !path.IsAbs(line) || path.Clean(line) != line {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Module list line %d is not an absolute clean path: %q", n, line))
		}
		mods = append(mods, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the module list: %w", err)
	}
	return mods, nil
}
