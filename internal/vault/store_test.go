package vault

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

var testKey = UserKey("alice")

func newTestStore(t *testing.T) (*Store, string) {
	t.Helper()
	state := t.TempDir()
	return NewStore(state), state
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tree maps every path below root to "dir <perm>" or "file <perm> <content>".
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out[rel] = fmt.Sprintf("dir %o", info.Mode().Perm())
		case d.Type().IsRegular():
			out[rel] = fmt.Sprintf("file %o %s", info.Mode().Perm(), readTestFile(t, p))
		default:
			out[rel] = "other " + info.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNewStore_Dir(t *testing.T) {
	s := NewStore("/state")
	if got, want := s.Dir("k"), "/state/vaults/k"; got != want {
		t.Errorf("Dir got %q, want %q", got, want)
	}
	rel := NewStore("state")
	if !filepath.IsAbs(rel.Dir("k")) {
		t.Errorf("Dir of a relative state dir is %q, want an absolute path", rel.Dir("k"))
	}
}

func TestStore_EmptyVault(t *testing.T) {
	s, state := newTestStore(t)
	env, err := s.Env(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{}, env); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}
	list, err := s.List(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Entry{}, list); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	has, err := s.HasFiles(testKey)
	if err != nil || has {
		t.Errorf("HasFiles = %v, %v; want false, nil", has, err)
	}
	plan, err := s.Plan(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Plan{Env: map[string]string{}, Files: []FileMount{}}, plan); diff != "" {
		t.Errorf("Plan (-want +got):\n%s", diff)
	}
	if err := s.SetEnv(testKey, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, "vaults")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("reads or an empty SetEnv created the store: %v", err)
	}
}

func TestStore_SetEnvMergesAndSorts(t *testing.T) {
	s, _ := newTestStore(t)
	if err := s.SetEnv(testKey, map[string]string{"B": "2", "A": `"quoted"`}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetEnv(testKey, map[string]string{"B": "two", "C": "$HOME"}); err != nil {
		t.Fatal(err)
	}
	got := readTestFile(t, filepath.Join(s.Dir(testKey), "env"))
	want := "A='\"quoted\"'\nB=two\nC=$HOME\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env file (-want +got):\n%s", diff)
	}
	env, err := s.Env(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"A": `"quoted"`, "B": "two", "C": "$HOME"}, env); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}
}

func TestStore_SetEnvRefusesBeforeWriting(t *testing.T) {
	s, _ := newTestStore(t)
	if err := s.SetEnv(testKey, map[string]string{"A": "1"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		vars    map[string]string
		wantErr string
	}{
		{"bad_name", map[string]string{"B": "2", "1X": "3"}, `invalid variable name "1X"`},
		{"newline_value", map[string]string{"B": "2\n3"}, `value of variable "B" contains a newline, carriage return or NUL`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.SetEnv(testKey, tc.vars)
			if err == nil || err.Error() != tc.wantErr || !errdefs.IsInvalid(err) {
				t.Fatalf("SetEnv got %v, want ErrInvalid %q", err, tc.wantErr)
			}
			env, err := s.Env(testKey)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]string{"A": "1"}, env); diff != "" {
				t.Errorf("env changed by a refused SetEnv (-want +got):\n%s", diff)
			}
		})
	}
}

