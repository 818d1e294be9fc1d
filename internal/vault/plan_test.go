package vault

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestFileTarget(t *testing.T) {
	tests := []struct {
		name, entry, want string
	}{
		{"ssh", ".ssh", "/root/.ssh"},
		{"kube", ".kube", "/root/.kube"},
		{"config", ".config", "/root/.config"},
		{"plain", "token.json", "/root/token.json"},
		{"gws", "gws.json", "/root/.config/gws/credentials.json"},
		{"gcloud_adc", "gcloud-adc.json", "/root/.config/gcloud/application_default_credentials.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FileTarget(tc.entry); got != tc.want {
				t.Errorf("FileTarget(%q) got %q, want %q", tc.entry, got, tc.want)
			}
		})
	}
}

func mounts(targets ...string) []FileMount {
	var out []FileMount
	for _, t := range targets {
		out = append(out, FileMount{Name: "n", HostPath: "/h", RuntimePath: t})
	}
	return out
}

func TestCheckTargets(t *testing.T) {
	tests := []struct {
		name      string
		files     []FileMount
		workspace []string
		wantErr   string
	}{
		{"none", nil, []string{"/workspace"}, ""},
		{"disjoint", mounts("/root/.ssh", "/root/.kube"), []string{"/workspace", "/workspace/k"}, ""},
		{"prefix_is_not_parent", mounts("/root/ab"), []string{"/root/a"}, ""},
		{"sibling_prefix_between_vault_targets", mounts("/root/.config", "/root/.configs"), nil, ""},
		{"empty_workspace_target_ignored", mounts("/root/.ssh"), []string{""}, ""},
		{"equal_workspace", mounts("/workspace"), []string{"/workspace"},
			`Vault mount target "/workspace" overlaps protected workspace target "/workspace"`},
		{"under_workspace", mounts("/workspace/k/.ssh"), []string{"/workspace/k"},
			`Vault mount target "/workspace/k/.ssh" overlaps protected workspace target "/workspace/k"`},
		{"contains_workspace", mounts("/root"), []string{"/root/work"},
			`Vault mount target "/root" overlaps protected workspace target "/root/work"`},
		{"trailing_slash_ignored", mounts("/workspace/"), []string{"/workspace//"},
			`Vault mount target "/workspace" overlaps protected workspace target "/workspace"`},
		{"dotdot_normalized", mounts("/root/../workspace/x"), []string{"/workspace"},
			`Vault mount target "/workspace/x" overlaps protected workspace target "/workspace"`},
		{"root_workspace", mounts("/root/.ssh"), []string{"/"},
			`Vault mount target "/root/.ssh" overlaps protected workspace target "/"`},
		{"vault_under_vault", mounts("/root/.config", "/root/.config/gws/credentials.json"), nil,
			`Vault mount target "/root/.config/gws/credentials.json" overlaps vault target "/root/.config"`},
		{"vault_equal_vault", mounts("/root/a", "/root/a/"), nil,
			`Vault mount target "/root/a" overlaps vault target "/root/a"`},
		{"relative_target", mounts("root/.ssh"), nil,
			`Vault mount target "root/.ssh" is not an absolute path`},
		{"empty_target", mounts(""), nil,
			`Vault mount target "" is not an absolute path`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTargets(tc.files, tc.workspace)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckTargets: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckTargets = nil, want %q", tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("CheckTargets got %q, want %q", err, tc.wantErr)
			}
			if !errdefs.IsInvalid(err) {
				t.Error("CheckTargets error is not ErrInvalid")
			}
		})
	}
}

func TestPlan_Printing(t *testing.T) {
	const secret = "hutch-test-secret-8c1f"
	p := Plan{
		Env: map[string]string{"B": secret, "A": secret},
		Files: []FileMount{
			{Name: ".ssh", HostPath: "/s/vaults/k/.ssh", RuntimePath: "/root/.ssh"},
			{Name: "gws.json", HostPath: "/s/vaults/k/gws.json", RuntimePath: FileTarget("gws.json")},
		},
	}
	want := "env [A B], files [.ssh -> /root/.ssh (ro), gws.json -> /root/.config/gws/credentials.json (ro)]"
	if diff := cmp.Diff(want, p.String()); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("env [], files []", Plan{}.String()); diff != "" {
		t.Errorf("empty String (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"A", "B"}, p.EnvNames()); diff != "" {
		t.Errorf("EnvNames (-want +got):\n%s", diff)
	}

	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("inject", "plan", p)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("inject", "plan", p, "ptr", &p)
	printed := map[string]string{
		"v":    fmt.Sprintf("%v", p),
		"+v":   fmt.Sprintf("%+v", p),
		"#v":   fmt.Sprintf("%#v", p),
		"s":    fmt.Sprintf("%s", p), //nolint:staticcheck // S1025: the %s verb itself is under test
		"ptr":  fmt.Sprintf("%v", &p),
		"slog": logs.String(),
	}
	for verb, out := range printed {
		if bytes.Contains([]byte(out), []byte(secret)) {
			t.Errorf("%s output carries the secret: %s", verb, out)
		}
	}
	if !bytes.Contains(logs.Bytes(), []byte(`"env":["A","B"]`)) {
		t.Errorf("JSON log does not list env names: %s", logs.String())
	}
}
