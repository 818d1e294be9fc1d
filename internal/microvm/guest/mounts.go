package guest

import "github.com/hutchsandbox/hutch/internal/mountinfo"

// mountsAt returns the entries mounted at target, bottom first.
func mountsAt(entries []mountinfo.Entry, target string) []mountinfo.Entry {
	var out []mountinfo.Entry
	for _, e := range entries {
		if e.Target == target {
			out = append(out, e)
		}
	}
	return out
}

// tagMounted reports whether the virtiofs share tag is mounted at target.
func tagMounted(entries []mountinfo.Entry, tag, target string) bool {
	for _, e := range mountsAt(entries, target) {
		if e.FSType == "virtiofs" && e.Source == tag {
			return true
		}
	}
	return false
}