// The store must not depend on the umask: with one that strips the owner's
// write bit, everything it makes still ends up 0700 / 0600.
func TestStore_PermissionsIgnoreUmask(t *testing.T) {
	old := syscall.Umask(0o277)
	t.Cleanup(func() { syscall.Umask(old) })

	s, state := newTestStore(t)
	src := t.TempDir()
	writeTestFile(t, filepath.Join(src, "kube", "config"), "k")
	writeTestFile(t, filepath.Join(src, "kube", "cache", "x"), "x")
	writeTestFile(t, filepath.Join(src, "token"), "t")
	if err := s.SetEnv(testKey, map[string]string{"A": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(testKey, ".kube", filepath.Join(src, "kube")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(testKey, "token", filepath.Join(src, "token")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		".":                        "dir 700",
		testKey:                    "dir 700",
		testKey + "/env":           "file 600 A=1\n",
		testKey + "/.kube":         "dir 700",
		testKey + "/.kube/config":  "file 600 k",
		testKey + "/.kube/cache":   "dir 700",
		testKey + "/.kube/cache/x": "file 600 x",
		testKey + "/token":         "file 600 t",
	}
	if diff := cmp.Diff(want, tree(t, filepath.Join(state, "vaults"))); diff != "" {
		t.Errorf("vault tree (-want +got):\n%s", diff)
	}
}

func TestStore_PutFileReplaces(t *testing.T) {
	src := t.TempDir()
	writeTestFile(t, filepath.Join(src, "f1"), "one")
	writeTestFile(t, filepath.Join(src, "f2"), "two")
	writeTestFile(t, filepath.Join(src, "d1", "a"), "a1")
	writeTestFile(t, filepath.Join(src, "d2", "b"), "b2")
	tests := []struct {
		name          string
		first, second string
		want          map[string]string
	}{
		{"file_over_file", "f1", "f2", map[string]string{".": "file 600 two"}},
		{"dir_over_file", "f1", "d2", map[string]string{".": "dir 700", "b": "file 600 b2"}},
		{"file_over_dir", "d1", "f2", map[string]string{".": "file 600 two"}},
		{"dir_over_dir", "d1", "d2", map[string]string{".": "dir 700", "b": "file 600 b2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			for _, from := range []string{tc.first, tc.second} {
				if err := s.PutFile(testKey, "cred", filepath.Join(src, from)); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, tree(t, filepath.Join(s.Dir(testKey), "cred"))); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
			entries, err := os.ReadDir(s.Dir(testKey))
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("vault dir holds %d entries, want 1 (no staged or aside leftovers)", len(entries))
			}
		})
	}
}

func TestStore_PutFileFollowsTopLevelSymlink(t *testing.T) {
	s, _ := newTestStore(t)
	src := t.TempDir()
	writeTestFile(t, filepath.Join(src, "real"), "r")
	link := filepath.Join(src, "link")
	if err := os.Symlink(filepath.Join(src, "real"), link); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(testKey, "cred", link); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{".": "file 600 r"}, tree(t, filepath.Join(s.Dir(testKey), "cred"))); diff != "" {
		t.Errorf("entry (-want +got):\n%s", diff)
	}
}

