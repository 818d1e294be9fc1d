package office_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
)

func TestChannelKind_RoundTrip(t *testing.T) {
	state := t.TempDir()
	k := mustAddress(t, "slack/C0123ABC").Key()
	path := filepath.Join(office.StateDir(state, k), "channel-kind")

	kind, present, err := office.ReadChannelKind(state, k)
	checkErr(t, err, "", nil)
	if present || kind != "" {
		t.Errorf("ReadChannelKind before any write got %q, %v", kind, present)
	}

	checkErr(t, office.WriteChannelKind(state, k, "public_channel"), "", nil)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "public_channel\n" {
		t.Errorf("file content got %q, want %q", data, "public_channel\n")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode got %o, want 600", fi.Mode().Perm())
	}
	kind, present, err = office.ReadChannelKind(state, k)
	checkErr(t, err, "", nil)
	if !present || kind != "public_channel" {
		t.Errorf("ReadChannelKind got %q, %v; want public_channel, true", kind, present)
	}

	// Same kind: not rewritten (an atomic rewrite would be a new inode).
	checkErr(t, office.WriteChannelKind(state, k, "public_channel"), "", nil)
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fi, after) {
		t.Error("unchanged channel kind was rewritten")
	}

	checkErr(t, office.WriteChannelKind(state, k, "im"), "", nil)
	kind, _, err = office.ReadChannelKind(state, k)
	checkErr(t, err, "", nil)
	if kind != "im" {
		t.Errorf("after change got %q, want im", kind)
	}
}

func TestReadChannelKind_Content(t *testing.T) {
	tests := []struct {
		name, content string
		kind          string
		present       bool
		wantErr       string // %s is the file path
	}{
		{"word_newline", "private\n", "private", true, ""},
		{"word_only", "private", "private", true, ""},
		{"trailing_space_forgiven", "private \r\n", "private", true, ""},
		{"empty_is_absent", "", "", false, ""},
		{"two_words", "private channel\n", "", false, `Invalid channel kind in %s: "private channel\n"`},
		{"two_lines", "private\npublic\n", "", false, `Invalid channel kind in %s: "private\npublic\n"`},
		{"uppercase", "Public\n", "", false, `Invalid channel kind in %s: "Public\n"`},
		{"only_newline", "\n", "", false, `Invalid channel kind in %s: "\n"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			k := mustAddress(t, "web/x").Key()
			dir, err := office.EnsureStateDir(state, k)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "channel-kind")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			kind, present, err := office.ReadChannelKind(state, k)
			checkErr(t, err, strings.ReplaceAll(tc.wantErr, "%s", path), errdefs.ErrFailedPrecondition)
			if kind != tc.kind || present != tc.present {
				t.Errorf("ReadChannelKind got %q, %v; want %q, %v", kind, present, tc.kind, tc.present)
			}
			if tc.wantErr != "" {
				// Writing a valid kind repairs a garbled file.
				checkErr(t, office.WriteChannelKind(state, k, "public"), "", nil)
				kind, present, err := office.ReadChannelKind(state, k)
				checkErr(t, err, "", nil)
				if kind != "public" || !present {
					t.Errorf("after repair got %q, %v", kind, present)
				}
			}
		})
	}
}

func TestChannelKind_Unreadable(t *testing.T) {
	k := mustAddress(t, "web/x").Key()
	tests := []struct {
		name  string
		plant func(t *testing.T, path string)
	}{
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "kind")
			if err := os.WriteFile(target, []byte("public\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			dir, err := office.EnsureStateDir(state, k)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "channel-kind")
			tc.plant(t, path)
			want := "Channel kind file must be a regular non-symlink file: " + path
			_, _, err = office.ReadChannelKind(state, k)
			checkErr(t, err, want, errdefs.ErrFailedPrecondition)
			checkErr(t, office.WriteChannelKind(state, k, "public"), want, errdefs.ErrFailedPrecondition)
		})
	}
	t.Run("permission", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads files whatever their mode")
		}
		state := t.TempDir()
		dir, err := office.EnsureStateDir(state, k)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "channel-kind")
		if err := os.WriteFile(path, []byte("public\n"), 0o000); err != nil {
			t.Fatal(err)
		}
		if _, _, err := office.ReadChannelKind(state, k); err == nil {
			t.Error("ReadChannelKind of an unreadable file got no error")
		}
	})
	t.Run("state_path_is_a_file", func(t *testing.T) {
		state := t.TempDir()
		if err := os.WriteFile(filepath.Join(state, "conversations"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := office.ReadChannelKind(state, k); err == nil {
			t.Error("ReadChannelKind under a file got no error")
		}
	})
}

func TestWriteChannelKind_Invalid(t *testing.T) {
	tests := []struct {
		name, kind, want string
	}{
		{"empty", "", `Invalid channel kind: "" (one word of a-z and _)`},
		{"uppercase", "Public", `Invalid channel kind: "Public" (one word of a-z and _)`},
		{"newline", "public\n", `Invalid channel kind: "public\n" (one word of a-z and _)`},
		{"space", "a b", `Invalid channel kind: "a b" (one word of a-z and _)`},
		{"dash", "dm-1", `Invalid channel kind: "dm-1" (one word of a-z and _)`},
	}
	state := t.TempDir()
	k := mustAddress(t, "web/x").Key()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, office.WriteChannelKind(state, k, tc.kind), tc.want, errdefs.ErrInvalid)
		})
	}
	t.Run("invalid_key", func(t *testing.T) {
		err := office.WriteChannelKind(state, "nope", "public")
		checkErr(t, err, `Invalid office key: "nope"`, errdefs.ErrInvalid)
	})
	if _, err := os.Stat(filepath.Join(state, "conversations")); err == nil {
		t.Error("state written for invalid input")
	}
}

func TestPlatformOf(t *testing.T) {
	for _, p := range office.Platforms {
		k := mustAddress(t, string(p)+"/C1").Key()
		got, err := office.PlatformOf(k)
		if err != nil || got != p {
			t.Errorf("PlatformOf(%s) = %q, %v; want %q", k, got, err, p)
		}
	}
	if _, err := office.PlatformOf("v1-irc-c1-0123456789abcdef"); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("PlatformOf(irc key) error = %v, want ErrInvalid", err)
	}
}
