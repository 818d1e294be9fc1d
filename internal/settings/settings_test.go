package settings_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/settings"
)

func TestPaths(t *testing.T) {
	if got, want := settings.GlobalPath("/st"), "/st/settings.json"; got != want {
		t.Errorf("GlobalPath() = %q, want %q", got, want)
	}
	if got, want := settings.ConversationPath("/st", "v1-slack-x-0123456789abcdef"), "/st/conversations/v1-slack-x-0123456789abcdef/settings.json"; got != want {
		t.Errorf("ConversationPath() = %q, want %q", got, want)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadWorkspace(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    *projection.Setting
	}{
		{"empty_object", `{}`, nil},
		{"other_keys_only", `{"model": "x", "sandbox": {"boost": {"cpus": 2}}}`, nil},
		{"empty_sandbox", `{"sandbox": {}}`, nil},
		{"empty_workspace_counts", `{"sandbox": {"workspace": {}}}`, &projection.Setting{}},
		{"door_only", `{"sandbox": {"workspace": {"doorPolicy": "isolated"}}}`, &projection.Setting{DoorPolicy: "isolated"}},
		{"all_fields", `{"sandbox": {"workspace": {"doorPolicy": "trusted", "layout": "shared-support", "visibility": "private"}}}`,
			&projection.Setting{DoorPolicy: "trusted", Layout: "shared-support", Visibility: "private"}},
		{"legacy_full", `{"sandbox": {"image": {"name": "img", "workspaceMount": "full"}}}`,
			&projection.Setting{DoorPolicy: "trusted", Layout: "full"}},
		{"legacy_private", `{"sandbox": {"image": {"workspaceMount": "private"}}}`,
			&projection.Setting{DoorPolicy: "trusted", Layout: "shared-support", Visibility: "public"}},
		{"explicit_wins_over_legacy_leaf_by_leaf", `{"sandbox": {"image": {"workspaceMount": "private"}, "workspace": {"visibility": "private"}}}`,
			&projection.Setting{DoorPolicy: "trusted", Layout: "shared-support", Visibility: "private"}},
		{"image_without_legacy_key", `{"sandbox": {"image": {"name": "img"}}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			writeFile(t, path, tt.content)
			got, err := settings.LoadWorkspace(path)
			if err != nil {
				t.Fatalf("LoadWorkspace() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LoadWorkspace() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadWorkspace_Absent(t *testing.T) {
	got, err := settings.LoadWorkspace(filepath.Join(t.TempDir(), "missing", "settings.json"))
	if err != nil || got != nil {
		t.Fatalf("LoadWorkspace(absent) = %v, %v; want nil, nil", got, err)
	}
}

func TestLoadWorkspace_MalformedFailsClosed(t *testing.T) {
	tests := []struct {
		name    string
		content string
		reason  string
	}{
		{"empty_file", ``, "invalid JSON: unexpected end of JSON input"},
		{"bad_json", `{"sandbox": `, "invalid JSON: unexpected end of JSON input"},
		{"trailing_garbage", `{} x`, "invalid JSON: invalid character 'x' after top-level value"},
		{"top_level_array", `[]`, "the top level is not a JSON object"},
		{"top_level_null", `null`, "the top level is not a JSON object"},
		{"sandbox_string", `{"sandbox": "image"}`, "sandbox is not a JSON object"},
		{"sandbox_null", `{"sandbox": null}`, "sandbox is not a JSON object"},
		{"workspace_string", `{"sandbox": {"workspace": "isolated"}}`, "sandbox.workspace is not a JSON object"},
		{"workspace_null", `{"sandbox": {"workspace": null}}`, "sandbox.workspace is not a JSON object"},
		{"door_number", `{"sandbox": {"workspace": {"doorPolicy": 1}}}`, "sandbox.workspace.doorPolicy is not a string"},
		{"layout_null", `{"sandbox": {"workspace": {"layout": null}}}`, "sandbox.workspace.layout is not a string"},
		{"wrong_case_key", `{"sandbox": {"workspace": {"DoorPolicy": "trusted"}}}`, "unknown key sandbox.workspace.DoorPolicy"},
		{"unknown_key", `{"sandbox": {"workspace": {"doorPolicy": "trusted", "visiblity": "private"}}}`, "unknown key sandbox.workspace.visiblity"},
		{"invalid_value", `{"sandbox": {"workspace": {"doorPolicy": "open"}}}`, `sandbox.workspace.doorPolicy must be "isolated" or "trusted", not "open"`},
		{"image_string", `{"sandbox": {"image": "debian"}}`, "sandbox.image is not a JSON object"},
		{"legacy_number", `{"sandbox": {"image": {"workspaceMount": 1}}}`, "sandbox.image.workspaceMount is not a string"},
		{"legacy_unknown", `{"sandbox": {"image": {"workspaceMount": "shared"}}}`, `sandbox.image.workspaceMount must be "private" or "full", not "shared"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			writeFile(t, path, tt.content)
			got, err := settings.LoadWorkspace(path)
			checkMalformed(t, err, path, tt.reason)
			if got != nil {
				t.Errorf("LoadWorkspace() = %+v with an error, want nil", got)
			}
		})
	}
}

func checkMalformed(t *testing.T, err error, path, reason string) {
	t.Helper()
	want := "Malformed settings in " + path + ": " + reason
	if err == nil {
		t.Fatalf("error = nil, want %q", want)
	}
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("error class: errors.Is(err, ErrFailedPrecondition) = false")
	}
}

