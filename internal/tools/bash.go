package tools

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Limits of the bash tool.
const (
	// DefaultBashTimeout applies when the input names no timeout.
	DefaultBashTimeout = 120 * time.Second
	// MaxBashTimeout is the longest timeout the bash tool accepts.
	MaxBashTimeout = 600 * time.Second
	// CaptureLimit is how many bytes of each stream bash keeps in memory
	// (and so in the saved log); the rest is counted and dropped, and the
	// result says so.
	CaptureLimit = 16 << 20
	// OutputDir is where bash saves a long output, relative to the office.
	OutputDir = ".hutch/output"
	// saveTimeout bounds saving a long output, which also happens after
	// the caller gave up (an aborted command's output is still saved).
	saveTimeout = 30 * time.Second
)

// Limits of what one tool result shows, shared by bash (tail) and read (head).
const (
	// MaxLines is the most lines a result shows.
	MaxLines = 2000
	// MaxBytes is the most bytes of text a result shows, notices aside.
	MaxBytes = 50 << 10
)

// BashInput is the bash tool's input.
type BashInput struct {
	Command string `json:"command" jsonschema:"The shell command to run with sh -c in the office directory"`
	Timeout int    `json:"timeout,omitempty" jsonschema:"Seconds before the command and all its processes are killed (default 120, at most 600)"`
}

// BashOutput is the bash tool's result.
type BashOutput struct {
	// Text is what the agent sees: the output (or its tail) and notices.
	Text string `json:"text" jsonschema:"Standard output then standard error, possibly truncated to its tail"`
	// ExitCode is the command's exit status; -1 when it was killed.
	ExitCode int `json:"exitCode" jsonschema:"Exit status of the command, -1 when it was killed"`
	// FullOutput is the office-relative path of the saved whole output,
	// when it was too long to show.
	FullOutput string `json:"fullOutput,omitempty" jsonschema:"Office-relative path of the file holding the whole output, when it was truncated"`
}

// Bash runs in.Command with `sh -c` in the office and returns stdout
// followed by stderr.
//
// Each stream is captured up to CaptureLimit bytes. When the combined
// output exceeds MaxLines lines or MaxBytes bytes, all of it (stdout, then
// stderr, then a note if a capture cap was hit) is saved in the office at
// .hutch/output/<16 hex>.log, and Text is only its tail (cut on a line
// boundary, or, when the last line alone is too long, on a UTF-8
// boundary inside it) followed by a blank line and
// `[Showing lines X-Y of N. Full output: .hutch/output/<id>.log]`.
// Trailing newlines are dropped; an empty output is `(no output)`.
//
// A command that exits non-zero returns the output and a *ToolError whose
// Text ends `\n\nCommand exited with code N`; one that timed out, was
// aborted, ran out of memory or was killed by a signal returns a
// *ToolError ending with the exec result's Message. In both cases the
// BashOutput is filled too. Any other error means the command did not run.
func Bash(ctx context.Context, sb Sandbox, in BashInput) (BashOutput, error) {
	if strings.TrimSpace(in.Command) == "" {
		return BashOutput{}, errdefs.New(errdefs.ErrInvalid, "Command is empty")
	}
	timeout := DefaultBashTimeout
	switch {
	case in.Timeout < 0:
		return BashOutput{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Timeout %d is invalid: give a number of seconds from 1 to %d", in.Timeout, int(MaxBashTimeout/time.Second)))
	case time.Duration(in.Timeout)*time.Second > MaxBashTimeout:
		return BashOutput{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Timeout %d exceeds the maximum of %d seconds", in.Timeout, int(MaxBashTimeout/time.Second)))
	case in.Timeout > 0:
		timeout = time.Duration(in.Timeout) * time.Second
	}

	var stdout, stderr bytes.Buffer
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Argv:        []string{in.Command},
		Dir:         sb.Office(),
		Stdout:      &stdout,
		Stderr:      &stderr,
		Timeout:     timeout,
		OutputLimit: CaptureLimit,
	})
	if err != nil {
		return BashOutput{}, err
	}

	// stdout, then stderr on a line of its own.
	combined := stdout.Bytes()
	if stderr.Len() > 0 {
		if len(combined) > 0 && combined[len(combined)-1] != '\n' {
			combined = append(combined, '\n')
		}
		combined = append(combined, stderr.Bytes()...)
	}
	stderr.Reset()
	capNote := res.TruncationNotice(CaptureLimit)

	out := BashOutput{ExitCode: res.ExitCode}
	text := string(bytes.TrimRight(combined, "\n"))
	if len(text) > MaxBytes || lineCount(text) > MaxLines {
		t := tail(text, MaxLines, MaxBytes)
		out.FullOutput = path.Join(OutputDir, newID()+".log")
		where := "Full output: " + out.FullOutput
		if err := saveOutput(ctx, sb, out.FullOutput, combined, capNote); err != nil {
			out.FullOutput = ""
			where = "Full output could not be saved"
		}
		text = t.text + "\n\n" + t.notice(where)
		if capNote != "" {
			text += "\n" + capNote
		}
	} else if capNote != "" {
		// Unreachable with CaptureLimit > MaxBytes; kept so a smaller
		// cap can never drop output silently.
		text += "\n\n" + capNote
	}

	switch msg := res.Message(); {
	case msg != "":
		if text != "" {
			text += "\n\n"
		}
		out.Text = text + msg
		return out, &ToolError{Text: out.Text}
	case text == "":
		text = "(no output)"
	}
	if res.ExitCode != 0 {
		out.Text = text + "\n\nCommand exited with code " + strconv.Itoa(res.ExitCode)
		return out, &ToolError{Text: out.Text}
	}
	out.Text = text
	return out, nil
}

