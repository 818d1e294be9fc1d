package vault

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

const ghValue = "ghp_realvalue0123456789"

// markedStore is a store whose testKey vault holds GH_TOKEN=ghValue,
// marked for api.github.com.
func markedStore(t *testing.T) (*Store, Placeholder) {
	t.Helper()
	s, _ := newTestStore(t)
	if err := s.SetEnv(testKey, map[string]string{"GH_TOKEN": ghValue, "PLAIN": "plain-value"}); err != nil {
		t.Fatal(err)
	}
	m, err := s.SetPlaceholder(testKey, "GH_TOKEN", []string{"api.github.com"}, time.Time{}, false)
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

func TestStore_SetPlaceholder(t *testing.T) {
	s, m := markedStore(t)
	if !IsPlaceholderToken(m.Token) {
		t.Errorf("token %q is not hutch-placeholder-<32 hex>", m.Token)
	}
	if m.Name != "GH_TOKEN" || !m.Expires.IsZero() || m.Created.IsZero() {
		t.Errorf("mark = %+v", m)
	}
	marks, err := s.Placeholders(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Placeholder{"GH_TOKEN": m}, marks); diff != "" {
		t.Errorf("Placeholders (-want +got):\n%s", diff)
	}
	path := filepath.Join(s.Dir(testKey), ".hutch-placeholders")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("marks file mode %o, want 600", perm)
	}
	var onDisk map[string]map[string]any
	if err := json.Unmarshal([]byte(readTestFile(t, path)), &onDisk); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{"GH_TOKEN": {
		"token": m.Token, "hosts": []any{"api.github.com"}, "created": m.Created.Format(time.RFC3339),
	}}
	if diff := cmp.Diff(want, onDisk); diff != "" {
		t.Errorf("marks file (-want +got):\n%s", diff)
	}
	if strings.Contains(readTestFile(t, path), ghValue) {
		t.Error("marks file carries the value")
	}
}

func TestStore_PlaceholderTokenKept(t *testing.T) {
	s, first := markedStore(t)
	// Rotating the value keeps the mark and its token.
	if err := s.SetEnv(testKey, map[string]string{"GH_TOKEN": "ghp_rotated-value-987654"}); err != nil {
		t.Fatal(err)
	}
	// So does changing the hosts and expiry.
	exp := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	second, err := s.SetPlaceholder(testKey, "GH_TOKEN", []string{"API.github.com.", "*.githubusercontent.com", "api.github.com"}, exp, false)
	if err != nil {
		t.Fatal(err)
	}
	want := Placeholder{Name: "GH_TOKEN", Token: first.Token, Created: first.Created,
		Hosts: []string{"api.github.com", "*.githubusercontent.com"}, Expires: exp}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("re-marked (-want +got):\n%s", diff)
	}
	marks, err := s.Placeholders(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Placeholder{"GH_TOKEN": want}, marks); diff != "" {
		t.Errorf("Placeholders after rotation (-want +got):\n%s", diff)
	}
}

func TestStore_ClearPlaceholder(t *testing.T) {
	s, _ := markedStore(t)
	if err := s.ClearPlaceholder(testKey, "GH_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if marks, err := s.Placeholders(testKey); err != nil || len(marks) != 0 {
		t.Errorf("Placeholders after off = %v, %v; want none", marks, err)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir(testKey), ".hutch-placeholders")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the last mark off should remove the marks file: %v", err)
	}
	err := s.ClearPlaceholder(testKey, "GH_TOKEN")
	if !errdefs.IsNotFound(err) || err.Error() != "GH_TOKEN is not a placeholder in vault "+testKey {
		t.Errorf("second off = %v; want not found", err)
	}
	// Marking again draws a new token.
	m, err := s.SetPlaceholder(testKey, "GH_TOKEN", []string{"api.github.com"}, time.Time{}, false)
	if err != nil || !IsPlaceholderToken(m.Token) {
		t.Fatalf("re-mark = %+v, %v", m, err)
	}
}

