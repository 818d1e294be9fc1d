package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/projection"
)

// FileName is the name of every settings file.
const FileName = "settings.json"

// maxSize bounds what we read: a settings file is a few hundred bytes, and
// a huge one is a mistake we should report rather than load into memory.
const maxSize = 1 << 20

// GlobalPath is the global settings file of a state dir.
func GlobalPath(stateDir string) string {
	return filepath.Join(stateDir, FileName)
}

// ConversationPath is the settings file of one conversation. officeKey
// must be a validated office key (one path element).
func ConversationPath(stateDir, officeKey string) string {
	return filepath.Join(stateDir, "conversations", officeKey, FileName)
}

// LoadWorkspace returns the sandbox.workspace setting of the file at path,
// or nil when the file does not exist or sets no door policy.
//
// A legacy sandbox.image.workspaceMount is translated the way the
// reference does, with explicit sandbox.workspace keys winning leaf by
// leaf: "full" is trusted/full, "private" is trusted/shared-support/public.
//
// Anything malformed is an errdefs.ErrFailedPrecondition error with the text
// "Malformed settings in <path>: <reason>".
func LoadWorkspace(path string) (*projection.Setting, error) {
	data, exists, err := readFile(path)
	if err != nil || !exists {
		return nil, err
	}
	d, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	return d.setting, nil
}

// SetWorkspace stores s as the sandbox.workspace of the file at path, or
// removes it when s is nil (so the policy derives again). Either way the
// legacy sandbox.image.workspaceMount is removed, so it cannot come back
// through translation, and a sandbox (or image) object left empty is
// dropped. Every other key is kept.
//
// An invalid s is ErrInvalid. A malformed existing file is not touched and
// gives the same error LoadWorkspace does. The parent directory is created
// 0700 when missing; the file is written atomically with mode 0600.
func SetWorkspace(path string, s *projection.Setting) error {
	if s != nil {
		if err := s.Validate(); err != nil {
			return err
		}
	}
	d, err := loadDoc(path)
	if err != nil {
		return err
	}
	if s == nil && !d.hasWorkspace && !d.hasLegacy {
		// Nothing to remove: leave the file (or its absence) alone.
		return nil
	}

	sandbox := d.sandbox
	if sandbox == nil {
		sandbox = map[string]json.RawMessage{}
	}
	if s != nil {
		sandbox["workspace"] = mustMarshal(s)
	} else {
		delete(sandbox, "workspace")
	}
	if d.hasLegacy {
		delete(d.image, "workspaceMount")
		if len(d.image) == 0 {
			delete(sandbox, "image")
		} else {
			sandbox["image"] = mustMarshal(d.image)
		}
	}
	return saveDoc(path, d, sandbox)
}

// loadDoc reads the settings file at path for a rewrite: an empty
// document when there is none, the same error LoadWorkspace gives when it
// is malformed (a malformed file is never overwritten).
func loadDoc(path string) (*doc, error) {
	data, exists, err := readFile(path)
	if err != nil {
		return nil, err
	}
	if !exists {
		return &doc{top: map[string]json.RawMessage{}}, nil
	}
	return parse(path, data)
}

// saveDoc stores sandbox as d's "sandbox" object (dropped when empty) and
// writes d atomically, 0600, creating the parent directory 0700.
func saveDoc(path string, d *doc, sandbox map[string]json.RawMessage) error {
	if len(sandbox) == 0 {
		delete(d.top, "sandbox")
	} else {
		d.top["sandbox"] = mustMarshal(sandbox)
	}
	out, err := encode(d.top)
	if err != nil {
		return fmt.Errorf("encode settings %s: %w", path, err)
	}
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, out, 0o600)
}

// doc is a parsed settings file, kept as raw values so that keys this
// package does not own survive a rewrite unchanged.
type doc struct {
	top          map[string]json.RawMessage
	sandbox      map[string]json.RawMessage // nil when absent
	image        map[string]json.RawMessage // nil when absent
	hasWorkspace bool
	hasLegacy    bool
	setting      *projection.Setting
}

// parse decodes and checks a settings file; the error names path.
func parse(path string, data []byte) (*doc, error) {
	d, reason := parseDoc(data)
	if reason != "" {
		return nil, malformed(path, reason)
	}
	return d, nil
}

