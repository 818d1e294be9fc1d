package tools_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/tools"
)

func bash(t *testing.T, sb tools.Sandbox, in tools.BashInput) (tools.BashOutput, *tools.ToolError) {
	t.Helper()
	out, err := tools.Bash(context.Background(), sb, in)
	var te *tools.ToolError
	if err != nil && !errors.As(err, &te) {
		t.Fatalf("Bash(%q): %v", in.Command, err)
	}
	if te != nil && te.Text != out.Text {
		t.Errorf("ToolError text %q differs from the output text %q", te.Text, out.Text)
	}
	return out, te
}

func TestBashSmallOutput(t *testing.T) {
	sb := newSandbox(t)
	out, te := bash(t, sb, tools.BashInput{Command: "pwd; echo to-stderr >&2; printf 'no newline'"})
	if te != nil {
		t.Fatal(te)
	}
	want := sb.office + "\nno newline\nto-stderr"
	if out.Text != want || out.ExitCode != 0 || out.FullOutput != "" {
		t.Errorf("got %+v, want text %q", out, want)
	}
}

func TestBashEmptyOutput(t *testing.T) {
	out, te := bash(t, newSandbox(t), tools.BashInput{Command: "true"})
	if te != nil || out.Text != "(no output)" {
		t.Errorf("got %q, %v", out.Text, te)
	}
}

func TestBashExitCode(t *testing.T) {
	sb := newSandbox(t)
	out, te := bash(t, sb, tools.BashInput{Command: "echo building; echo 'error: no such target' >&2; exit 3"})
	if te == nil || out.ExitCode != 3 {
		t.Fatalf("got %+v, %v; want a tool error with code 3", out, te)
	}
	golden(t, "bash_exit_code", te.Text)

	_, te = bash(t, sb, tools.BashInput{Command: "exit 1"})
	if te == nil {
		t.Fatal("no tool error")
	}
	golden(t, "bash_exit_code_no_output", te.Text)
}

func TestBashTimeout(t *testing.T) {
	out, te := bash(t, newSandbox(t), tools.BashInput{Command: "echo started; sleep 30", Timeout: 1})
	if te == nil || out.ExitCode != -1 {
		t.Fatalf("got %+v, %v; want a timeout", out, te)
	}
	golden(t, "bash_timeout", te.Text)
}

func TestBashAbort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := tools.Bash(ctx, newSandbox(t), tools.BashInput{Command: "sleep 30"})
	var te *tools.ToolError
	if !errors.As(err, &te) || te.Text != "Command aborted" {
		t.Fatalf("got %v, want the tool error %q", err, "Command aborted")
	}
}

func TestBashInvalid(t *testing.T) {
	sb := newSandbox(t)
	for _, in := range []tools.BashInput{
		{Command: " "},
		{Command: "true", Timeout: -1},
		{Command: "true", Timeout: 601},
	} {
		_, err := tools.Bash(context.Background(), sb, in)
		if !errdefs.IsInvalid(err) {
			t.Errorf("Bash(%+v) = %v, want class invalid", in, err)
		}
	}
	_, err := tools.Bash(context.Background(), sb, tools.BashInput{Command: "true", Timeout: 601})
	golden(t, "bash_timeout_too_long", err.Error())
}

func TestBashManyLines(t *testing.T) {
	sb := newSandbox(t)
	out, te := bash(t, sb, tools.BashInput{Command: "seq 1 3000; echo oops >&2"})
	if te != nil {
		t.Fatal(te)
	}
	var want strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintln(&want, i)
	}
	want.WriteString("oops\n")
	if out.FullOutput == "" || sb.get(t, out.FullOutput) != want.String() {
		t.Fatalf("the saved output (%q) is not stdout then stderr", out.FullOutput)
	}
	body, _, _ := strings.Cut(out.Text, "\n\n[")
	if got := strings.Count(body, "\n") + 1; got != tools.MaxLines {
		t.Errorf("shows %d lines, want %d", got, tools.MaxLines)
	}
	if !strings.HasPrefix(out.Text, "1002\n1003\n") {
		t.Errorf("the tail starts %q", out.Text[:20])
	}
	golden(t, "bash_many_lines_tail", lastLines(out.Text, 4))
}

func TestBashWideLines(t *testing.T) {
	// 2000 lines of 100 bytes: under the line limit, over the byte limit.
	sb := newSandbox(t)
	out, te := bash(t, sb, tools.BashInput{Command: `i=0; while [ $i -lt 2000 ]; do i=$((i+1)); printf '%099d\n' $i; done`})
	if te != nil {
		t.Fatal(te)
	}
	body, _, _ := strings.Cut(out.Text, "\n\n[")
	if len(body) > tools.MaxBytes {
		t.Errorf("shows %d bytes, more than %d", len(body), tools.MaxBytes)
	}
	golden(t, "bash_byte_limit_tail", lastLines(out.Text, 3))
}

func TestBashLongLine(t *testing.T) {
	// One 200 KiB line of two-byte runes, offset by one byte so that the
	// cut falls inside a rune.
	sb := newSandbox(t)
	out, te := bash(t, sb, tools.BashInput{Command: `printf a; head -c 102400 /dev/zero | sed 's/\x00/é/g'`})
	if te != nil {
		t.Fatal(te)
	}
	body, notice, _ := strings.Cut(out.Text, "\n\n[")
	if !utf8.ValidString(body) || len(body) > tools.MaxBytes || len(body) < tools.MaxBytes-1 {
		t.Errorf("tail of %d bytes, valid UTF-8 %v", len(body), utf8.ValidString(body))
	}
	if got := sb.get(t, out.FullOutput); len(got) != 1+204800 {
		t.Errorf("saved %d bytes", len(got))
	}
	golden(t, "bash_long_line_notice", "["+notice)
}

func TestBashCaptureLimit(t *testing.T) {
	sb := newSandbox(t)
	out, te := bash(t, sb, tools.BashInput{Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo; echo done >&2", tools.CaptureLimit+1000)})
	if te != nil {
		t.Fatal(te)
	}
	golden(t, "bash_capture_limit_tail", lastLines(out.Text, 3))
	saved := sb.get(t, out.FullOutput)
	if len(saved) > 2*tools.CaptureLimit+200 || !strings.HasSuffix(saved, "done\n[output truncated: stdout 16.0 MiB, only the first 16.0 MiB kept]\n") {
		t.Errorf("saved %d bytes ending %q", len(saved), saved[max(len(saved)-100, 0):])
	}
}