func TestStore_PutFileErrors(t *testing.T) {
	src := t.TempDir()
	writeTestFile(t, filepath.Join(src, "file"), "f")
	writeTestFile(t, filepath.Join(src, "withlink", "ok"), "ok")
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "withlink", "passwd")); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(src, "deeplink", "sub", "ok"), "ok")
	if err := os.Symlink("..", filepath.Join(src, "deeplink", "sub", "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "withfifo"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "withfifo", "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}

	s, state := newTestStore(t)
	if err := s.SetEnv(testKey, map[string]string{"GH_TOKEN": "x"}); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(src, "missing")
	tests := []struct {
		name      string
		key       string
		entry     string
		source    string
		wantErr   string
		wantClass error
	}{
		{"bad_key", "a/b", "cred", filepath.Join(src, "file"), `Invalid vault key "a/b": must not contain path separators`, errdefs.ErrInvalid},
		{"empty_name", testKey, "", filepath.Join(src, "file"), "Vault entry name must be non-empty", errdefs.ErrInvalid},
		{"env_name", testKey, "env", filepath.Join(src, "file"), `Invalid vault entry name "env": the name is reserved for env variables`, errdefs.ErrInvalid},
		{"dotdot_name", testKey, "..", filepath.Join(src, "file"), `Invalid vault entry name "..": must not be a path marker`, errdefs.ErrInvalid},
		{"slash_name", testKey, ".config/gh", filepath.Join(src, "file"), `Invalid vault entry name ".config/gh": must not contain path separators`, errdefs.ErrInvalid},
		{"backslash_name", testKey, `a\b`, filepath.Join(src, "file"), `Invalid vault entry name "a\\b": must not contain path separators`, errdefs.ErrInvalid},
		{"control_name", testKey, "a\tb", filepath.Join(src, "file"), `Invalid vault entry name "a\tb": must not contain control characters`, errdefs.ErrInvalid},
		{"stage_prefix_name", testKey, ".hutch-stage-1", filepath.Join(src, "file"), `Invalid vault entry name ".hutch-stage-1": the prefix is reserved`, errdefs.ErrInvalid},
		{"env_temp_prefix_name", testKey, ".env.tmp-1", filepath.Join(src, "file"), `Invalid vault entry name ".env.tmp-1": the prefix is reserved`, errdefs.ErrInvalid},
		{"missing_source", testKey, "cred", missing, fmt.Sprintf("Vault source %q does not exist", missing), errdefs.ErrNotFound},
		{"fifo_source", testKey, "cred", filepath.Join(src, "fifo"), fmt.Sprintf("Vault source %q is not a regular file or directory", filepath.Join(src, "fifo")), errdefs.ErrInvalid},
		{"symlink_inside", testKey, "cred", filepath.Join(src, "withlink"), fmt.Sprintf("Vault source %q contains a symlink %q; symlinks are not copied", filepath.Join(src, "withlink"), "passwd"), errdefs.ErrInvalid},
		{"symlink_deep_inside", testKey, "cred", filepath.Join(src, "deeplink"), fmt.Sprintf("Vault source %q contains a symlink %q; symlinks are not copied", filepath.Join(src, "deeplink"), "sub/up"), errdefs.ErrInvalid},
		{"fifo_inside", testKey, "cred", filepath.Join(src, "withfifo"), fmt.Sprintf("Vault source %q contains %q, which is not a regular file or directory", filepath.Join(src, "withfifo"), "pipe"), errdefs.ErrInvalid},
		{"source_is_store", testKey, "cred", state, fmt.Sprintf("Vault source %q overlaps the vault store", state), errdefs.ErrInvalid},
		{"source_in_store", testKey, "cred", s.Dir(testKey), fmt.Sprintf("Vault source %q overlaps the vault store", s.Dir(testKey)), errdefs.ErrInvalid},
		{"env_conflict", testKey, "GH_TOKEN", filepath.Join(src, "file"), `Vault entry "GH_TOKEN" already exists as an env variable`, errdefs.ErrConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.PutFile(tc.key, tc.entry, tc.source)
			if err == nil {
				t.Fatalf("PutFile = nil, want %q", tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("PutFile got %q, want %q", err, tc.wantErr)
			}
			if !errors.Is(err, tc.wantClass) {
				t.Errorf("PutFile error %q is not of class %v", err, tc.wantClass)
			}
			list, err := s.List(testKey)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]Entry{{Name: "GH_TOKEN", Kind: EntryEnv}}, list); diff != "" {
				t.Errorf("a refused PutFile changed the vault (-want +got):\n%s", diff)
			}
			entries, _ := os.ReadDir(s.Dir(testKey))
			if len(entries) != 1 {
				t.Errorf("vault dir holds %d entries, want only the env file", len(entries))
			}
		})
	}
}

func TestStore_SetEnvConflictsWithFile(t *testing.T) {
	s, _ := newTestStore(t)
	src := filepath.Join(t.TempDir(), "f")
	writeTestFile(t, src, "f")
	if err := s.PutFile(testKey, "TOKEN", src); err != nil {
		t.Fatal(err)
	}
	err := s.SetEnv(testKey, map[string]string{"TOKEN": "x"})
	if err == nil || err.Error() != `Vault entry "TOKEN" already exists as a file` || !errdefs.IsConflict(err) {
		t.Fatalf("SetEnv got %v, want ErrConflict", err)
	}
	// A variable named after the env file itself is not a clash.
	if err := s.SetEnv(testKey, map[string]string{"env": "x"}); err != nil {
		t.Fatal(err)
	}
}