func TestLoadWorkspace_NotARegularFile(t *testing.T) {
	tests := []struct {
		name   string
		make   func(t *testing.T, path string)
		reason string
	}{
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(filepath.Dir(path), "real.json")
			writeFile(t, target, `{"sandbox": {"workspace": {"doorPolicy": "trusted", "layout": "full"}}}`)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "it is a symlink"},
		{"dangling_symlink", func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(path), "nowhere"), path); err != nil {
				t.Fatal(err)
			}
		}, "it is a symlink"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "it is not a regular file"},
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}, "it is not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			tt.make(t, path)
			_, err := settings.LoadWorkspace(path)
			checkMalformed(t, err, path, tt.reason)
			err = settings.SetWorkspace(path, nil)
			checkMalformed(t, err, path, tt.reason)
		})
	}
}

func TestLoadWorkspace_TooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	big := make([]byte, 1<<20+1)
	for i := range big {
		big[i] = ' '
	}
	big[0] = '{'
	big[len(big)-1] = '}'
	writeFile(t, path, string(big))
	_, err := settings.LoadWorkspace(path)
	checkMalformed(t, err, path, "it is larger than 1 MiB")
}

func TestLoadWorkspace_Unreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	path := filepath.Join(t.TempDir(), "settings.json")
	writeFile(t, path, `{}`)
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err := settings.LoadWorkspace(path)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("LoadWorkspace() error = %v, want ErrFailedPrecondition and fs.ErrPermission", err)
	}
}

func TestSetWorkspace_ExactOutput(t *testing.T) {
	tests := []struct {
		name    string
		initial string // "" means no file
		set     *projection.Setting
		want    string
	}{
		{
			name: "new_file",
			set:  &projection.Setting{DoorPolicy: "trusted", Layout: "full"},
			want: "{\n  \"sandbox\": {\n    \"workspace\": {\n      \"doorPolicy\": \"trusted\",\n      \"layout\": \"full\"\n    }\n  }\n}\n",
		},
		{
			name:    "replace_keeps_other_keys",
			initial: `{"zeta": [1, 2.50, 12345678901234567890], "html": "<a&b>", "sandbox": {"boost": {"cpus": 2}, "workspace": {"doorPolicy": "isolated"}}}`,
			set:     &projection.Setting{DoorPolicy: "trusted", Layout: "shared-support", Visibility: "private"},
			want: `{
  "html": "<a&b>",
  "sandbox": {
    "boost": {
      "cpus": 2
    },
    "workspace": {
      "doorPolicy": "trusted",
      "layout": "shared-support",
      "visibility": "private"
    }
  },
  "zeta": [
    1,
    2.50,
    12345678901234567890
  ]
}
`,
		},
		{
			name:    "remove_keeps_sandbox_siblings",
			initial: `{"sandbox": {"boost": {"cpus": 2}, "workspace": {"doorPolicy": "trusted"}}}`,
			want:    "{\n  \"sandbox\": {\n    \"boost\": {\n      \"cpus\": 2\n    }\n  }\n}\n",
		},
		{
			name:    "remove_drops_emptied_sandbox",
			initial: `{"model": "m", "sandbox": {"workspace": {"doorPolicy": "trusted"}}}`,
			want:    "{\n  \"model\": \"m\"\n}\n",
		},
		{
			name:    "remove_legacy_keeps_image_siblings",
			initial: `{"sandbox": {"image": {"name": "img", "workspaceMount": "full"}}}`,
			want:    "{\n  \"sandbox\": {\n    \"image\": {\n      \"name\": \"img\"\n    }\n  }\n}\n",
		},
		{
			name:    "set_removes_legacy_and_emptied_image",
			initial: `{"sandbox": {"image": {"workspaceMount": "private"}}}`,
			set:     &projection.Setting{DoorPolicy: "isolated"},
			want:    "{\n  \"sandbox\": {\n    \"workspace\": {\n      \"doorPolicy\": \"isolated\"\n    }\n  }\n}\n",
		},
		{
			name:    "remove_everything_leaves_empty_object",
			initial: `{"sandbox": {"workspace": {}}}`,
			want:    "{}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			if tt.initial != "" {
				writeFile(t, path, tt.initial)
			}
			if err := settings.SetWorkspace(path, tt.set); err != nil {
				t.Fatalf("SetWorkspace() error = %v", err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("file mismatch (-want +got):\n%s", diff)
			}
			back, err := settings.LoadWorkspace(path)
			if err != nil {
				t.Fatalf("LoadWorkspace() after write: %v", err)
			}
			if diff := cmp.Diff(tt.set, back); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetWorkspace_PreservesValues(t *testing.T) {
	initial := `{"a": {"deep": {"x": [true, null, "s", -0.5e10]}}, "b": "\u00e9\ud83d\ude00", "sandbox": {"image": {"cpus": 1.5, "workspaceMount": "full"}}}`
	path := filepath.Join(t.TempDir(), "settings.json")
	writeFile(t, path, initial)
	if err := settings.SetWorkspace(path, &projection.Setting{DoorPolicy: "isolated"}); err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	if err := json.Unmarshal([]byte(initial), &before); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &after); err != nil {
		t.Fatal(err)
	}
	sb := before["sandbox"].(map[string]any)
	delete(sb["image"].(map[string]any), "workspaceMount")
	sb["workspace"] = map[string]any{"doorPolicy": "isolated"}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("values changed (-want +got):\n%s", diff)
	}
}

func TestSetWorkspace_NothingToRemoveWritesNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "conversations", "k", "settings.json")
	if err := settings.SetWorkspace(missing, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "conversations")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("clearing an absent setting created %s (err %v)", filepath.Join(dir, "conversations"), err)
	}

	path := filepath.Join(dir, "settings.json")
	const initial = `{"model":"m"}`
	writeFile(t, path, initial)
	if err := settings.SetWorkspace(path, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != initial {
		t.Errorf("file rewritten to %q, want it untouched", got)
	}
}

