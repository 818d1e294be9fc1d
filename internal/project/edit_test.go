package project_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

// TestSetSetting edits a settings file as `hutch project settings set`
// and `unset` do: the value is read as the file reads it (JSON when it is
// JSON, else a string), the rest of the file keeps its order and values,
// and an override left empty goes.
func TestSetSetting(t *testing.T) {
	const file = `{
  "sandbox-packages": ["jq"],
  "other-feature": {"keep": true},
  "projects": {
    "/p/": {"sandbox-cpus": 2}
  }
}
`
	for _, tt := range []struct {
		name, project, key string
		value              *string
		want               string
	}{
		{"global_list", "", project.KeyAgents, ptr("[]"), `{
	"sandbox-packages": ["jq"],
	"other-feature":    {"keep": true},
	"projects": {
		"/p/": {"sandbox-cpus": 2}
	},
	"sandbox-agents": []
}
`},
		{"override_string_that_is_not_json", "/p", project.KeyMemory, ptr("8g"), `{
	"sandbox-packages": ["jq"],
	"other-feature":    {"keep": true},
	"projects": {
		"/p/": {"sandbox-cpus": 2, "sandbox-memory": "8g"}
	}
}
`},
		{"new_project", "/q", project.KeyEnabled, ptr("yes"), `{
	"sandbox-packages": ["jq"],
	"other-feature":    {"keep": true},
	"projects": {
		"/p/": {"sandbox-cpus": 2},
		"/q":  {"sandbox-enabled": "yes"}
	}
}
`},
		{"unset_the_last_key_of_an_override", "/p", project.KeyCPUs, nil, `{
	"sandbox-packages": ["jq"],
	"other-feature":    {"keep": true},
	"projects":         {}
}
`},
		{"unset_global", "", project.KeyPackages, nil, `{
	"other-feature": {"keep": true},
	"projects": {
		"/p/": {"sandbox-cpus": 2}
	}
}
`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := project.SetSetting([]byte(file), tt.project, tt.key, tt.value)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(out)); diff != "" {
				t.Errorf("file after the edit (-want +got):\n%s", diff)
			}
			if _, notes, err := project.ParseSettings("f", out); err != nil || len(notes) != 0 {
				t.Errorf("the edited file reads with %v, notes %q", err, notes)
			}
		})
	}

	t.Run("new_file", func(t *testing.T) {
		out, err := project.SetSetting(nil, "/p", project.KeyEnabled, ptr("true"))
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := project.ParseSettings("f", out)
		if err != nil || !project.Effective(s, "/p").Enabled {
			t.Errorf("new file %s: %v", out, err)
		}
	})

	for _, tt := range []struct {
		name, key string
		value     *string
		says      string
	}{
		{"unknown_key", "sandbox-memroy", ptr("8g"), `sandbox-memroy is not a sandbox setting; the settings are sandbox-enabled, sandbox-image,`},
		{"bad_memory", project.KeyMemory, ptr("lots"), `sandbox-memory must be a size such as 512m or 8g, not "lots".`},
		{"bad_network", project.KeyNetwork, ptr("pigeon"), `sandbox-network must be open, allowlist, none or host, not "pigeon".`},
		{"bad_allow", project.KeyNetworkAllow, ptr("github.com/org"), `sandbox-network-allow must be hosts such as github.com, *.npmjs.org or registry.npmjs.org:443, separated by commas, but entry "github.com/org": has a path`},
		{"null", project.KeyMemory, ptr("null"), "null is not a value for sandbox-memory; to remove the setting, use unset."},
		{"env_value_never_echoed", project.KeyEnv, ptr(`{"TOKEN": "s3cret"}`), "sandbox-env must be a string or a list of strings, not an object."},
	} {
		t.Run("refuses_"+tt.name, func(t *testing.T) {
			_, err := project.SetSetting([]byte(file), "/p", tt.key, tt.value)
			if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), tt.says) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("SetSetting(%s, %q): %v; want ErrInvalid saying %q", tt.key, *tt.value, err, tt.says)
			}
		})
	}
	t.Run("refuses_a_file_that_is_not_an_object", func(t *testing.T) {
		if _, err := project.SetSetting([]byte(`{"a": 1,}`), "", project.KeyCPUs, ptr("2")); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("SetSetting on invalid JSON: %v, want ErrFailedPrecondition", err)
		}
	})
}

func ptr(s string) *string { return &s }
