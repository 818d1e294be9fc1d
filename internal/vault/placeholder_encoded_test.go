package vault

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStore_ProjectWithPlaceholders_DockerConfig: a Docker config keeps
// its credentials as base64 "user:password"; the copy holds the token in
// the same encoding, and the value in no encoding at all.
func TestStore_ProjectWithPlaceholders_DockerConfig(t *testing.T) {
	s, m := markedStore(t)
	enc := func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }
	src := filepath.Join(t.TempDir(), "config.json")
	writeTestFile(t, src, `{"auths":{"ghcr.io":{"auth":"`+enc("ada:"+ghValue)+`"},"other.io":{"auth":"`+enc("bob:unrelated-password")+`"}}}`)
	if err := s.PutFile(testKey, ".docker", filepath.Dir(src)); err != nil {
		t.Fatal(err)
	}
	plan, err := s.Plan(testKey)
	if err != nil {
		t.Fatal(err)
	}
	marks, err := s.Placeholders(testKey)
	if err != nil {
		t.Fatal(err)
	}
	_, secrets := ApplyPlaceholders(plan.Env, marks)
	got, err := s.ProjectWithPlaceholders(plan.Files, secrets, filepath.Join(t.TempDir(), "copies"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(got[0].HostPath, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"auths":{"ghcr.io":{"auth":"` + enc("ada:"+m.Token) + `"},"other.io":{"auth":"` + enc("bob:unrelated-password") + `"}}}`
	if string(data) != want {
		t.Errorf("copy:\n%s\nwant\n%s", data, want)
	}
	for _, form := range []string{ghValue, enc("ada:" + ghValue), enc(ghValue)} {
		if strings.Contains(string(data), form) {
			t.Errorf("the copy holds the value as %q", form)
		}
	}
}

// TestApplyPlaceholders_Body: a mark set to substitute in bodies gives a
// secret that says so, and keeps saying so when marked again.
func TestApplyPlaceholders_Body(t *testing.T) {
	s, _ := markedStore(t)
	if _, err := s.SetPlaceholder(testKey, "GH_TOKEN", []string{"api.github.com"}, time.Time{}, true); err != nil {
		t.Fatal(err)
	}
	marks, err := s.Placeholders(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if !marks["GH_TOKEN"].Body {
		t.Fatalf("the stored mark lost Body: %+v", marks["GH_TOKEN"])
	}
	_, secrets := ApplyPlaceholders(map[string]string{"GH_TOKEN": ghValue}, marks)
	if len(secrets) != 1 || !secrets[0].Body {
		t.Errorf("secrets = %+v", secrets)
	}
}