func TestSetWorkspace_RefusesMalformed(t *testing.T) {
	tests := []struct {
		name, content, reason string
	}{
		{"bad_json", `{"sandbox": {`, "invalid JSON: unexpected end of JSON input"},
		{"top_level_array", `["x"]`, "the top level is not a JSON object"},
		{"invalid_value", `{"sandbox": {"workspace": {"layout": "wide"}}}`, `sandbox.workspace.layout must be "conversation", "shared-support" or "full", not "wide"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			writeFile(t, path, tt.content)
			err := settings.SetWorkspace(path, &projection.Setting{DoorPolicy: "isolated"})
			checkMalformed(t, err, path, tt.reason)
			if got, _ := os.ReadFile(path); string(got) != tt.content {
				t.Errorf("malformed file rewritten to %q", got)
			}
		})
	}
}

func TestSetWorkspace_RefusesInvalidSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	err := settings.SetWorkspace(path, &projection.Setting{DoorPolicy: "wide-open"})
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("SetWorkspace() error = %v, want ErrInvalid", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an invalid setting was written (lstat err %v)", err)
	}
}

func TestSetWorkspace_Modes(t *testing.T) {
	for _, umask := range []int{0o022, 0, 0o077} {
		t.Run(umaskName(umask), func(t *testing.T) {
			old := syscall.Umask(umask)
			defer syscall.Umask(old)
			state := t.TempDir()
			path := settings.ConversationPath(state, "v1-slack-x-0123456789abcdef")
			if err := settings.SetWorkspace(path, &projection.Setting{DoorPolicy: "isolated"}); err != nil {
				t.Fatal(err)
			}
			checkMode(t, path, 0o600)
			checkMode(t, filepath.Dir(path), fs.ModeDir|0o700)
			checkMode(t, filepath.Join(state, "conversations"), fs.ModeDir|0o700)

			// An existing, wider file is narrowed on rewrite.
			global := settings.GlobalPath(state)
			writeFile(t, global, `{}`)
			if err := os.Chmod(global, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := settings.SetWorkspace(global, &projection.Setting{}); err != nil {
				t.Fatal(err)
			}
			checkMode(t, global, 0o600)
		})
	}
}

func umaskName(u int) string {
	return "umask_" + string([]byte{'0' + byte(u>>6&7), '0' + byte(u>>3&7), '0' + byte(u&7)})
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
