package office

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/fileid"
)

// FileVersion is the only registry format version this package reads and
// writes. A file of another version was written by a newer or unrelated
// program, and rewriting it would lose what it knows.
const FileVersion = 1

// File is the content of office-registry.json. The JSON field names are the
// reference system's, so a registry written by either can be read by both.
type File struct {
	Version int `json:"version"`
	// EnabledPlatforms are the platforms the daemon served when migrations
	// last ran; written sorted and without duplicates.
	EnabledPlatforms []Platform `json:"enabledPlatforms"`
	// Offices is every office ever recorded; written sorted by platform
	// then conversation id.
	Offices []OfficeRecord `json:"offices"`
	// Migrations journal moves from the raw-id layout, one per raw id.
	Migrations []MigrationRecord `json:"migrations"`
}

// OfficeRecord says that an office exists (or is about to be created) for
// an address.
type OfficeRecord struct {
	Platform       Platform  `json:"platform"`
	ConversationID string    `json:"conversationId"`
	RecordedAt     time.Time `json:"recordedAt"`
}

// Address returns the address the record names.
func (r OfficeRecord) Address() Address {
	return Address{Platform: r.Platform, ConversationID: r.ConversationID}
}

// MigrationStatus is where one raw-id directory is in its move to an
// office.
type MigrationStatus string

// The migration states, in the order a migration passes through them.
// Failed can follow any of them; committed and failed are final.
const (
	// MigrationNeedsOwner: no single platform could be inferred from the
	// raw id; an operator must claim it.
	MigrationNeedsOwner MigrationStatus = "needs-owner"
	// MigrationPrepared: owner and target decided, nothing moved yet.
	MigrationPrepared MigrationStatus = "prepared"
	// MigrationMoving: the rename may have happened; recovery looks at
	// which of source and target exist.
	MigrationMoving MigrationStatus = "moving"
	// MigrationCommitted: the office directory holds the data.
	MigrationCommitted MigrationStatus = "committed"
	// MigrationFailed: stopped; Error says why.
	MigrationFailed MigrationStatus = "failed"
)

// MigrationStatuses lists every status.
var MigrationStatuses = []MigrationStatus{MigrationNeedsOwner, MigrationPrepared, MigrationMoving, MigrationCommitted, MigrationFailed}

// MigrationRecord journals the move of one raw-id directory to its office.
type MigrationRecord struct {
	RawConversationID string          `json:"rawConversationId"`
	SourceDir         string          `json:"sourceDir"`
	WorkspaceRoot     string          `json:"workspaceRoot"`
	OwnerPlatform     Platform        `json:"ownerPlatform,omitempty"`
	TargetDir         string          `json:"targetDir,omitempty"`
	Status            MigrationStatus `json:"status"`
	Error             string          `json:"error,omitempty"`
	UpdatedAt         time.Time       `json:"updatedAt"`
}

// HasOffice reports whether f records an office for a.
func (f *File) HasOffice(a Address) bool {
	return slices.ContainsFunc(f.Offices, func(r OfficeRecord) bool {
		return r.Platform == a.Platform && r.ConversationID == a.ConversationID
	})
}

// AddOffice records an office for a at time at, unless one is recorded
// already, and reports whether it added one.
func (f *File) AddOffice(a Address, at time.Time) bool {
	if f.HasOffice(a) {
		return false
	}
	f.Offices = append(f.Offices, OfficeRecord{Platform: a.Platform, ConversationID: a.ConversationID, RecordedAt: at})
	return true
}

func emptyFile() *File {
	return &File{Version: FileVersion, EnabledPlatforms: []Platform{}, Offices: []OfficeRecord{}, Migrations: []MigrationRecord{}}
}

// clone copies f's slices, so that a caller may change the copy while
// the registry's cached snapshot stays as read.
func (f *File) clone() *File {
	c := *f
	c.EnabledPlatforms = slices.Clone(f.EnabledPlatforms)
	c.Offices = slices.Clone(f.Offices)
	c.Migrations = slices.Clone(f.Migrations)
	return &c
}

// readFile loads and validates the registry at path, and returns the
// identity of the version it read; a missing file is an empty registry
// (of zero identity).
func readFile(path string) (*File, []byte, fileid.ID, error) {
	data, id, err := readRegularFile(path, "Office registry must be a regular non-symlink file: "+path)
	if errors.Is(err, fs.ErrNotExist) {
		return emptyFile(), nil, fileid.ID{}, nil
	}
	if err != nil {
		return nil, nil, fileid.ID{}, err
	}
	f, err := parseFile(path, data)
	return f, data, id, err
}

// parseFile decodes and validates a registry's bytes.
func parseFile(path string, data []byte) (*File, error) {
	// Unknown fields are ignored (and dropped by the next write): any
	// change a reader must not miss bumps the version instead.
	f := &File{}
	if err := json.Unmarshal(data, f); err != nil {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Malformed office registry %s: %v", path, err))
	}
	if err := f.validate(path); err != nil {
		return nil, err
	}
	// Older files may lack arrays; callers get empty slices, not nil, so
	// they can append without caring.
	if f.EnabledPlatforms == nil {
		f.EnabledPlatforms = []Platform{}
	}
	if f.Offices == nil {
		f.Offices = []OfficeRecord{}
	}
	if f.Migrations == nil {
		f.Migrations = []MigrationRecord{}
	}
	return f, nil
}

