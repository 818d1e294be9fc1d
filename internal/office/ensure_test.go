package office_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
)

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() {
		t.Errorf("%s is not a directory", path)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s mode got %o, want %o", path, fi.Mode().Perm(), want)
	}
}

// setUmask sets the process umask for the rest of the test. Call it after
// t.TempDir: an all-masking umask leaves the test unable to make its own
// directories.
func setUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func TestEnsure_Creates(t *testing.T) {
	reg, _ := newTestRegistry(t)
	ws := filepath.Join(t.TempDir(), "workspace")
	// An all-masking umask proves the modes are set explicitly.
	setUmask(t, 0o777)
	a := mustAddress(t, "slack/C0123ABC")

	dir, err := office.Ensure(reg, ws, a)
	checkErr(t, err, "", nil)
	if want := filepath.Join(ws, "v1-slack-c0123abc-029c73fa16766e2b"); dir != want {
		t.Errorf("Ensure got %q, want %q", dir, want)
	}
	checkMode(t, ws, 0o700)
	checkMode(t, dir, 0o700)
	f, err := reg.Load()
	checkErr(t, err, "", nil)
	if !f.HasOffice(a) {
		t.Error("office not recorded")
	}

	// Again: idempotent, and an operator's chosen mode is kept.
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	again, err := office.Ensure(reg, ws, a)
	checkErr(t, err, "", nil)
	if again != dir {
		t.Errorf("second Ensure got %q, want %q", again, dir)
	}
	checkMode(t, dir, 0o750)
}

func TestEnsure_Refusals(t *testing.T) {
	a := office.Address{Platform: office.PlatformSlack, ConversationID: "C0123ABC"}
	const key = "v1-slack-c0123abc-029c73fa16766e2b"
	tests := []struct {
		name  string
		plant func(t *testing.T, ws string) // ws exists as a directory unless plant changes it
		want  string                        // %w is the workspace root
	}{
		{"workspace_symlink", func(t *testing.T, ws string) {
			real := ws + "-real"
			if err := os.Rename(ws, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, ws); err != nil {
				t.Fatal(err)
			}
		}, "Workspace root must be a regular non-symlink directory: %w"},
		{"workspace_file", func(t *testing.T, ws string) {
			if err := os.Remove(ws); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ws, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "Workspace root must be a regular non-symlink directory: %w"},
		{"office_symlink", func(t *testing.T, ws string) {
			if err := os.Symlink(t.TempDir(), filepath.Join(ws, key)); err != nil {
				t.Fatal(err)
			}
		}, "Office directory must be a regular non-symlink directory: %w/" + key},
		{"office_dangling_symlink", func(t *testing.T, ws string) {
			if err := os.Symlink("/nonexistent", filepath.Join(ws, key)); err != nil {
				t.Fatal(err)
			}
		}, "Office directory must be a regular non-symlink directory: %w/" + key},
		{"office_file", func(t *testing.T, ws string) {
			if err := os.WriteFile(filepath.Join(ws, key), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "Office directory must be a regular non-symlink directory: %w/" + key},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, _ := newTestRegistry(t)
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Mkdir(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, ws)
			_, err := office.Ensure(reg, ws, a)
			checkErr(t, err, strings.ReplaceAll(tc.want, "%w", ws), errdefs.ErrFailedPrecondition)
		})
	}
}

func TestEnsure_InvalidAddress(t *testing.T) {
	reg, _ := newTestRegistry(t)
	ws := t.TempDir()
	_, err := office.Ensure(reg, ws, office.Address{Platform: office.PlatformWeb, ConversationID: ".."})
	checkErr(t, err, msgMarker, errdefs.ErrInvalid)
	entries, _ := os.ReadDir(ws)
	if len(entries) != 0 {
		t.Errorf("workspace holds %d entries, want none", len(entries))
	}
}

// TestEnsure_RecordsBeforeCreating pins the record-before-directory
// invariant: when the registry cannot be written, no office appears.
func TestEnsure_RecordsBeforeCreating(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(t *testing.T, state string)
		class error
	}{
		{"registry_is_a_directory", func(t *testing.T, state string) {
			if err := os.Mkdir(filepath.Join(state, "office-registry.json"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, errdefs.ErrFailedPrecondition},
		{"state_dir_missing", func(t *testing.T, state string) {
			if err := os.Remove(state); err != nil {
				t.Fatal(err)
			}
		}, fs.ErrNotExist},
		{"lock_is_a_file", func(t *testing.T, state string) {
			if err := os.WriteFile(filepath.Join(state, ".office-registry.lock"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, errdefs.ErrFailedPrecondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, state := newTestRegistry(t)
			tc.spoil(t, state)
			ws := t.TempDir()
			_, err := office.Ensure(reg, ws, mustAddress(t, "discord/42"))
			if !errors.Is(err, tc.class) {
				t.Fatalf("Ensure got %v, want class %v", err, tc.class)
			}
			entries, err := os.ReadDir(ws)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Errorf("office directory created although the registry write failed: %v", entries[0].Name())
			}
		})
	}
}

func TestEnsureStateDir(t *testing.T) {
	k := mustAddress(t, "slack/C0123ABC").Key()
	t.Run("creates", func(t *testing.T) {
		state := t.TempDir()
		setUmask(t, 0o777)
		dir, err := office.EnsureStateDir(state, k)
		checkErr(t, err, "", nil)
		if want := office.StateDir(state, k); dir != want {
			t.Errorf("EnsureStateDir got %q, want %q", dir, want)
		}
		checkMode(t, filepath.Join(state, "conversations"), 0o700)
		checkMode(t, dir, 0o700)
		if _, err := office.EnsureStateDir(state, k); err != nil {
			t.Errorf("second EnsureStateDir: %v", err)
		}
	})
	t.Run("conversations_symlink", func(t *testing.T) {
		state := t.TempDir()
		link := filepath.Join(state, "conversations")
		if err := os.Symlink(t.TempDir(), link); err != nil {
			t.Fatal(err)
		}
		_, err := office.EnsureStateDir(state, k)
		checkErr(t, err, "Conversation state root must be a regular non-symlink directory: "+link, errdefs.ErrFailedPrecondition)
	})
	t.Run("office_state_symlink", func(t *testing.T) {
		state := t.TempDir()
		if err := os.Mkdir(filepath.Join(state, "conversations"), 0o700); err != nil {
			t.Fatal(err)
		}
		link := office.StateDir(state, k)
		if err := os.Symlink(t.TempDir(), link); err != nil {
			t.Fatal(err)
		}
		_, err := office.EnsureStateDir(state, k)
		checkErr(t, err, "Office state directory must be a regular non-symlink directory: "+link, errdefs.ErrFailedPrecondition)
	})
	t.Run("invalid_key", func(t *testing.T) {
		_, err := office.EnsureStateDir(t.TempDir(), "../escape")
		checkErr(t, err, `Invalid office key: "../escape"`, errdefs.ErrInvalid)
	})
	t.Run("state_dir_missing", func(t *testing.T) {
		_, err := office.EnsureStateDir(filepath.Join(t.TempDir(), "missing"), k)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got %v, want a not-exist error", err)
		}
	})
}