// parseDoc is parse without the file name, returning the reason something
// is malformed ("" when it is not). Split out so it can be fuzzed.
func parseDoc(data []byte) (*doc, string) {
	var probe any
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, "invalid JSON: " + err.Error()
	}
	d := &doc{}
	if !isObject(data) {
		return nil, "the top level is not a JSON object"
	}
	if err := json.Unmarshal(data, &d.top); err != nil {
		return nil, "invalid JSON: " + err.Error()
	}
	raw, ok := d.top["sandbox"]
	if !ok {
		return d, ""
	}
	if !isObject(raw) {
		return nil, "sandbox is not a JSON object"
	}
	if err := json.Unmarshal(raw, &d.sandbox); err != nil {
		return nil, "sandbox: " + err.Error()
	}

	var legacy *projection.Setting
	if raw, ok := d.sandbox["image"]; ok {
		if !isObject(raw) {
			return nil, "sandbox.image is not a JSON object"
		}
		if err := json.Unmarshal(raw, &d.image); err != nil {
			return nil, "sandbox.image: " + err.Error()
		}
		if raw, ok := d.image["workspaceMount"]; ok {
			d.hasLegacy = true
			var v string
			if !isString(raw) || json.Unmarshal(raw, &v) != nil {
				return nil, "sandbox.image.workspaceMount is not a string"
			}
			switch v {
			case "full":
				legacy = &projection.Setting{DoorPolicy: string(projection.DoorTrusted), Layout: string(projection.LayoutFull)}
			case "private":
				legacy = &projection.Setting{DoorPolicy: string(projection.DoorTrusted), Layout: string(projection.LayoutSharedSupport), Visibility: string(projection.VisibilityPublic)}
			default:
				return nil, fmt.Sprintf(`sandbox.image.workspaceMount must be "private" or "full", not %q`, v)
			}
		}
	}

	var explicit *projection.Setting
	if raw, ok := d.sandbox["workspace"]; ok {
		d.hasWorkspace = true
		s, reason := parseWorkspace(raw)
		if reason != "" {
			return nil, reason
		}
		explicit = s
	}
	d.setting = projection.Merge(legacy, explicit)
	return d, ""
}

// parseWorkspace decodes sandbox.workspace strictly: exact key names (the
// standard decoder would also accept "DoorPolicy"), strings only, no
// unknown keys, values from the allowed sets. A typo must not silently
// fall back to a wider default.
func parseWorkspace(raw json.RawMessage) (*projection.Setting, string) {
	if !isObject(raw) {
		return nil, "sandbox.workspace is not a JSON object"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, "sandbox.workspace: " + err.Error()
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys) // report the same key every time
	var s projection.Setting
	for _, k := range keys {
		var dst *string
		switch k {
		case "doorPolicy":
			dst = &s.DoorPolicy
		case "layout":
			dst = &s.Layout
		case "visibility":
			dst = &s.Visibility
		default:
			return nil, fmt.Sprintf("unknown key sandbox.workspace.%s", k)
		}
		if !isString(fields[k]) || json.Unmarshal(fields[k], dst) != nil {
			return nil, fmt.Sprintf("sandbox.workspace.%s is not a string", k)
		}
	}
	if err := s.Validate(); err != nil {
		return nil, err.Error()
	}
	return &s, ""
}

func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

func isString(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}

// readFile reads a settings file that must be a regular file reached
// without a symlink. exists is false (and err nil) when there is none.
func readFile(path string) (data []byte, exists bool, err error) {
	before, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, unreadable(path, err)
	}
	switch {
	case before.Mode()&fs.ModeSymlink != 0:
		return nil, false, malformed(path, "it is a symlink")
	case !before.Mode().IsRegular():
		return nil, false, malformed(path, "it is not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, unreadable(path, err)
	}
	defer func() { _ = f.Close() }()
	after, err := f.Stat()
	if err != nil {
		return nil, false, unreadable(path, err)
	}
	if !os.SameFile(before, after) {
		// Replaced between the check and the open (by a symlink, perhaps).
		return nil, false, malformed(path, "it changed while being read")
	}
	data, err = io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, false, unreadable(path, err)
	}
	if len(data) > maxSize {
		return nil, false, malformed(path, "it is larger than 1 MiB")
	}
	return data, true, nil
}

// encode renders settings the way people write them: two-space indent,
// a trailing newline, and no \u003c escaping of <, > and & in strings.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// mustMarshal marshals values that cannot fail (strings and raw JSON that
// was already decoded once).
func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("settings: marshal %T: %v", v, err))
	}
	return b
}

// ensureDir creates dir and any missing parents with mode 0700, set
// explicitly so the umask cannot widen or narrow it. Existing directories
// (a symlinked state dir included) are left as they are.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return errdefs.New(errdefs.ErrFailedPrecondition, "Settings directory is not a directory: "+dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := ensureDir(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		// Created concurrently, or a dangling symlink: accept only a directory.
		if fi, serr := os.Stat(dir); errors.Is(err, fs.ErrExist) && serr == nil && fi.IsDir() {
			return nil
		}
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

func malformed(path, reason string) error {
	return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Malformed settings in %s: %s", path, reason))
}

// unreadable keeps both the class and the cause (fs.ErrPermission, ...)
// visible to errors.Is.
func unreadable(path string, cause error) error {
	return &classedCause{
		msg:   fmt.Sprintf("Cannot read settings %s: %v", path, cause),
		class: errdefs.ErrFailedPrecondition,
		cause: cause,
	}
}

type classedCause struct {
	msg          string
	class, cause error
}

func (e *classedCause) Error() string   { return e.msg }
func (e *classedCause) Unwrap() []error { return []error{e.class, e.cause} }