func TestStore_RemoveVarRemovesMark(t *testing.T) {
	s, first := markedStore(t)
	if err := s.Remove(testKey, "GH_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if marks, err := s.Placeholders(testKey); err != nil || len(marks) != 0 {
		t.Errorf("Placeholders after rm = %v, %v; want none", marks, err)
	}
	// Set again, the variable starts unmarked.
	if err := s.SetEnv(testKey, map[string]string{"GH_TOKEN": ghValue}); err != nil {
		t.Fatal(err)
	}
	env, _ := s.Env(testKey)
	marks, _ := s.Placeholders(testKey)
	if got, _ := ApplyPlaceholders(env, marks); got["GH_TOKEN"] != ghValue {
		t.Errorf("GH_TOKEN after rm and set = %q, want the value", got["GH_TOKEN"])
	}
	// Removing another variable leaves a mark alone.
	if _, err := s.SetPlaceholder(testKey, "GH_TOKEN", []string{"api.github.com"}, time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(testKey, "PLAIN"); err != nil {
		t.Fatal(err)
	}
	if marks, _ := s.Placeholders(testKey); len(marks) != 1 || marks["GH_TOKEN"].Token == first.Token {
		t.Errorf("marks after removing PLAIN = %v", marks)
	}
}

func TestStore_SetPlaceholderErrors(t *testing.T) {
	s, _ := markedStore(t)
	src := filepath.Join(t.TempDir(), "npmrc")
	writeTestFile(t, src, "//registry/:_authToken="+ghValue)
	if err := s.PutFile(testKey, ".npmrc", src); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		key    string
		varNm  string
		hosts  []string
		isErr  func(error) bool
		wantTx string
	}{
		{"unknown_name", testKey, "NOPE", []string{"api.github.com"}, errdefs.IsNotFound,
			"Vault " + testKey + " has no env variable NOPE; set it first: hutch vault set <vault> NOPE"},
		{"missing_vault", "no-such-vault", "GH_TOKEN", []string{"api.github.com"}, errdefs.IsNotFound,
			"Vault no-such-vault has no env variable GH_TOKEN; set it first: hutch vault set <vault> GH_TOKEN"},
		{"file_entry", testKey, ".npmrc", []string{"api.github.com"}, errdefs.IsInvalid,
			`Vault entry ".npmrc" is a file; only env variables can be placeholders (a file that contains a placeholder's value is projected as a copy holding the placeholder)`},
		{"bad_name", testKey, "1X", []string{"api.github.com"}, errdefs.IsInvalid, `invalid variable name "1X"`},
		{"no_hosts", testKey, "GH_TOKEN", nil, errdefs.IsInvalid, "Placeholder GH_TOKEN needs at least one host"},
		{"bad_host", testKey, "GH_TOKEN", []string{"api.github.com", "bad host"}, errdefs.IsInvalid,
			"Invalid placeholder host 2 of 2: contains whitespace or a control character"},
		{"empty_host", testKey, "GH_TOKEN", []string{"api.github.com", ""}, errdefs.IsInvalid,
			"Invalid placeholder host 2 of 2: empty; give hosts such as api.github.com,*.githubusercontent.com"},
		{"pasted_value", testKey, "GH_TOKEN", []string{ghValue}, errdefs.IsInvalid,
			"Invalid placeholder host 1 of 1: give a full host name such as api.github.com or *.example.com"},
	}
	before := readTestFile(t, filepath.Join(s.Dir(testKey), ".hutch-placeholders"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.SetPlaceholder(tc.key, tc.varNm, tc.hosts, time.Time{}, false)
			if err == nil || !tc.isErr(err) || err.Error() != tc.wantTx {
				t.Errorf("SetPlaceholder = %v; want %q of the right class", err, tc.wantTx)
			}
		})
	}
	if after := readTestFile(t, filepath.Join(s.Dir(testKey), ".hutch-placeholders")); after != before {
		t.Errorf("a refused mark changed the marks file:\n%s", after)
	}
}

