package workspace_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/workspace"
)

const key = "v1-slack-general-0123456789abcdef"

// umasks are the process umasks the mode tests run under: the common one
// and the one that would leave group/other bits if modes were not set
// explicitly. Tests that change the umask do not run in parallel.
var umasks = []struct {
	name string
	mask int
}{{"umask_022", 0o022}, {"umask_000", 0}}

func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (fs.ModeType | fs.ModePerm); got != want {
		t.Errorf("mode of %s = %v, want %v", path, got, want)
	}
}

func checkErr(t *testing.T, err error, class error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want %q", want)
	}
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	if !errors.Is(err, class) {
		t.Errorf("errors.Is(%v, %v) = false", err, class)
	}
}

func TestEnsureRoot_Creates(t *testing.T) {
	for _, u := range umasks {
		t.Run(u.name, func(t *testing.T) {
			withUmask(t, u.mask)
			root := filepath.Join(t.TempDir(), "state", "workspace")
			if err := workspace.EnsureRoot(root); err != nil {
				t.Fatalf("EnsureRoot() error = %v", err)
			}
			checkMode(t, root, fs.ModeDir|0o700)
			checkMode(t, filepath.Dir(root), fs.ModeDir|0o700)
			if err := workspace.EnsureRoot(root); err != nil {
				t.Fatalf("EnsureRoot() second call error = %v", err)
			}
		})
	}
}

