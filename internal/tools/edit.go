package tools

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Limits of the edit tool.
const (
	// MaxEditBytes is the largest file edit works on (it holds it whole).
	MaxEditBytes = 16 << 20
	// diffContext is how many unchanged lines the diff shows around a change.
	diffContext = 3
	// maxDiffBytes bounds the diff in a result (a change inside a huge
	// minified line would otherwise repeat the line twice).
	maxDiffBytes = 16 << 10
)

// EditInput is the edit tool's input.
type EditInput struct {
	Path    string `json:"path" jsonschema:"The file to edit, relative to the office or absolute"`
	OldText string `json:"oldText" jsonschema:"The exact text to replace, including whitespace and line breaks; it must occur exactly once in the file"`
	NewText string `json:"newText" jsonschema:"The text to put in its place"`
}

// EditOutput is the edit tool's result.
type EditOutput struct {
	Text string `json:"text" jsonschema:"What was edited, with a unified diff of the change"`
	// Diff is the unified diff alone.
	Diff string `json:"diff" jsonschema:"Unified diff of the change"`
	// Line is the first changed line of the new file, 1-based.
	Line int `json:"line" jsonschema:"The first changed line, counting from 1"`
}

// Edit replaces the one exact occurrence of in.OldText in a file with
// in.NewText and writes the file back atomically (keeping its mode).
//
// Matching is byte-exact: no whitespace or line-ending normalisation.
// No occurrence, several, an empty OldText or OldText equal to NewText are
// errors of class errdefs.ErrInvalid whose texts say what to do. The
// result is `Edited <path>` followed by a unified diff of the changed
// lines with diffContext lines of context.
//
// Edit reads then writes: a concurrent writer of the same file between
// the two loses its change. Callers serialise file-changing tools of one
// conversation (as the reference does for write, edit and bash).
func Edit(ctx context.Context, sb Sandbox, in EditInput) (EditOutput, error) {
	p := showPath(in.Path)
	switch {
	case in.OldText == "":
		return EditOutput{}, errdefs.New(errdefs.ErrInvalid, "oldText is empty: give the exact text to replace")
	case in.OldText == in.NewText:
		return EditOutput{}, errdefs.New(errdefs.ErrInvalid, "No changes: oldText and newText are the same.")
	}
	abs, err := Resolve(sb, in.Path)
	if err != nil {
		return EditOutput{}, err
	}
	fi, err := sb.Stat(ctx, abs)
	if err != nil {
		return EditOutput{}, err
	}
	switch {
	case fi.IsDir:
		return EditOutput{}, errdefs.New(errdefs.ErrInvalid, "Path "+p+" is a directory")
	case fi.Size > MaxEditBytes:
		return EditOutput{}, errdefs.New(errdefs.ErrNotSupported, tooLargeToEdit(p, fi.Size))
	}
	buf := &capBuffer{limit: MaxEditBytes}
	if err := sb.ReadFile(ctx, abs, buf); err != nil && !buf.over {
		return EditOutput{}, err
	}
	if buf.over {
		return EditOutput{}, errdefs.New(errdefs.ErrNotSupported, tooLargeToEdit(p, int64(buf.Len())))
	}
	old := buf.String()

	switch n := strings.Count(old, in.OldText); n {
	case 0:
		return EditOutput{}, errdefs.New(errdefs.ErrInvalid, "Could not find the exact text in "+p+". The old text must match exactly, including whitespace and line breaks.")
	case 1:
	default:
		return EditOutput{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Found %d occurrences of the text in %s. Add more surrounding context to make it unique.", n, p))
	}
	updated := strings.Replace(old, in.OldText, in.NewText, 1)
	if err := sb.WriteFile(ctx, abs, strings.NewReader(updated), 0); err != nil {
		return EditOutput{}, err
	}
	diff, line := unifiedDiff(p, old, updated)
	return EditOutput{Text: "Edited " + p + "\n" + diff, Diff: diff, Line: line}, nil
}

func tooLargeToEdit(p string, size int64) string {
	return fmt.Sprintf("File %s is %s; edit works on files of at most %s (use write to replace it)", p, sandbox.ByteCount(size), sandbox.ByteCount(MaxEditBytes))
}

// capBuffer keeps at most limit bytes; past it, Write fails and over is set.
type capBuffer struct {
	bytes.Buffer
	limit int
	over  bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		b.over = true
		return 0, errStop
	}
	return b.Buffer.Write(p)
}

// splitLines splits s into lines ended by "\n"; a final line without one
// counts, and no empty line follows a final "\n".
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
}

// unifiedDiff renders the change from a to b, which differ in one
// contiguous region, as one unified-diff hunk with diffContext lines of
// context, and returns it with the first changed line of b (1-based).
func unifiedDiff(name, a, b string) (string, int) {
	al, bl := splitLines(a), splitLines(b)
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	from := max(pre-diffContext, 0)
	aEnd := min(len(al)-suf+diffContext, len(al))
	bEnd := min(len(bl)-suf+diffContext, len(bl))

	var d strings.Builder
	fmt.Fprintf(&d, "--- %s\n+++ %s\n@@ -%s +%s @@\n", name, name, hunkRange(from, aEnd), hunkRange(from, bEnd))
	line := func(mark byte, s string) {
		d.WriteByte(mark)
		d.WriteString(strings.TrimSuffix(s, "\n"))
		d.WriteByte('\n')
	}
	for _, s := range al[from:pre] {
		line(' ', s)
	}
	for _, s := range al[pre : len(al)-suf] {
		line('-', s)
	}
	for _, s := range bl[pre : len(bl)-suf] {
		line('+', s)
	}
	for _, s := range al[len(al)-suf : aEnd] {
		line(' ', s)
	}
	out := strings.TrimSuffix(d.String(), "\n")
	if len(out) > maxDiffBytes {
		cut := strings.LastIndexByte(out[:maxDiffBytes], '\n')
		out = out[:max(cut, 0)] + "\n[diff truncated at " + sandbox.ByteCount(maxDiffBytes) + "]"
	}
	return out, pre + 1
}

// hunkRange renders lines [from, to) (0-based) as a unified-diff range:
// 1-based start, and the count when it is not 1 (an empty range names
// the line before it).
func hunkRange(from, to int) string {
	switch n := to - from; n {
	case 0:
		return fmt.Sprintf("%d,0", from)
	case 1:
		return fmt.Sprintf("%d", from+1)
	default:
		return fmt.Sprintf("%d,%d", from+1, n)
	}
}