// saveOutput writes the whole captured output into the office. It runs
// even when ctx is done (the command was aborted), within saveTimeout.
func saveOutput(ctx context.Context, sb Sandbox, rel string, combined []byte, capNote string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	r := io.Reader(bytes.NewReader(combined))
	if capNote != "" {
		sep := "\n"
		if len(combined) == 0 || combined[len(combined)-1] == '\n' {
			sep = ""
		}
		r = io.MultiReader(r, strings.NewReader(sep+capNote+"\n"))
	}
	return sb.WriteFile(ctx, path.Join(sb.Office(), rel), r, 0)
}

// newID returns 16 random hex digits.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// lineCount is how many lines s has: lines are separated by "\n".
func lineCount(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

// tailed is the end of a text that was too long to show.
type tailed struct {
	text            string
	first, last, of int   // lines shown and the total
	byteLimited     bool  // fewer than maxLines lines because of maxBytes
	partial         bool  // text is the end of one line longer than maxBytes
	lineSize        int64 // that line's size, when partial
}

// tail keeps the last lines of s, at most maxLines of them and maxBytes
// bytes, cut on a line boundary. When the last line alone is longer than
// maxBytes, it keeps that line's last maxBytes bytes at most, starting on
// a UTF-8 boundary.
func tail(s string, maxLines, maxBytes int) tailed {
	n := lineCount(s)
	start, lines := len(s), 0
	for lines < maxLines && start > 0 {
		end := start
		if end < len(s) {
			end-- // the newline ending the line before
		}
		from := strings.LastIndexByte(s[:end], '\n') + 1
		if len(s)-from > maxBytes {
			break
		}
		start, lines = from, lines+1
	}
	if lines == 0 {
		// The last line alone is too long: keep its end.
		lineStart := strings.LastIndexByte(s, '\n') + 1
		start = len(s) - maxBytes
		for start < len(s) && !utf8.RuneStart(s[start]) {
			start++
		}
		return tailed{text: s[start:], first: n, last: n, of: n, partial: true, lineSize: int64(len(s) - lineStart)}
	}
	return tailed{text: s[start:], first: n - lines + 1, last: n, of: n, byteLimited: lines < maxLines && start > 0}
}

// notice is the line that follows a tail; where says where the rest is.
func (t tailed) notice(where string) string {
	if t.partial {
		return fmt.Sprintf("[Showing the last %s of line %d (the line is %s). %s]", sandbox.ByteCount(int64(len(t.text))), t.last, sandbox.ByteCount(t.lineSize), where)
	}
	limit := ""
	if t.byteLimited {
		limit = " (" + sandbox.ByteCount(MaxBytes) + " limit)"
	}
	return fmt.Sprintf("[Showing lines %d-%d of %d%s. %s]", t.first, t.last, t.of, limit, where)
}
