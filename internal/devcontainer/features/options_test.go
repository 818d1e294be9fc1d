package features_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestSafeID(t *testing.T) {
	// The first five are the reference CLI's own test cases.
	tests := map[string]string{
		"option-name":               "OPTION_NAME",
		"option1-name-with_dashes-": "OPTION1_NAME_WITH_DASHES_",
		"myOptionName":              "MYOPTIONNAME",
		"1name":                     "_NAME",
		"12345_option-name":         "_OPTION_NAME",
		"version":                   "VERSION",
		"__double":                  "_DOUBLE",
		"_1_a":                      "_A",
		"a.b c/d":                   "A_B_C_D",
		"ünïcode":                   "_N_CODE",
		"emoji😀x":                   "EMOJI__X",
		"$(id)":                     "_ID_",
		"123":                       "_",
		"---":                       "_",
		"":                          "",
	}
	for in, want := range tests {
		if got := features.SafeID(in); got != want {
			t.Errorf("SafeID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOptionEnv(t *testing.T) {
	md, err := features.ParseMetadata("f", []byte(`{"id": "f", "options": {
		"version": {"type": "string", "default": "lts"},
		"install-tools": {"type": "boolean", "default": false},
		"flavour": {"type": "string", "enum": ["a", "b"], "default": "a"},
		"noDefault": {"type": "string"}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		given map[string]string
		want  []features.EnvVar
		notes []string
	}{
		{
			name: "defaults",
			want: []features.EnvVar{{"VERSION", "lts"}, {"INSTALL_TOOLS", "false"}, {"FLAVOUR", "a"}},
		},
		{
			name:  "given",
			given: map[string]string{"version": "20", "install-tools": "true", "noDefault": "x"},
			want:  []features.EnvVar{{"VERSION", "20"}, {"INSTALL_TOOLS", "true"}, {"FLAVOUR", "a"}, {"NODEFAULT", "x"}},
		},
		{
			name:  "undeclared_and_outside_enum",
			given: map[string]string{"flavour": "c", "zeta": "1", "alpha-x": "2"},
			want:  []features.EnvVar{{"VERSION", "lts"}, {"INSTALL_TOOLS", "false"}, {"FLAVOUR", "c"}, {"ALPHA_X", "2"}, {"ZETA", "1"}},
			notes: []string{
				`feature f: option flavour is "c", not one of a, b; it is passed as given`,
				"feature f: option alpha-x is not one the feature declares; it is passed as ALPHA_X, as the reference CLI does",
				"feature f: option zeta is not one the feature declares; it is passed as ZETA, as the reference CLI does",
			},
		},
		{
			name:  "collision",
			given: map[string]string{"VERSION": "x"},
			want:  []features.EnvVar{{"VERSION", "lts"}, {"INSTALL_TOOLS", "false"}, {"FLAVOUR", "a"}, {"VERSION", "x"}},
			notes: []string{
				"feature f: option VERSION is not one the feature declares; it is passed as VERSION, as the reference CLI does",
				`feature f: options "version" and "VERSION" are both VERSION; the value of "VERSION" is the one install.sh sees`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, notes, err := features.OptionEnv("f", md, tt.given)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.notes, notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}

	for _, given := range []map[string]string{{"version": "a\x00b"}, {"x": "\x00"}} {
		if _, _, err := features.OptionEnv("f", md, given); !errdefs.IsInvalid(err) {
			t.Errorf("OptionEnv(%q): %v, want an invalid error", given, err)
		}
	}
	if _, _, err := features.OptionEnv("f", md, map[string]string{"": "x"}); err == nil || !strings.Contains(err.Error(), `feature f: option "" gives no environment variable name`) {
		t.Errorf("OptionEnv with an empty option id: %v", err)
	}
}

// hostile are option values that must reach install.sh exactly as written
// and never run anything on the way.
var hostile = []string{
	"$(touch MARKER)",
	"`touch MARKER`",
	"'; touch MARKER; '",
	`"; touch MARKER; "`,
	"\\\"$(touch MARKER)\\",
	"line one\nRUN touch MARKER\n",
	"${HOME:+$(touch MARKER)}",
	"trailing backslash\\",
	"' \\'' '",
	"",
}

// TestEnvFile_Hostile sources the env file with a real /bin/sh, as the
// image build does, and checks every value arrives verbatim and nothing
// ran.
func TestEnvFile_Hostile(t *testing.T) {
	var vars []features.EnvVar
	for i, v := range hostile {
		vars = append(vars, features.EnvVar{Name: "OPT" + string(rune('A'+i)), Value: v})
	}
	users := features.Users{ContainerUser: "$(touch MARKER)", RemoteUser: "node'`touch MARKER`", ContainerUserHome: "/root", RemoteUserHome: "/home/$(touch MARKER)"}
	file, err := features.EnvFile(users, vars)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	// env -0 separates variables by NUL, so values with newlines survive.
	cmd := exec.Command("/bin/sh", "-c", "set -a; . ./env; set +a; env -0")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sourcing the env file: %v\n%s", err, file)
	}
	if _, err := os.Stat(filepath.Join(dir, "MARKER")); err == nil {
		t.Fatalf("sourcing the env file ran a command:\n%s", file)
	}
	got := map[string]string{}
	for kv := range bytes.SplitSeq(out, []byte{0}) {
		k, v, _ := strings.Cut(string(kv), "=")
		got[k] = v
	}
	for _, e := range vars {
		if got[e.Name] != e.Value {
			t.Errorf("%s = %q, want %q", e.Name, got[e.Name], e.Value)
		}
	}
	for k, want := range map[string]string{"_CONTAINER_USER": users.ContainerUser, "_REMOTE_USER": users.RemoteUser, "_CONTAINER_USER_HOME": "/root", "_REMOTE_USER_HOME": users.RemoteUserHome} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
}

// TestEnvFile_Homes looks homes up in the passwd database when they are
// not given, and defaults the users as the spec does.
func TestEnvFile_Homes(t *testing.T) {
	file, err := features.EnvFile(features.Users{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `. /dev/stdin; printf '%s|%s|%s|%s' "$_CONTAINER_USER" "$_REMOTE_USER" "$_CONTAINER_USER_HOME" "$_REMOTE_USER_HOME"`)
	cmd.Stdin = strings.NewReader(file)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, file)
	}
	home := ""
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(passwd), "\n") {
		if f := strings.Split(line, ":"); len(f) > 5 && f[0] == "root" {
			home = f[5]
		}
	}
	if want := "root|root|" + home + "|" + home; string(out) != want {
		t.Errorf("users and homes = %q, want %q", out, want)
	}
}

func TestEnvFile_Refuses(t *testing.T) {
	tests := []struct {
		name  string
		users features.Users
		vars  []features.EnvVar
	}{
		{"nul_value", features.Users{}, []features.EnvVar{{"A", "x\x00y"}}},
		{"nul_user", features.Users{RemoteUser: "a\x00"}, nil},
		{"bad_name", features.Users{}, []features.EnvVar{{"A-B", "x"}}},
		{"injecting_name", features.Users{}, []features.EnvVar{{"A=1; touch x; B", "x"}}},
		{"empty_name", features.Users{}, []features.EnvVar{{"", "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := features.EnvFile(tt.users, tt.vars); !errdefs.IsInvalid(err) {
				t.Errorf("EnvFile: %v, want an invalid error", err)
			}
		})
	}
}
