package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestDevcontainerStandIns builds every stand-in of the devcontainer
// corpus (slow the first time on a machine, as TestDebianClientsImage is)
// and checks that each has the user, executables, PATH and
// devcontainer.metadata label its row promises.
func TestDevcontainerStandIns(t *testing.T) {
	t.Parallel()
	cli := Docker(t)
	label := "org.hutchsandbox.test=" + Name(t)
	CleanupContainers(t, cli, label)
	refs := DevcontainerStandIns(t, cli, debianBase(t))
	if len(refs) != len(devcontainerStandIns) {
		t.Fatalf("DevcontainerStandIns returned %d references, want %d", len(refs), len(devcontainerStandIns))
	}
	seen := map[string]bool{}
	for i, s := range devcontainerStandIns {
		if refs[i] != s.Ref {
			t.Errorf("reference %d = %q, want %q", i, refs[i], s.Ref)
		}
		if seen[s.Ref] {
			t.Errorf("%s has two rows", s.Ref)
		}
		seen[s.Ref] = true
	}
	for _, s := range devcontainerStandIns {
		t.Run(s.Ref, func(t *testing.T) {
			res, err := cli.ImageInspect(context.Background(), s.Ref)
			if err != nil {
				t.Fatal(err)
			}
			labels := res.Config.Labels
			if _, ok := labels[standInLabel]; !ok {
				t.Skipf("%s is a real image here, not a stand-in", s.Ref)
			}
			if labels[standInLabel] != standInVersion {
				t.Errorf("%s = %q, want %q", standInLabel, labels[standInLabel], standInVersion)
			}
			md, ok := labels["devcontainer.metadata"]
			switch {
			case s.Metadata == nil && ok:
				t.Errorf("devcontainer.metadata = %s, want none", md)
			case s.Metadata != nil && !ok:
				t.Errorf("no devcontainer.metadata label")
			case s.Metadata != nil:
				var got, want []map[string]any
				wantJSON, _ := json.Marshal(s.Metadata)
				if err := json.Unmarshal([]byte(md), &got); err != nil {
					t.Fatalf("devcontainer.metadata %q: %v", md, err)
				}
				_ = json.Unmarshal(wantJSON, &want)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("devcontainer.metadata = %s, want %s", md, wantJSON)
				}
				// ${PATH} in a feature's containerEnv reaches the label
				// as written, not expanded by the build.
				if strings.Contains(string(wantJSON), "${PATH}") && !strings.Contains(md, "${PATH}") {
					t.Errorf("devcontainer.metadata lost ${PATH}: %s", md)
				}
			}
			var path string
			for _, e := range res.Config.Env {
				if v, ok := strings.CutPrefix(e, "PATH="); ok {
					path = v
				}
			}
			for _, p := range s.Path {
				if !slices.Contains(strings.Split(path, ":"), p) {
					t.Errorf("PATH %q lacks %s", path, p)
				}
			}
			for k, v := range s.Env {
				if !slices.Contains(res.Config.Env, k+"="+v) {
					t.Errorf("Env %q lacks %s=%s", res.Config.Env, k, v)
				}
			}

			var script strings.Builder
			script.WriteString("set -e\n")
			if s.User != "" {
				fmt.Fprintf(&script, "echo uid=$(id -u %[1]s) home=$(getent passwd %[1]s | cut -d: -f6)\n", s.User)
				fmt.Fprintf(&script, "su %s -c 'sudo -n true' && echo sudo\n", s.User)
			}
			for _, p := range s.Stubs {
				fmt.Fprintf(&script, "%s --version\n", p)
			}
			if s.NVM {
				script.WriteString(". /usr/local/share/nvm/nvm.sh && nvm install lts\n")
			}
			if s.SDKMAN {
				script.WriteString(". /usr/local/sdkman/bin/sdkman-init.sh && sdk install maven\n")
			}
			for _, p := range s.Packages {
				fmt.Fprintf(&script, "dpkg-query -W %s >/dev/null\n", p)
			}
			out, errOut, code := RunContainer(t, cli, s.Ref, label, "sh", "-c", script.String())
			if code != 0 {
				t.Fatalf("checks in %s: exit %d, stdout %q, stderr %q", s.Ref, code, out, errOut)
			}
			if s.User != "" {
				if want := fmt.Sprintf("uid=1000 home=/home/%s\nsudo\n", s.User); out != want {
					t.Errorf("user %s: stdout %q, want %q", s.User, out, want)
				}
			}
			for _, p := range s.Stubs {
				name := p[strings.LastIndex(p, "/")+1:]
				if !strings.Contains(errOut, name+" (hutch stand-in) --version") {
					t.Errorf("stub %s: stderr %q", p, errOut)
				}
			}
			if s.NVM && !strings.Contains(errOut, "nvm (hutch stand-in) install lts") {
				t.Errorf("nvm: stderr %q", errOut)
			}
			if s.SDKMAN && !strings.Contains(errOut, "sdk (hutch stand-in) install maven") {
				t.Errorf("sdk: stderr %q", errOut)
			}
		})
	}
}

// TestStandInDockerfile pins how a row becomes a Dockerfile: the user,
// stubs on one RUN, PATH, ENV and the labels quoted so that the build
// neither expands ${PATH} nor breaks on quotes.
func TestStandInDockerfile(t *testing.T) {
	s := standIn{
		Ref:      "example.test/img:1",
		User:     "vscode",
		Path:     []string{"/opt/x/bin"},
		Env:      map[string]string{"B": "2", "A": `say "hi" $HOME`},
		Stubs:    []string{"/opt/x/bin/x"},
		Metadata: []map[string]any{{"remoteUser": "vscode", "containerEnv": map[string]any{"PATH": "/p:${PATH}"}}},
	}
	got, err := s.dockerfile()
	if err != nil {
		t.Fatal(err)
	}
	want := `FROM ` + DevcontainerBaseRef + `
RUN useradd --create-home --uid 1000 --user-group --groups sudo --shell /bin/bash vscode \
 && mkdir -p '/opt/x/bin' \
 && printf '%s\n' '#!/bin/sh' '# hutch test stand-in for x: reports its arguments and succeeds.' 'echo "x (hutch stand-in) $*" >&2' > '/opt/x/bin/x' \
 && chmod 0755 '/opt/x/bin/x'
ENV PATH="/opt/x/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENV A="say \"hi\" \$HOME"
ENV B="2"
LABEL ` + standInLabel + `="` + standInVersion + `"
LABEL devcontainer.metadata="[{\"containerEnv\":{\"PATH\":\"/p:\${PATH}\"},\"remoteUser\":\"vscode\"}]"
CMD ["bash"]
`
	if got != want {
		t.Errorf("dockerfile:\n%s\nwant:\n%s", got, want)
	}
}
