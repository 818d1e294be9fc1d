// Package fileid tells one version of a file from another without
// reading it, for caches of what a file holds (the office registry
// parsed, the agent binary's digest). Writers that replace a file by
// rename give it a new inode; a rewrite in place moves its change time;
// size and times tell apart a later version that gets a freed inode
// number back.
package fileid

import (
	"io/fs"
	"os"
	"syscall"
	"time"
)

// RacyWindow is how long after a version's last change its ID is not
// trusted alone. File times come from a clock that lags the real one by a
// tick (milliseconds), and some file systems keep whole seconds: a
// later version written in the same tick, on a reused inode number, of
// the same size, would carry the same ID. A version this fresh is read
// again next time (git's index does the same for its "racily clean"
// entries).
const RacyWindow = 2 * time.Second

// ID identifies one version of a file.
type ID struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime_ns"` // nanoseconds since the epoch
	Ctime int64  `json:"ctime_ns"`
}

// Of is fi's ID; ok is false where the file system gives no inode.
func Of(fi fs.FileInfo) (id ID, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ID{}, false
	}
	return ID{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, true
}

// Stat is the ID of the file at path, following links.
func Stat(path string) (ID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return ID{}, err
	}
	id, ok := Of(fi)
	if !ok {
		return ID{}, &fs.PathError{Op: "stat", Path: path, Err: syscall.ENOTSUP}
	}
	return id, nil
}

// Settled reports whether the version id names had last changed more
// than window before at (RacyWindow, but for tests): then any later
// version has later times, and the ID alone tells the two apart. The
// zero ID (no file) is never settled.
func (id ID) Settled(at time.Time, window time.Duration) bool {
	return id != ID{} && at.Sub(time.Unix(0, max(id.Mtime, id.Ctime))) > window
}
