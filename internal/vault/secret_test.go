package vault

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSecretsNeverInErrors feeds one recognisable secret through every
// error path of the package and checks that no error text carries it.
func TestSecretsNeverInErrors(t *testing.T) {
	const secret = "hutch-secret-3b9e7d41"
	s, _ := newTestStore(t)

	src := t.TempDir()
	writeTestFile(t, filepath.Join(src, "withlink", "token"), secret)
	if err := os.Symlink(filepath.Join(src, "withlink", "token"), filepath.Join(src, "withlink", "alias")); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(src, "file"), secret)

	const fileKey = "files-only"
	if err := s.PutFile(fileKey, "TOKEN", filepath.Join(src, "file")); err != nil {
		t.Fatal(err)
	}
	const envKey = "env-only"
	if err := s.SetEnv(envKey, map[string]string{"TOKEN": secret}); err != nil {
		t.Fatal(err)
	}

	// Each malformed env file is one way a secret sits in a bad line.
	malformed := map[string]string{
		"bare_secret_line":  secret + "\n",
		"bad_name":          "9BAD=" + secret + "\n",
		"cr_in_value":       "A=" + secret + "\r" + secret + "\n",
		"nul_in_value":      "A=" + secret + "\x00\n",
		"secret_after_good": "A=" + secret + "\n" + secret + "\n",
	}

	calls := map[string]func() error{
		"FormatEnv_bad_name": func() error { _, err := FormatEnv(map[string]string{"1X": secret}); return err },
		"FormatEnv_newline":  func() error { _, err := FormatEnv(map[string]string{"A": secret + "\n" + secret}); return err },
		"FormatEnv_cr":       func() error { _, err := FormatEnv(map[string]string{"A": secret + "\r"}); return err },
		"FormatEnv_nul":      func() error { _, err := FormatEnv(map[string]string{"A": "\x00" + secret}); return err },
		"SetEnv_bad_name":    func() error { return s.SetEnv(envKey, map[string]string{"B-C": secret}) },
		"SetEnv_newline":     func() error { return s.SetEnv(envKey, map[string]string{"B": secret + "\n"}) },
		"SetEnv_conflict":    func() error { return s.SetEnv(fileKey, map[string]string{"TOKEN": secret}) },
		"PutFile_conflict":   func() error { return s.PutFile(envKey, "TOKEN", filepath.Join(src, "file")) },
		"PutFile_symlink":    func() error { return s.PutFile(fileKey, "dir", filepath.Join(src, "withlink")) },
		"Remove_missing":     func() error { return s.Remove(envKey, "NOPE") },
		"SetPlaceholder_file": func() error {
			_, err := s.SetPlaceholder(fileKey, "TOKEN", []string{"api.github.com"}, time.Time{}, false)
			return err
		},
		"SetPlaceholder_bad_host": func() error {
			_, err := s.SetPlaceholder(envKey, "TOKEN", []string{secret + " x"}, time.Time{}, false)
			return err
		},
		"ProjectWithPlaceholders_symlink": func() error {
			files := []FileMount{{Name: "dir", HostPath: filepath.Join(s.Dir(fileKey), "dir"), RuntimePath: "/root/dir"}}
			_, err := s.ProjectWithPlaceholders(files, []Secret{{Name: "TOKEN", Token: TokenPrefix + "0", Value: secret}}, t.TempDir())
			return err
		},
	}
	if err := os.Symlink(filepath.Join(src, "file"), filepath.Join(s.Dir(fileKey), "dir")); err != nil {
		t.Fatal(err)
	}
	for name, content := range malformed {
		// Every vault is written before any subtest runs, so each
		// subtest can run alone with -run.
		key := "malformed-" + strings.ReplaceAll(name, "_", "-")
		writeTestFile(t, filepath.Join(s.Dir(key), "env"), content)
		name = "malformed_" + name
		calls["ParseEnv_"+name] = func() error { _, err := ParseEnv([]byte(content)); return err }
		calls["Env_"+name] = func() error { _, err := s.Env(key); return err }
		calls["List_"+name] = func() error { _, err := s.List(key); return err }
		calls["Plan_"+name] = func() error { _, err := s.Plan(key); return err }
		calls["SetEnv_"+name] = func() error { return s.SetEnv(key, map[string]string{"B": secret}) }
		calls["Remove_"+name] = func() error { return s.Remove(key, "A") }
		calls["PutFile_"+name] = func() error { return s.PutFile(key, "f", filepath.Join(src, "file")) }
	}

	for _, name := range sortedKeys(calls) {
		t.Run(name, func(t *testing.T) {
			err := calls[name]()
			if err == nil {
				t.Fatal("call succeeded; every case here must fail")
			}
			if text := err.Error(); strings.Contains(text, secret) {
				t.Errorf("error text carries the secret: %s", text)
			}
		})
	}

	t.Run("plan_printing", func(t *testing.T) {
		plan, err := s.Plan(envKey)
		if err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		slog.New(slog.NewJSONHandler(&logs, nil)).Info("inject", "plan", plan)
		for verb, out := range map[string]string{
			"String": plan.String(), "v": fmt.Sprintf("%v", plan), "+v": fmt.Sprintf("%+v", plan),
			"#v": fmt.Sprintf("%#v", plan), "slog": logs.String(),
		} {
			if strings.Contains(out, secret) {
				t.Errorf("%s carries the secret: %s", verb, out)
			}
		}
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