func TestParsePlaceholderHosts(t *testing.T) {
	got, err := ParsePlaceholderHosts("api.github.com, *.GitHubUserContent.com ,registry.example:8443,api.github.com,10.0.0.5,[::1]:8443,10.0.0.6:80")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"api.github.com", "*.githubusercontent.com", "registry.example:8443", "10.0.0.5", "[::1]:8443", "10.0.0.6:80"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParsePlaceholderHosts (-want +got):\n%s", diff)
	}
	for bad, wantErr := range map[string]string{
		"":                    "Invalid placeholder host 1 of 1: empty; give hosts such as api.github.com,*.githubusercontent.com",
		"a.example,":          "Invalid placeholder host 2 of 2: empty; give hosts such as api.github.com,*.githubusercontent.com",
		"https://x.example/a": `Invalid placeholder host 1 of 1: has a scheme (https://); write the host only, e.g. "x.example"`,
		"x.example:99999":     `Invalid placeholder host 1 of 1: port "99999" is not a number from 1 to 65535`,
		"github":              "Invalid placeholder host 1 of 1: give a full host name such as api.github.com or *.example.com",
		"*.com":               "Invalid placeholder host 1 of 1: give a full host name such as api.github.com or *.example.com",
		"off":                 "Invalid placeholder host 1 of 1: give a full host name such as api.github.com or *.example.com",
	} {
		if _, err := ParsePlaceholderHosts(bad); !errdefs.IsInvalid(err) || err.Error() != wantErr {
			t.Errorf("ParsePlaceholderHosts(%q) = %v; want %q", bad, err, wantErr)
		}
	}
}

