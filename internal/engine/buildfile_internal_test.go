package engine

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestScanDockerfile: what a Dockerfile makes the engine fetch: images
// by FROM (global ARGs expanded, stages and scratch left out), COPY
// --from and RUN --mount from=, URLs by ADD; and the frontend of a
// "# syntax=" directive, read only among the first lines.
func TestScanDockerfile(t *testing.T) {
	df := "\ufeff# syntax=docker/dockerfile:1.7\n" +
		"# escape=\\\n" +
		"ARG VARIANT=bookworm\n" +
		"ARG REG\n" +
		"FROM --platform=$BUILDPLATFORM mcr.microsoft.com/devcontainers/base:${VARIANT} AS base\n" +
		"# a comment\n" +
		"RUN --mount=type=cache,target=/var/cache/apt \\\n" +
		"    # a comment inside\n" +
		"    apt-get update\n" +
		"FROM base AS dev\n" +
		"COPY --from=base /etc/os-release /x\n" +
		"COPY --from=golang:1.23 /usr/local/go /usr/local/go\n" +
		"COPY --from=0 /a /b\n" +
		"RUN --mount=type=bind,from=tools:2,target=/t true\n" +
		"ADD https://example.com/x.tgz /opt/\n" +
		"ADD [\"git@github.com:me/repo.git\", \"/src\"]\n" +
		"ADD local.tgz /opt/\n" +
		"FROM ${REG:-docker.io}/library/busybox\n" +
		"FROM scratch\n"
	got := scanDockerfile([]byte(df), map[string]string{"VARIANT": "trixie"})
	want := dockerfileInfo{
		Frontend: "docker/dockerfile:1.7", FrontendLine: 0,
		Fetches: []fetch{
			{Line: 5, Instruction: "FROM", Ref: "mcr.microsoft.com/devcontainers/base:trixie"},
			{Line: 12, Instruction: "COPY", Ref: "golang:1.23"},
			{Line: 14, Instruction: "RUN", Ref: "tools:2"},
			{Line: 15, Instruction: "ADD", Ref: "https://example.com/x.tgz", URL: true},
			{Line: 16, Instruction: "ADD", Ref: "git@github.com:me/repo.git", URL: true},
			{Line: 18, Instruction: "FROM", Ref: "docker.io/library/busybox"},
		},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(dockerfileInfo{}, fetch{})); diff != "" {
		t.Errorf("scanDockerfile (-want +got):\n%s", diff)
	}

	// A directive after the first instruction or comment is a comment.
	for _, late := range []string{"FROM x\n# syntax=y\n", "# hello\n# syntax=y\nFROM x\n", "\n# syntax=y\nFROM x\n"} {
		if f := scanDockerfile([]byte(late), nil).Frontend; f != "" {
			t.Errorf("%q: frontend %q, want none", late, f)
		}
	}
	if got := string(dropLine([]byte("# syntax=a\n# escape=`\nFROM x\n"), 0)); got != "# escape=`\nFROM x\n" {
		t.Errorf("dropLine = %q", got)
	}
}

func TestExpandArgs(t *testing.T) {
	vars := map[string]string{"A": "a", "E": ""}
	for in, want := range map[string]string{
		"$A/${A}":       "a/a",
		"${B:-b}":       "b",
		"${E:-e}":       "e",
		"${E-e}":        "",
		"${A:+plus}":    "plus",
		"${B:+plus}":    "",
		"x${MISSING}y":  "xy",
		"no-vars:1.0.0": "no-vars:1.0.0",
	} {
		if got := expandArgs(in, vars); got != want {
			t.Errorf("expandArgs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAPIAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"1.41": true, "1.39": true, "1.38": false, "2.0": true, "": false, "x.y": false} {
		if got := apiAtLeast(v, 1, 39); got != want {
			t.Errorf("apiAtLeast(%q, 1.39) = %v", v, got)
		}
	}
}

// trace is one BuildKit trace message as the engine streams it.
func trace(t *testing.T, status []byte) string {
	t.Helper()
	aux, err := json.Marshal(base64.StdEncoding.EncodeToString(status))
	if err != nil {
		t.Fatal(err)
	}
	return `{"id":"moby.buildkit.trace","aux":` + string(aux) + "}\n"
}

func vertexMsg(digest, name string, started, completed bool, errText string) []byte {
	var v []byte
	v = protowire.AppendTag(v, 1, protowire.BytesType)
	v = protowire.AppendString(v, digest)
	v = protowire.AppendTag(v, 3, protowire.BytesType)
	v = protowire.AppendString(v, name)
	ts := protowire.AppendTag(nil, 1, protowire.VarintType)
	ts = protowire.AppendVarint(ts, 1700000000)
	if started {
		v = protowire.AppendTag(v, 5, protowire.BytesType)
		v = protowire.AppendBytes(v, ts)
	}
	if completed {
		v = protowire.AppendTag(v, 6, protowire.BytesType)
		v = protowire.AppendBytes(v, ts)
	}
	if errText != "" {
		v = protowire.AppendTag(v, 7, protowire.BytesType)
		v = protowire.AppendString(v, errText)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), v)
}

func logMsg(digest, data string) []byte {
	var l []byte
	l = protowire.AppendTag(l, 1, protowire.BytesType)
	l = protowire.AppendString(l, digest)
	l = protowire.AppendTag(l, 3, protowire.VarintType)
	l = protowire.AppendVarint(l, 1)
	l = protowire.AppendTag(l, 4, protowire.BytesType)
	l = protowire.AppendString(l, data)
	return protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), l)
}

