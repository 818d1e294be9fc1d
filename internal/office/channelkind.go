package office

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// channelKindFile holds the platform's kind of channel (public, private,
// direct, ...) as last seen, so door policy can be derived when no event
// is at hand. This package stores the word; the package that derives door
// policy owns which words exist.
const channelKindFile = "channel-kind"

var channelKindPattern = lazyregexp.New(`^[a-z_]+$`)

// ReadChannelKind returns the channel kind recorded for k. present is false
// when none is recorded (no file, or an empty one). A file that cannot be
// read (a directory or symlink in its place, no permission) or holds more
// than one word of [a-z_] is an error.
func ReadChannelKind(stateDir string, k Key) (kind string, present bool, err error) {
	if _, err := ParseKey(string(k)); err != nil {
		return "", false, err
	}
	path := filepath.Join(StateDir(stateDir, k), channelKindFile)
	raw, present, err := readChannelKindFile(path)
	if err != nil || !present {
		return "", false, err
	}
	kind, err = parseChannelKind(path, raw)
	if err != nil {
		return "", false, err
	}
	return kind, true, nil
}

// WriteChannelKind records kind for k, creating the office state directory
// when needed. The file is rewritten (atomically, mode 0600) only when the
// kind changed, because channel kinds are reported on every event and an
// fsync per event would be waste. A file holding garbage is replaced; one
// that cannot be read is an error.
func WriteChannelKind(stateDir string, k Key, kind string) error {
	if !channelKindPattern.MatchString(kind) {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Invalid channel kind: %q (one word of a-z and _)", kind))
	}
	if _, err := ParseKey(string(k)); err != nil {
		return err
	}
	path := filepath.Join(StateDir(stateDir, k), channelKindFile)
	raw, present, err := readChannelKindFile(path)
	if err != nil {
		return err
	}
	if present {
		if old, err := parseChannelKind(path, raw); err == nil && old == kind {
			return nil
		}
	}
	if _, err := EnsureStateDir(stateDir, k); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, []byte(kind+"\n"), 0o600)
}

// readChannelKindFile returns the file's content; present is false when
// the file (or the state directory) does not exist, or is empty.
func readChannelKindFile(path string) (string, bool, error) {
	data, _, err := readRegularFile(path, "Channel kind file must be a regular non-symlink file: "+path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if len(data) == 0 {
		return "", false, nil
	}
	return string(data), true, nil
}

// parseChannelKind accepts one word with an optional line end; trailing
// whitespace from a hand edit is forgiven.
func parseChannelKind(path, raw string) (string, error) {
	kind := strings.TrimRight(raw, " \t\r\n")
	if !channelKindPattern.MatchString(kind) {
		return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Invalid channel kind in %s: %q", path, raw))
	}
	return kind, nil
}

// PlatformOf returns the platform a valid key names, so a recorded kind
// can be read with the platform that recorded it (only Slack's kinds
// derive a door). An invalid key is ErrInvalid.
func PlatformOf(k Key) (Platform, error) {
	m := keyPattern.FindStringSubmatch(string(k))
	if m == nil {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Invalid office key: %q", string(k)))
	}
	return Platform(m[1]), nil
}