func TestParseExpiry(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"720h":                      now.Add(720 * time.Hour),
		"2027-01-01":                time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		"2027-01-01T02:00:00+02:00": time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, err := ParseExpiry(in, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseExpiry(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, wantErr := range map[string]string{
		"soon":       `Invalid expiry "soon": give a duration (720h) or a time (2027-01-01 or 2027-01-01T12:00:00Z)`,
		"-1h":        `Expiry "-1h" is not in the future`,
		"2020-01-01": `Expiry "2020-01-01" is not in the future`,
	} {
		if _, err := ParseExpiry(in, now); !errdefs.IsInvalid(err) || err.Error() != wantErr {
			t.Errorf("ParseExpiry(%q) = %v; want %q", in, err, wantErr)
		}
	}
}

func TestApplyPlaceholders(t *testing.T) {
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	env := map[string]string{"GH_TOKEN": ghValue, "OLD": "old-secret-value", "PLAIN": "p"}
	marks := map[string]Placeholder{
		"GH_TOKEN": {Name: "GH_TOKEN", Token: TokenPrefix + strings.Repeat("a", 32), Hosts: []string{"api.github.com"}},
		// An expired mark still delivers the token, never the value.
		"OLD": {Name: "OLD", Token: TokenPrefix + strings.Repeat("b", 32), Hosts: []string{"x.example"}, Expires: past},
		// A mark without its variable delivers nothing.
		"GONE": {Name: "GONE", Token: TokenPrefix + strings.Repeat("c", 32), Hosts: []string{"x.example"}},
	}
	got, secrets := ApplyPlaceholders(env, marks)
	wantEnv := map[string]string{"GH_TOKEN": marks["GH_TOKEN"].Token, "OLD": marks["OLD"].Token, "PLAIN": "p"}
	if diff := cmp.Diff(wantEnv, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	wantSecrets := []Secret{
		{Name: "GH_TOKEN", Token: marks["GH_TOKEN"].Token, Value: ghValue, Hosts: []string{"api.github.com"}},
		{Name: "OLD", Token: marks["OLD"].Token, Value: "old-secret-value", Hosts: []string{"x.example"}, Expires: past},
	}
	if diff := cmp.Diff(wantSecrets, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	if env["GH_TOKEN"] != ghValue {
		t.Error("ApplyPlaceholders changed its input")
	}
	if !marks["OLD"].Expired(past) || marks["GH_TOKEN"].Expired(past) {
		t.Error("Expired is wrong")
	}
	// A Secret prints its name and hosts, never its value.
	var logs strings.Builder
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("secret", "s", secrets[0])
	for verb, out := range map[string]string{
		"v": fmt.Sprintf("%v", secrets[0]), "+v": fmt.Sprintf("%+v", secrets[0]), "#v": fmt.Sprintf("%#v", secrets[0]),
		"slice": fmt.Sprintf("%v", secrets), "slog": logs.String(),
	} {
		if strings.Contains(out, ghValue) {
			t.Errorf("%s carries the value: %s", verb, out)
		}
	}
	if s := secrets[0].String(); s != "GH_TOKEN -> api.github.com" {
		t.Errorf("String = %q", s)
	}
}

func TestStore_MalformedPlaceholders(t *testing.T) {
	for name, content := range map[string]string{
		"not_json":    "{",
		"bad_token":   `{"GH_TOKEN":{"token":"hutch-placeholder-XYZ","hosts":["a.example"],"created":"2026-01-01T00:00:00Z"}}`,
		"no_hosts":    `{"GH_TOKEN":{"token":"hutch-placeholder-0123456789abcdef0123456789abcdef","hosts":[],"created":"2026-01-01T00:00:00Z"}}`,
		"bad_expires": `{"GH_TOKEN":{"token":"hutch-placeholder-0123456789abcdef0123456789abcdef","hosts":["a.example"],"expires":"soon","created":"2026-01-01T00:00:00Z"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := newTestStore(t)
			if err := s.SetEnv(testKey, map[string]string{"GH_TOKEN": ghValue}); err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, filepath.Join(s.Dir(testKey), ".hutch-placeholders"), content)
			if _, err := s.Placeholders(testKey); !errdefs.IsFailedPrecondition(err) {
				t.Errorf("Placeholders = %v; want failed precondition", err)
			}
			// Removing the variable must not pretend the mark went.
			if err := s.Remove(testKey, "GH_TOKEN"); !errdefs.IsFailedPrecondition(err) {
				t.Errorf("Remove = %v; want failed precondition", err)
			}
		})
	}
}

func TestStore_MarksFileNeverProjected(t *testing.T) {
	s, _ := markedStore(t)
	// Its atomicfile temp name is the store's own too.
	writeTestFile(t, filepath.Join(s.Dir(testKey), "..hutch-placeholders.tmp-123"), "stale")
	list, err := s.List(testKey)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Name: "GH_TOKEN", Kind: EntryEnv}, {Name: "PLAIN", Kind: EntryEnv}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	plan, err := s.Plan(testKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Files) != 0 {
		t.Errorf("Plan.Files = %v; want none", plan.Files)
	}
	if has, err := s.HasFiles(testKey); err != nil || has {
		t.Errorf("HasFiles = %v, %v; want false", has, err)
	}
	src := filepath.Join(t.TempDir(), "f")
	writeTestFile(t, src, "x")
	for _, name := range []string{".hutch-placeholders", "..hutch-placeholders.tmp-1"} {
		if err := s.PutFile(testKey, name, src); !errdefs.IsInvalid(err) {
			t.Errorf("PutFile(%q) = %v; want invalid", name, err)
		}
	}
	if err := s.Remove(testKey, ".hutch-placeholders"); !errdefs.IsNotFound(err) {
		t.Errorf("Remove of the marks file = %v; want not found", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(testKey), ".hutch-placeholders")); err != nil {
		t.Errorf("marks file gone: %v", err)
	}
}

// snapshot maps every path below root to its kind, permissions and
// content or link target.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := walkEntry(root, func(rel string, info os.FileInfo, data []byte) error {
		switch m := info.Mode(); {
		case m.IsDir():
			out[rel] = fmt.Sprintf("dir %o", m.Perm())
		case m&os.ModeSymlink != 0:
			link, _ := os.Readlink(filepath.Join(root, rel))
			out[rel] = "link " + link
		default:
			out[rel] = fmt.Sprintf("file %o %s", m.Perm(), data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStore_ProjectWithPlaceholders(t *testing.T) {
	s, m := markedStore(t)
	// A short marked value is not searched for.
	if err := s.SetEnv(testKey, map[string]string{"SHORT": "abc"}); err != nil {
		t.Fatal(err)
	}
	short, err := s.SetPlaceholder(testKey, "SHORT", []string{"x.example"}, time.Time{}, false)
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	writeTestFile(t, outside, "outside "+ghValue)
	src := t.TempDir()
	writeTestFile(t, filepath.Join(src, "npmrc"), "//npm/:_authToken="+ghValue+"\nabc\n")
	writeTestFile(t, filepath.Join(src, "kube", "config"), "token: "+ghValue+"\n")
	writeTestFile(t, filepath.Join(src, "kube", "cache", "plain"), "nothing secret, abc")
	writeTestFile(t, filepath.Join(src, "ssh", "id"), "key abc")
	writeTestFile(t, filepath.Join(src, "netrc"), "password plain-value\n") // PLAIN is not marked
	for name, from := range map[string]string{".npmrc": "npmrc", ".kube": "kube", ".ssh": "ssh", ".netrc": "netrc"} {
		if err := s.PutFile(testKey, name, filepath.Join(src, from)); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink planted inside a tree is copied as a link, never read.
	if err := os.Symlink(outside, filepath.Join(s.Dir(testKey), ".kube", "escape")); err != nil {
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
	env, secrets := ApplyPlaceholders(plan.Env, marks)
	if env["SHORT"] != short.Token || env["GH_TOKEN"] != m.Token {
		t.Errorf("env = %v", env)
	}
	copies := filepath.Join(t.TempDir(), "run", "vault-placeholders")
	got, err := s.ProjectWithPlaceholders(plan.Files, secrets, copies)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]FileMount{}
	for i, f := range got {
		if f.Name != plan.Files[i].Name || f.RuntimePath != plan.Files[i].RuntimePath {
			t.Errorf("mount %d = %+v; want the name and target of %+v", i, f, plan.Files[i])
		}
		byName[f.Name] = f
	}
	// Files without a (long enough) value keep their original path.
	for _, name := range []string{".ssh", ".netrc"} {
		if want := filepath.Join(s.Dir(testKey), name); byName[name].HostPath != want {
			t.Errorf("%s mounted from %s; want the original %s", name, byName[name].HostPath, want)
		}
	}
	npmrc := byName[".npmrc"].HostPath
	if filepath.Dir(npmrc) != copies {
		t.Fatalf(".npmrc mounted from %s; want a copy in %s", npmrc, copies)
	}
	if diff := cmp.Diff(map[string]string{".": "file 600 //npm/:_authToken=" + m.Token + "\nabc\n"}, snapshot(t, npmrc)); diff != "" {
		t.Errorf(".npmrc copy (-want +got):\n%s", diff)
	}
	kube := byName[".kube"].HostPath
	wantKube := map[string]string{
		".":           "dir 700",
		"config":      "file 600 token: " + m.Token + "\n",
		"cache":       "dir 700",
		"cache/plain": "file 600 nothing secret, abc",
		"escape":      "link " + outside,
	}
	if diff := cmp.Diff(wantKube, snapshot(t, kube)); diff != "" {
		t.Errorf(".kube copy (-want +got):\n%s", diff)
	}
	if info, err := os.Stat(copies); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("copy directory: %v, %v; want 0700", info, err)
	}

	// A second run with nothing changed keeps the copies as they are.
	before, _ := os.Stat(filepath.Join(kube, "config"))
	again, err := s.ProjectWithPlaceholders(plan.Files, secrets, copies)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("second run mounts (-want +got):\n%s", diff)
	}
	if after, _ := os.Stat(filepath.Join(kube, "config")); !os.SameFile(before, after) {
		t.Error("an unchanged copy was rewritten")
	}

	// A rotated value replaces the stale copy; the token stays.
	const rotated = "ghp_rotated-value-987654"
	writeTestFile(t, filepath.Join(src, "kube", "config"), "token: "+rotated+"\n")
	if err := os.Remove(filepath.Join(s.Dir(testKey), ".kube", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(testKey, ".kube", filepath.Join(src, "kube")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetEnv(testKey, map[string]string{"GH_TOKEN": rotated}); err != nil {
		t.Fatal(err)
	}
	plan, _ = s.Plan(testKey)
	_, secrets = ApplyPlaceholders(plan.Env, marks)
	third, err := s.ProjectWithPlaceholders(plan.Files, secrets, copies)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range third {
		if f.Name == ".kube" && f.HostPath != kube {
			t.Errorf(".kube moved to %s; want %s", f.HostPath, kube)
		}
		if f.Name == ".npmrc" && f.HostPath == npmrc {
			t.Error(".npmrc still mounted from its copy after the value it held was rotated away")
		}
	}
	wantKube = map[string]string{
		".": "dir 700", "config": "file 600 token: " + m.Token + "\n",
		"cache": "dir 700", "cache/plain": "file 600 nothing secret, abc",
	}
	if diff := cmp.Diff(wantKube, snapshot(t, kube)); diff != "" {
		t.Errorf(".kube copy after rotation (-want +got):\n%s", diff)
	}
	des, _ := os.ReadDir(copies)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".hutch-") {
			t.Errorf("leftover %s in the copy directory", de.Name())
		}
	}
	// No copy ever holds a real value.
	_ = filepath.WalkDir(copies, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if c := readTestFile(t, p); strings.Contains(c, ghValue) || strings.Contains(c, rotated) {
				t.Errorf("copy %s holds a real value", p)
			}
		}
		return nil
	})
}

func TestStore_ProjectWithPlaceholdersRefusals(t *testing.T) {
	s, m := markedStore(t)
	secrets := []Secret{{Name: "GH_TOKEN", Token: m.Token, Value: ghValue, Hosts: m.Hosts}}
	copies := filepath.Join(t.TempDir(), "copies")

	// Nothing to search for: the mounts come back as they are, unchecked.
	files := []FileMount{{Name: "x", HostPath: "/etc", RuntimePath: "/root/x"}}
	if got, err := s.ProjectWithPlaceholders(files, []Secret{{Name: "S", Token: m.Token, Value: "short"}}, copies); err != nil || !cmp.Equal(got, files) {
		t.Errorf("short values only = %v, %v; want the mounts unchanged", got, err)
	}
	if _, err := s.ProjectWithPlaceholders(files, secrets, copies); !errdefs.IsInvalid(err) {
		t.Errorf("a mount outside the store = %v; want invalid", err)
	}
	if _, err := s.ProjectWithPlaceholders(nil, secrets, "relative"); !errdefs.IsInvalid(err) {
		t.Errorf("a relative copy dir = %v; want invalid", err)
	}
	if _, err := s.ProjectWithPlaceholders(nil, secrets, s.Dir(testKey)); !errdefs.IsInvalid(err) {
		t.Errorf("a copy dir in the store = %v; want invalid", err)
	}
	// A top-level symlink planted in the vault is refused, not followed.
	outside := filepath.Join(t.TempDir(), "outside")
	writeTestFile(t, outside, ghValue)
	link := filepath.Join(s.Dir(testKey), ".docker")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	files = []FileMount{{Name: ".docker", HostPath: link, RuntimePath: "/root/.docker"}}
	if _, err := s.ProjectWithPlaceholders(files, secrets, copies); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("a symlinked entry = %v; want failed precondition", err)
	}
	if _, err := os.Lstat(copies); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refusals should write nothing: %v", err)
	}
}