func TestStore_ListHasFilesPlan(t *testing.T) {
	s, _ := newTestStore(t)
	src := t.TempDir()
	writeTestFile(t, filepath.Join(src, "ssh", "id_ed25519"), "key")
	writeTestFile(t, filepath.Join(src, "adc.json"), "{}")
	if err := s.SetEnv(testKey, map[string]string{"Z_VAR": "z", "A_VAR": "a"}); err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasFiles(testKey); err != nil || has {
		t.Errorf("HasFiles with env only = %v, %v; want false, nil", has, err)
	}
	if err := s.PutFile(testKey, "gcloud-adc.json", filepath.Join(src, "adc.json")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(testKey, ".ssh", filepath.Join(src, "ssh")); err != nil {
		t.Fatal(err)
	}
	// Leftovers of a crash are never listed or projected.
	writeTestFile(t, filepath.Join(s.Dir(testKey), ".hutch-old-0123"), "stale")
	writeTestFile(t, filepath.Join(s.Dir(testKey), ".env.tmp-42"), "stale")

	list, err := s.List(testKey)
	if err != nil {
		t.Fatal(err)
	}
	wantList := []Entry{
		{Name: "A_VAR", Kind: EntryEnv},
		{Name: "Z_VAR", Kind: EntryEnv},
		{Name: ".ssh", Kind: EntryDir},
		{Name: "gcloud-adc.json", Kind: EntryFile},
	}
	if diff := cmp.Diff(wantList, list); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if has, err := s.HasFiles(testKey); err != nil || !has {
		t.Errorf("HasFiles = %v, %v; want true, nil", has, err)
	}
	plan, err := s.Plan(testKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir(testKey)
	wantPlan := Plan{
		Env: map[string]string{"A_VAR": "a", "Z_VAR": "z"},
		Files: []FileMount{
			{Name: ".ssh", HostPath: filepath.Join(dir, ".ssh"), RuntimePath: "/root/.ssh"},
			{Name: "gcloud-adc.json", HostPath: filepath.Join(dir, "gcloud-adc.json"), RuntimePath: "/root/.config/gcloud/application_default_credentials.json"},
		},
	}
	if diff := cmp.Diff(wantPlan, plan); diff != "" {
		t.Errorf("Plan (-want +got):\n%s", diff)
	}
	if err := CheckTargets(plan.Files, []string{"/workspace"}); err != nil {
		t.Errorf("CheckTargets: %v", err)
	}
}

func TestStore_Remove(t *testing.T) {
	src := t.TempDir()
	writeTestFile(t, filepath.Join(src, "f"), "f")
	writeTestFile(t, filepath.Join(src, "d", "x"), "x")
	setup := func(t *testing.T) *Store {
		s, _ := newTestStore(t)
		if err := s.SetEnv(testKey, map[string]string{"A": "1", "B": "2"}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutFile(testKey, "file", filepath.Join(src, "f")); err != nil {
			t.Fatal(err)
		}
		if err := s.PutFile(testKey, "dir", filepath.Join(src, "d")); err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name     string
		remove   []string
		wantList []Entry
	}{
		{"env_var", []string{"A"}, []Entry{{"B", EntryEnv}, {"dir", EntryDir}, {"file", EntryFile}}},
		{"file", []string{"file"}, []Entry{{"A", EntryEnv}, {"B", EntryEnv}, {"dir", EntryDir}}},
		{"dir", []string{"dir"}, []Entry{{"A", EntryEnv}, {"B", EntryEnv}, {"file", EntryFile}}},
		{"everything", []string{"A", "B", "file", "dir"}, []Entry{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := setup(t)
			for _, name := range tc.remove {
				if err := s.Remove(testKey, name); err != nil {
					t.Fatalf("Remove(%q): %v", name, err)
				}
			}
			list, err := s.List(testKey)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantList, list); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("last_env_var_removes_env_file", func(t *testing.T) {
		s := setup(t)
		for _, name := range []string{"A", "B"} {
			if err := s.Remove(testKey, name); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Lstat(filepath.Join(s.Dir(testKey), "env")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("env file still exists: %v", err)
		}
	})

	for _, tc := range []struct{ name, key, entry string }{
		{"missing_name", testKey, "NOPE"},
		{"twice", testKey, "A"},
		{"env_file_itself", testKey, "env"},
		{"traversal", testKey, "../" + testKey},
		{"missing_vault", UserKey("bob"), "A"},
	} {
		t.Run("not_found_"+tc.name, func(t *testing.T) {
			s := setup(t)
			if tc.name == "twice" {
				if err := s.Remove(tc.key, tc.entry); err != nil {
					t.Fatal(err)
				}
			}
			err := s.Remove(tc.key, tc.entry)
			want := fmt.Sprintf("No vault entry named %q", tc.entry)
			if err == nil || err.Error() != want || !errdefs.IsNotFound(err) {
				t.Errorf("Remove(%q) got %v, want ErrNotFound %q", tc.entry, err, want)
			}
		})
	}
}

func TestStore_MalformedEnvFile(t *testing.T) {
	s, _ := newTestStore(t)
	envPath := filepath.Join(s.Dir(testKey), "env")
	writeTestFile(t, envPath, "A=1\nnot a pair\n")
	want := fmt.Sprintf("Malformed vault env file %q: line 2: expected NAME=VALUE", envPath)
	src := filepath.Join(t.TempDir(), "f")
	writeTestFile(t, src, "f")
	calls := map[string]func() error{
		"Env":     func() error { _, err := s.Env(testKey); return err },
		"List":    func() error { _, err := s.List(testKey); return err },
		"Plan":    func() error { _, err := s.Plan(testKey); return err },
		"SetEnv":  func() error { return s.SetEnv(testKey, map[string]string{"B": "2"}) },
		"Remove":  func() error { return s.Remove(testKey, "A") },
		"PutFile": func() error { return s.PutFile(testKey, "f", src) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if err == nil || err.Error() != want || !errdefs.IsFailedPrecondition(err) {
				t.Errorf("got %v, want ErrFailedPrecondition %q", err, want)
			}
		})
	}
}

// Entries the store never makes (a symlink could project any host file)
// fail the read instead of being mounted.
func TestStore_RefusesForeignEntries(t *testing.T) {
	tests := []struct {
		name    string
		plant   func(t *testing.T, dir string)
		wantErr func(dir string) string
	}{
		{
			"symlink_entry",
			func(t *testing.T, dir string) {
				if err := os.Symlink("/etc", filepath.Join(dir, ".ssh")); err != nil {
					t.Fatal(err)
				}
			},
			func(dir string) string {
				return fmt.Sprintf("Vault entry %q is not a regular file or directory; remove it", filepath.Join(dir, ".ssh"))
			},
		},
		{
			"symlink_env_file",
			func(t *testing.T, dir string) {
				if err := os.Symlink("/etc/passwd", filepath.Join(dir, "env")); err != nil {
					t.Fatal(err)
				}
			},
			func(dir string) string {
				return fmt.Sprintf("Vault env file %q is not a regular file", filepath.Join(dir, "env"))
			},
		},
		{
			"control_char_name",
			func(t *testing.T, dir string) { writeTestFile(t, filepath.Join(dir, "a\nb"), "x") },
			func(dir string) string {
				return fmt.Sprintf("Vault entry %q has a name the vault refuses; remove it", filepath.Join(dir, "a\nb"))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			dir := s.Dir(testKey)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, dir)
			_, err := s.Plan(testKey)
			if err == nil || err.Error() != tc.wantErr(dir) || !errdefs.IsFailedPrecondition(err) {
				t.Errorf("Plan got %v, want ErrFailedPrecondition %q", err, tc.wantErr(dir))
			}
		})
	}

	t.Run("symlink_vault_dir", func(t *testing.T) {
		s, state := newTestStore(t)
		elsewhere := t.TempDir()
		if err := os.MkdirAll(filepath.Join(state, "vaults"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, s.Dir(testKey)); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("Vault directory %q is not a directory", s.Dir(testKey))
		if err := s.SetEnv(testKey, map[string]string{"A": "1"}); err == nil || err.Error() != want {
			t.Errorf("SetEnv got %v, want %q", err, want)
		}
		if _, err := s.Env(testKey); err == nil || err.Error() != want {
			t.Errorf("Env got %v, want %q", err, want)
		}
		if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
			t.Errorf("the symlink target was written to: %d entries", len(entries))
		}
	})
}

func TestStore_InvalidKeyEverywhere(t *testing.T) {
	s, state := newTestStore(t)
	const key = ".."
	want := `Invalid vault key "..": must not be a path marker`
	calls := map[string]func() error{
		"Env":      func() error { _, err := s.Env(key); return err },
		"List":     func() error { _, err := s.List(key); return err },
		"Plan":     func() error { _, err := s.Plan(key); return err },
		"HasFiles": func() error { _, err := s.HasFiles(key); return err },
		"SetEnv":   func() error { return s.SetEnv(key, map[string]string{"A": "1"}) },
		"Remove":   func() error { return s.Remove(key, "A") },
		"PutFile":  func() error { return s.PutFile(key, "f", state) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if err == nil || err.Error() != want || !errdefs.IsInvalid(err) {
				t.Errorf("got %v, want ErrInvalid %q", err, want)
			}
		})
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("state dir written to by refused calls: %d entries", len(entries))
	}
}

func TestStore_ConcurrentSetEnv(t *testing.T) {
	s, _ := newTestStore(t)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.SetEnv(testKey, map[string]string{fmt.Sprintf("V%02d", i): strings.Repeat("x", i)}); err != nil {
				t.Error(err)
			}
			if _, err := s.Plan(testKey); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	env, err := s.Env(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(env) != n {
		t.Errorf("env holds %d variables, want %d: merges were lost", len(env), n)
	}
}