// readRegularFile reads path, refusing symlinks and anything but a regular
// file with an ErrFailedPrecondition error of text refusal, and returns
// the identity of the file it read. O_NOFOLLOW closes the gap between the
// check and the open, and O_NONBLOCK keeps a FIFO planted there from
// hanging the daemon.
func readRegularFile(path, refusal string) ([]byte, fileid.ID, error) {
	refuse := errdefs.New(errdefs.ErrFailedPrecondition, refusal)
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fileid.ID{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fileid.ID{}, refuse
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fileid.ID{}, refuse
	}
	if err != nil {
		return nil, fileid.ID{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	file := os.NewFile(uintptr(fd), path)
	defer func() { _ = file.Close() }()
	fi, err = file.Stat()
	if err != nil {
		return nil, fileid.ID{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fileid.ID{}, refuse
	}
	id, _ := fileid.Of(fi)
	data, err := io.ReadAll(file)
	return data, id, err
}

// validate checks the invariants every reader relies on. Every failure is
// ErrFailedPrecondition: the file is hand-edited or corrupt, and a person
// has to look at it before hutch may add to it.
func (f *File) validate(path string) error {
	fail := func(format string, args ...any) error {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(format, args...))
	}
	if f.Version != FileVersion {
		return fail("Invalid office registry version at %s", path)
	}
	for _, p := range f.EnabledPlatforms {
		if !p.Valid() {
			return fail("Unknown platform %q in office registry %s", p, path)
		}
	}
	seen := make(map[Address]bool, len(f.Offices))
	for _, r := range f.Offices {
		if !r.Platform.Valid() {
			return fail("Unknown platform %q in office registry %s", r.Platform, path)
		}
		if err := ValidateConversationID(r.ConversationID); err != nil {
			return fail("Invalid conversation id %q in office registry %s: %v", r.ConversationID, path, err)
		}
		a := r.Address()
		if seen[a] {
			return fail("Duplicate office record in %s", path)
		}
		seen[a] = true
	}
	migrated := make(map[string]bool, len(f.Migrations))
	for _, m := range f.Migrations {
		if !slices.Contains(MigrationStatuses, m.Status) {
			return fail("Unknown office migration status %q in %s", m.Status, path)
		}
		if m.OwnerPlatform != "" && !m.OwnerPlatform.Valid() {
			return fail("Unknown platform %q in office registry %s", m.OwnerPlatform, path)
		}
		if err := ValidateConversationID(m.RawConversationID); err != nil {
			return fail("Invalid conversation id %q in office migration of %s: %v", m.RawConversationID, path, err)
		}
		if !filepath.IsAbs(m.WorkspaceRoot) || m.SourceDir != filepath.Join(m.WorkspaceRoot, m.RawConversationID) {
			return fail("Office migration source of %q does not match its workspace root in %s", m.RawConversationID, path)
		}
		if m.Status == MigrationNeedsOwner && (m.OwnerPlatform != "" || m.TargetDir != "") {
			return fail("Needs-owner migration cannot have an owner or target (%q in %s)", m.RawConversationID, path)
		}
		if m.OwnerPlatform != "" && m.TargetDir != Dir(m.WorkspaceRoot, Address{Platform: m.OwnerPlatform, ConversationID: m.RawConversationID}.Key()) {
			return fail("Office migration target does not match its office address (%q in %s)", m.RawConversationID, path)
		}
		if m.Status == MigrationFailed && m.Error == "" {
			return fail("Failed office migration is missing an error (%q in %s)", m.RawConversationID, path)
		}
		id := filepath.Join(m.WorkspaceRoot, m.RawConversationID)
		if migrated[id] {
			return fail("Duplicate office migration of %q in %s", m.RawConversationID, path)
		}
		migrated[id] = true
	}
	return nil
}

// encode renders f in its canonical form: sorted, empty arrays rather than
// null, two-space indent and a final newline, HTML characters unescaped
// (as JSON.stringify writes them), so rewrites by either system diff
// cleanly.
func (f *File) encode() ([]byte, error) {
	out := *f
	out.EnabledPlatforms = slices.Clone(f.EnabledPlatforms)
	if out.EnabledPlatforms == nil {
		out.EnabledPlatforms = []Platform{}
	}
	slices.Sort(out.EnabledPlatforms)
	out.EnabledPlatforms = slices.Compact(out.EnabledPlatforms)
	out.Offices = slices.Clone(f.Offices)
	if out.Offices == nil {
		out.Offices = []OfficeRecord{}
	}
	sortOffices(out.Offices)
	if out.Migrations == nil {
		out.Migrations = []MigrationRecord{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sortOffices(rs []OfficeRecord) {
	slices.SortFunc(rs, func(a, b OfficeRecord) int {
		if c := strings.Compare(string(a.Platform), string(b.Platform)); c != 0 {
			return c
		}
		return strings.Compare(a.ConversationID, b.ConversationID)
	})
}