func TestEnsureRoot_KeepsExistingMode(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(root, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := workspace.EnsureRoot(root + "/"); err != nil {
		t.Fatal(err)
	}
	checkMode(t, root, fs.ModeDir|0o750)
}

func TestEnsureRoot_Refuses(t *testing.T) {
	tests := []struct {
		name  string
		make  func(t *testing.T, root string)
		class error
	}{
		{"symlink_to_dir", func(t *testing.T, root string) {
			target := root + ".target"
			if err := os.Mkdir(target, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, root); err != nil {
				t.Fatal(err)
			}
		}, errdefs.ErrFailedPrecondition},
		{"dangling_symlink", func(t *testing.T, root string) {
			if err := os.Symlink(root+".nowhere", root); err != nil {
				t.Fatal(err)
			}
		}, errdefs.ErrFailedPrecondition},
		{"regular_file", func(t *testing.T, root string) {
			if err := os.WriteFile(root, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, errdefs.ErrFailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "ws")
			tt.make(t, root)
			err := workspace.EnsureRoot(root)
			checkErr(t, err, tt.class, "Workspace root must be a regular non-symlink directory: "+root)
		})
	}
}

func TestEnsureRoot_RefusesRelative(t *testing.T) {
	err := workspace.EnsureRoot("ws")
	checkErr(t, err, errdefs.ErrInvalid, "Workspace root must be an absolute path: ws")
}

// newRoot returns a workspace root holding the office directory.
func newRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "ws")
	if err := workspace.EnsureRoot(root); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, key), 0o700); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestMaterialize_CreatesSupport(t *testing.T) {
	policies := []struct {
		name    string
		p       projection.Policy
		created bool // shared support entries exist afterwards
	}{
		{"isolated", projection.PolicyIsolated, false},
		{"shared_public", projection.PolicySharedPublic, true},
		{"shared_private", projection.PolicySharedPrivate, true},
		{"full", projection.PolicyFull, false},
	}
	for _, u := range umasks {
		for _, pc := range policies {
			t.Run(u.name+"/"+pc.name, func(t *testing.T) {
				withUmask(t, u.mask)
				root := newRoot(t)
				mounts := projection.Plan(pc.p, root, key, projection.RuntimeRoot)
				if err := workspace.Materialize(mounts); err != nil {
					t.Fatalf("Materialize() error = %v", err)
				}
				memory := filepath.Join(root, "MEMORY.md")
				if !pc.created {
					for _, name := range []string{"MEMORY.md", "skills", "events"} {
						if _, err := os.Lstat(filepath.Join(root, name)); !errors.Is(err, fs.ErrNotExist) {
							t.Errorf("%s created for %v (err %v)", name, pc.p, err)
						}
					}
					return
				}
				checkMode(t, memory, 0o600)
				checkMode(t, filepath.Join(root, "skills"), fs.ModeDir|0o700)
				checkMode(t, filepath.Join(root, "events"), fs.ModeDir|0o700)
				if data, err := os.ReadFile(memory); err != nil || len(data) != 0 {
					t.Errorf("MEMORY.md = %q, %v; want empty", data, err)
				}

				// A second run keeps what is there, content and mode alike.
				if err := os.WriteFile(memory, []byte("notes\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(memory, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := workspace.Materialize(mounts); err != nil {
					t.Fatalf("Materialize() second call error = %v", err)
				}
				if data, _ := os.ReadFile(memory); string(data) != "notes\n" {
					t.Errorf("MEMORY.md rewritten to %q", data)
				}
				checkMode(t, memory, 0o644)
			})
		}
	}
}

func TestMaterialize_Refusals(t *testing.T) {
	symlinkTo := func(target string) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			t.Helper()
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	mkdir := func(t *testing.T, path string) {
		t.Helper()
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile := func(t *testing.T, path string) {
		t.Helper()
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removeOffice := func(t *testing.T, path string) {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		p      projection.Policy
		entry  string // relative to the root; "" is the root itself
		make   func(t *testing.T, path string)
		class  error
		prefix string // the error is prefix + the entry's path
	}{
		{"memory_symlink", projection.PolicySharedPrivate, "MEMORY.md", symlinkTo("/etc/passwd"), errdefs.ErrFailedPrecondition, "Shared MEMORY.md must be a regular non-symlink file: "},
		{"memory_dangling_symlink", projection.PolicySharedPublic, "MEMORY.md", symlinkTo("/nonexistent/MEMORY.md"), errdefs.ErrFailedPrecondition, "Shared MEMORY.md must be a regular non-symlink file: "},
		{"memory_directory", projection.PolicySharedPublic, "MEMORY.md", mkdir, errdefs.ErrFailedPrecondition, "Shared MEMORY.md must be a regular non-symlink file: "},
		{"skills_symlink", projection.PolicySharedPublic, "skills", symlinkTo("/"), errdefs.ErrFailedPrecondition, "Shared skills must be a regular non-symlink directory: "},
		{"skills_file", projection.PolicySharedPublic, "skills", writeFile, errdefs.ErrFailedPrecondition, "Shared skills must be a regular non-symlink directory: "},
		{"events_symlink", projection.PolicySharedPrivate, "events", symlinkTo("/tmp"), errdefs.ErrFailedPrecondition, "Shared events must be a regular non-symlink directory: "},
		{"events_file", projection.PolicySharedPrivate, "events", writeFile, errdefs.ErrFailedPrecondition, "Shared events must be a regular non-symlink directory: "},
		{"office_missing", projection.PolicyIsolated, key, removeOffice, errdefs.ErrNotFound, "Office directory does not exist: "},
		{"office_symlink", projection.PolicyIsolated, key, func(t *testing.T, path string) {
			removeOffice(t, path)
			symlinkTo("/")(t, path)
		}, errdefs.ErrFailedPrecondition, "Office directory must be a regular non-symlink directory: "},
		{"office_file", projection.PolicySharedPublic, key, func(t *testing.T, path string) {
			removeOffice(t, path)
			writeFile(t, path)
		}, errdefs.ErrFailedPrecondition, "Office directory must be a regular non-symlink directory: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := newRoot(t)
			path := filepath.Join(root, tt.entry)
			tt.make(t, path)
			err := workspace.Materialize(projection.Plan(tt.p, root, key, projection.RuntimeRoot))
			checkErr(t, err, tt.class, tt.prefix+path)
		})
	}
}

func TestMaterialize_RefusesBadRoot(t *testing.T) {
	tests := []struct {
		name  string
		p     projection.Policy
		make  func(t *testing.T, root string)
		class error
		text  string
	}{
		{"full_root_symlink", projection.PolicyFull, func(t *testing.T, root string) {
			target := newRoot(t)
			if err := os.Symlink(target, root); err != nil {
				t.Fatal(err)
			}
		}, errdefs.ErrFailedPrecondition, "Workspace root must be a regular non-symlink directory: "},
		{"full_root_missing", projection.PolicyFull, func(*testing.T, string) {}, errdefs.ErrNotFound, "Workspace root does not exist: "},
		// A symlinked root must not let MEMORY.md be created through it.
		{"shared_root_symlink", projection.PolicySharedPublic, func(t *testing.T, root string) {
			target := newRoot(t)
			if err := os.Symlink(target, root); err != nil {
				t.Fatal(err)
			}
		}, errdefs.ErrFailedPrecondition, "Workspace root must be a regular non-symlink directory: "},
		{"isolated_root_missing", projection.PolicyIsolated, func(*testing.T, string) {}, errdefs.ErrNotFound, "Workspace root does not exist: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "link")
			tt.make(t, root)
			err := workspace.Materialize(projection.Plan(tt.p, root, key, projection.RuntimeRoot))
			checkErr(t, err, tt.class, tt.text+root)
			if _, err := os.Lstat(filepath.Join(root, "MEMORY.md")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("MEMORY.md created through a refused root (err %v)", err)
			}
		})
	}
}

func TestMaterialize_RefusesMalformedMounts(t *testing.T) {
	root := newRoot(t)
	tests := []struct {
		name string
		m    projection.Mount
		text string
	}{
		{"unknown_role", projection.Mount{Role: "vault", Type: projection.EntryDir, HostPath: root}, `Unknown mount role "vault" for ` + root},
		{"unknown_type", projection.Mount{Role: projection.RoleSkills, Type: "socket", HostPath: root}, `Unknown mount entry type "socket" for ` + root},
		{"relative_path", projection.Mount{Role: projection.RoleSkills, Type: projection.EntryDir, HostPath: "skills"}, "Mount host path must be absolute: skills"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := workspace.Materialize([]projection.Mount{tt.m})
			checkErr(t, err, errdefs.ErrInvalid, tt.text)
		})
	}
}
