package api_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTools_HostMode(t *testing.T) {
	ts := newServer(t, "")
	if code, body := post(t, ts, "/v1/door", `{`+conv+`,"policy":"shared"}`); code != 200 {
		t.Fatalf("door: %d %s", code, body)
	}
	steps := []struct {
		name, tool, input string
		code              int
		want              string
	}{
		{"write", "write", `{"path":"notes/a.txt","content":"one\ntwo\nthree\n"}`, 200, `Wrote 14 bytes to notes/a.txt`},
		{"read", "read", `{"path":"notes/a.txt"}`, 200, `one\ntwo\nthree`},
		{"edit", "edit", `{"path":"notes/a.txt","oldText":"two","newText":"TWO"}`, 200, `Edited notes/a.txt`},
		{"edit_nomatch", "edit", `{"path":"notes/a.txt","oldText":"nope","newText":"x"}`, 400, `Could not find the exact text in notes/a.txt`},
		{"bash", "bash", `{"command":"cat notes/a.txt"}`, 200, `one\nTWO\nthree`},
		{"bash_exit", "bash", `{"command":"echo hi; exit 3"}`, 200, `"isError":true,"text":"hi\n\nCommand exited with code 3"`},
		{"traversal", "read", `{"path":"../../etc/passwd"}`, 412, `is outside the sandbox's workspace`},
		{"absolute_outside", "read", `{"path":"/etc/passwd"}`, 412, `is outside the sandbox's workspace`},
		{"unknown_field", "read", `{"path":"x","evil":1}`, 400, `Malformed tool input`},
		{"unknown_tool", "rm", `{}`, 404, `No such tool: rm`},
	}
	defer func() {
		code, body := post(t, ts, "/v1/files/list", `{`+conv+`,"path":"notes"}`)
		if code != 200 || !strings.Contains(body, `"name":"a.txt"`) {
			t.Errorf("files/list: %d %s", code, body)
		}
		code, body = post(t, ts, "/v1/files/list", `{`+conv+`,"path":"/etc"}`)
		if code != 412 {
			t.Errorf("files/list outside: %d %s", code, body)
		}
	}()
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			code, body := post(t, ts, "/v1/tools/"+st.tool, `{`+conv+`,"input":`+st.input+`}`)
			if code != st.code || !strings.Contains(body, st.want) {
				t.Errorf("%s: %d %s; want %d containing %s", st.tool, code, body, st.code, st.want)
			}
		})
	}
}

func TestTools_SymlinkOutOfOfficeRefused(t *testing.T) {
	ts := newServer(t, "")
	code, body := post(t, ts, "/v1/door", `{`+conv+`,"policy":"shared"}`)
	if code != 200 {
		t.Fatalf("door: %d %s", code, body)
	}
	// Learn the office's host path from the bash tool, then plant a link.
	code, body = post(t, ts, "/v1/tools/bash", `{`+conv+`,"input":{"command":"pwd"}}`)
	if code != 200 {
		t.Fatalf("bash: %d %s", code, body)
	}
	office := strings.TrimSuffix(strings.Split(strings.Split(body, `"text":"`)[1], `"`)[0], `\n`)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("top-secret-content"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(office, "link")); err != nil {
		t.Fatal(err)
	}
	code, body = post(t, ts, "/v1/tools/read", `{`+conv+`,"input":{"path":"link"}}`)
	if code != 412 || strings.Contains(body, "top-secret") {
		t.Errorf("read through a link out of the office: %d %s", code, body)
	}
	code, body = post(t, ts, "/v1/tools/write", `{`+conv+`,"input":{"path":"link","content":"x"}}`)
	if code != 412 {
		t.Errorf("write through a link out of the office: %d %s", code, body)
	}
	if data, _ := os.ReadFile(secret); string(data) != "top-secret-content" {
		t.Errorf("the file outside changed: %q", data)
	}
}