// TestStreamBuild_BuildKit: BuildKit's trace becomes numbered lines with
// each step's output, and a failure names the step that failed. The
// first message is one Docker 20.10 sent.
func TestStreamBuild_BuildKit(t *testing.T) {
	real := `{"id":"moby.buildkit.trace","aux":"Cm8KR3NoYTI1Njo5ODM0YzhmOWJlMzY5Y2Q0ZTYwMzUxMjU4NTA5YzUwMThhN2U3ZDg3MzJjNmNiZmVkYjVkNDQwODY4MWQ1ZjhlGiRbaW50ZXJuYWxdIGxvYWQgcmVtb3RlIGJ1aWxkIGNvbnRleHQ="}` + "\n"
	stream := real +
		trace(t, vertexMsg("sha256:9834c8f9be369cd4e60351258509c5018a7e7d8732c6cbfedb5d4408681d5f8e", "", true, true, "")) +
		trace(t, vertexMsg("d2", "[2/2] RUN make", true, false, "")) +
		trace(t, append(logMsg("d2", "compiling\nhalf"), logMsg("d2", " a line\n")...)) +
		trace(t, vertexMsg("d2", "[2/2] RUN make", true, true, "exit code: 2")) +
		`{"errorDetail":{"message":"executor failed running [/bin/sh -c make]: exit code: 2"},"error":"executor failed running [/bin/sh -c make]: exit code: 2"}` + "\n"
	var out bytes.Buffer
	err := streamBuild(strings.NewReader(stream), &out)
	if err == nil || err.Error() != "image build failed at [2/2] RUN make: executor failed running [/bin/sh -c make]: exit code: 2" {
		t.Errorf("err = %v", err)
	}
	want := "#1 [internal] load remote build context\n#1 DONE\n#2 [2/2] RUN make\n#2 compiling\n#2 half a line\n#2 ERROR: exit code: 2\n"
	if out.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestStepOf_Podman: Podman's step lines, in a multi-stage build too.
func TestStepOf_Podman(t *testing.T) {
	for in, want := range map[string]string{
		"[2/2] STEP 2/3: RUN make\n": "STEP 2/3: RUN make",
		"STEP 1/2: FROM x\n":         "STEP 1/2: FROM x",
		"Step 3/9 : RUN true\n":      "Step 3/9 : RUN true",
		"compiling\n":                "",
	} {
		if got := stepOf(in); got != want {
			t.Errorf("stepOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzScanDockerfile: no Dockerfile makes the scan panic, and every
// fetch it reports is on a line the file has.
func FuzzScanDockerfile(f *testing.F) {
	f.Add("# syntax=docker/dockerfile:1\nARG V=1\nFROM a:${V} AS b\nCOPY --from=c:2 / /\nRUN --mount=from=d,target=/d true\nADD https://x/y /z\n", "V", "2")
	f.Add("FROM ${A:-x}${B:+y}$\nADD [\"unterminated\n\\\n", "A", "")
	f.Add("# escape=`\nFROM x `\n  AS y\n", "", "")
	f.Fuzz(func(t *testing.T, df, name, value string) {
		info := scanDockerfile([]byte(df), map[string]string{name: value})
		lines := strings.Count(df, "\n") + 1
		for _, fe := range info.Fetches {
			if fe.Line < 1 || fe.Line > lines {
				t.Fatalf("fetch %+v on line %d of %d", fe, fe.Line, lines)
			}
		}
		if info.Frontend != "" && info.FrontendLine >= lines {
			t.Fatalf("frontend on line %d of %d", info.FrontendLine, lines)
		}
	})
}
