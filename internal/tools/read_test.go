package tools_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/tools"
)

func read(t *testing.T, sb tools.Sandbox, in tools.ReadInput) tools.ReadOutput {
	t.Helper()
	out, err := tools.Read(context.Background(), sb, in)
	if err != nil {
		t.Fatalf("Read(%+v): %v", in, err)
	}
	return out
}

// numbered returns lines "line 1" .. "line n", each ended by "\n".
func numbered(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.Bytes()
}

func TestReadSmall(t *testing.T) {
	sb := newSandbox(t)
	sb.put(t, "notes.txt", []byte("one\ntwo\nthree"))
	if out := read(t, sb, tools.ReadInput{Path: "notes.txt"}); out.Text != "one\ntwo\nthree" || out.Image != nil {
		t.Errorf("got %+v", out)
	}
	if out := read(t, sb, tools.ReadInput{Path: sb.office + "/notes.txt", Offset: 3}); out.Text != "three" {
		t.Errorf("offset 3: got %q", out.Text)
	}
	sb.put(t, "empty.txt", nil)
	golden(t, "read_empty", read(t, sb, tools.ReadInput{Path: "empty.txt"}).Text)
}

func TestReadPaging(t *testing.T) {
	sb := newSandbox(t)
	sb.put(t, "big.txt", numbered(3000))

	first := read(t, sb, tools.ReadInput{Path: "big.txt"})
	if !strings.HasPrefix(first.Text, "line 1\nline 2\n") {
		t.Errorf("first page starts %q", first.Text[:20])
	}
	golden(t, "read_page_first_tail", lastLines(first.Text, 3))

	second := read(t, sb, tools.ReadInput{Path: "big.txt", Offset: 2001})
	if !strings.HasPrefix(second.Text, "line 2001\n") || !strings.HasSuffix(second.Text, "\nline 3000") {
		t.Errorf("the last page is %q ... %q", second.Text[:20], lastLines(second.Text, 2))
	}

	golden(t, "read_page_limit", read(t, sb, tools.ReadInput{Path: "big.txt", Offset: 10, Limit: 3}).Text)

	// Lines of 1 KiB: the byte limit ends the page first.
	sb.put(t, "wide.txt", bytes.Repeat([]byte(strings.Repeat("w", 1023)+"\n"), 100))
	wide := read(t, sb, tools.ReadInput{Path: "wide.txt"})
	body, _, _ := strings.Cut(wide.Text, "\n\n[")
	if len(body) > tools.MaxBytes {
		t.Errorf("page of %d bytes", len(body))
	}
	golden(t, "read_page_byte_limit", lastLines(wide.Text, 1))
}

func TestReadOffsetPastEnd(t *testing.T) {
	sb := newSandbox(t)
	sb.put(t, "short.txt", numbered(5))
	_, err := tools.Read(context.Background(), sb, tools.ReadInput{Path: "short.txt", Offset: 6})
	if !errdefs.IsInvalid(err) {
		t.Fatalf("got %v, want class invalid", err)
	}
	golden(t, "read_offset_past_end", err.Error())
}

func TestReadImage(t *testing.T) {
	sb := newSandbox(t)
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var data bytes.Buffer
	if err := png.Encode(&data, img); err != nil {
		t.Fatal(err)
	}
	sb.put(t, "dot.png", data.Bytes())
	out := read(t, sb, tools.ReadInput{Path: "dot.png"})
	if out.Image == nil || out.Image.MIMEType != "image/png" || !bytes.Equal(out.Image.Data, data.Bytes()) {
		t.Fatalf("got %+v", out)
	}
	golden(t, "read_image", out.Text)

	// The bytes decide the type; a name alone does not make an image.
	sb.put(t, "photo.jpg", data.Bytes())
	if out := read(t, sb, tools.ReadInput{Path: "photo.jpg"}); out.Image == nil || out.Image.MIMEType != "image/png" {
		t.Errorf("a PNG named .jpg: got %+v", out)
	}
	sb.put(t, "fake.png", []byte("not an image"))
	if out := read(t, sb, tools.ReadInput{Path: "fake.png"}); out.Image != nil || out.Text != "not an image" {
		t.Errorf("text named .png: got %+v", out)
	}
	sb.put(t, "image.bin", data.Bytes())
	if out := read(t, sb, tools.ReadInput{Path: "image.bin"}); out.Image != nil || out.Binary == nil || out.Binary.MIMEType != "image/png" {
		t.Errorf("a PNG named .bin: got %+v, want it as binary bytes", out)
	}
}

func TestReadLongLine(t *testing.T) {
	// Line 2 is 120001 bytes: "x" then 60000 two-byte runes, so byte
	// slices of 50 KiB start inside a rune unless cut on a boundary.
	sb := newSandbox(t)
	long := "x" + strings.Repeat("é", 60000)
	sb.put(t, "long.txt", []byte("short\n"+long+"\nafter\n"))

	first := read(t, sb, tools.ReadInput{Path: "long.txt"})
	golden(t, "read_before_long_line", first.Text)

	var got strings.Builder
	var notices []string
	in := tools.ReadInput{Path: "long.txt", Offset: 2}
	for range 10 {
		out := read(t, sb, in)
		body, notice, ok := strings.Cut(out.Text, "\n\n[")
		if !ok {
			t.Fatalf("no notice in %q", lastLines(out.Text, 1))
		}
		if !utf8.ValidString(body) || len(body) > tools.MaxBytes {
			t.Fatalf("slice of %d bytes, valid UTF-8 %v", len(body), utf8.ValidString(body))
		}
		got.WriteString(body)
		notices = append(notices, "["+notice)
		_, rest, ok := strings.Cut(notice, "byteOffset=")
		if !ok {
			break
		}
		var next int64
		if _, err := fmt.Sscanf(rest, "%d", &next); err != nil {
			t.Fatal(err)
		}
		in.ByteOffset = next
	}
	if got.String() != long {
		t.Errorf("the slices joined are %d bytes, want the line's %d", got.Len(), len(long))
	}
	golden(t, "read_long_line_notices", strings.Join(notices, "\n"))

	_, err := tools.Read(context.Background(), sb, tools.ReadInput{Path: "long.txt", Offset: 2, ByteOffset: 120001})
	if !errdefs.IsInvalid(err) {
		t.Fatalf("got %v, want class invalid", err)
	}
	golden(t, "read_byte_offset_past_end", err.Error())
}

func TestReadBinary(t *testing.T) {
	sb := newSandbox(t)
	prog := append([]byte("\x7fELF\x02\x01\x01\x00"), make([]byte, 3000)...)
	sb.put(t, "prog", prog)
	out := read(t, sb, tools.ReadInput{Path: "prog"})
	if out.Binary == nil || !bytes.Equal(out.Binary.Data, prog) || out.Binary.Size != int64(len(prog)) || out.Image != nil {
		t.Fatalf("got %+v; want the bytes whole", out)
	}
	// No NUL, but a control byte no text has: binary all the same, and
	// the bytes come back unchanged (a JSON string would mangle them).
	noNUL := append([]byte("\x01\x02\xff\xfe"), bytes.Repeat([]byte{0xc3}, 100)...)
	sb.put(t, "data.bin", noNUL)
	if out := read(t, sb, tools.ReadInput{Path: "data.bin"}); out.Binary == nil || !bytes.Equal(out.Binary.Data, noNUL) {
		t.Errorf("a binary file without NUL: got %+v", out)
	}
	// Past the limit it is refused, with its size and type.
	sb.put(t, "big.bin", append([]byte{0}, make([]byte, tools.MaxBinaryBytes)...))
	_, err := tools.Read(context.Background(), sb, tools.ReadInput{Path: "big.bin"})
	if !errdefs.IsNotSupported(err) {
		t.Fatalf("got %v, want class not supported", err)
	}
	golden(t, "read_binary", out.Text+"\n"+err.Error())
}

// TestReadNotUTF8: text in another encoding is text, its bytes that are
// not UTF-8 shown as U+FFFD, and a notice says so.
func TestReadNotUTF8(t *testing.T) {
	sb := newSandbox(t)
	sb.put(t, "latin1.txt", []byte("caf\xe9\nna\xefve\n"))
	out := read(t, sb, tools.ReadInput{Path: "latin1.txt"})
	if out.Binary != nil || !utf8.ValidString(out.Text) {
		t.Fatalf("got %+v; want valid UTF-8 text", out)
	}
	golden(t, "read_not_utf8", out.Text)
}

func TestReadErrors(t *testing.T) {
	sb := newSandbox(t)
	sb.put(t, "dir/file", []byte("x"))
	for _, tc := range []struct {
		in    tools.ReadInput
		class error
	}{
		{tools.ReadInput{Path: "missing.txt"}, errdefs.ErrNotFound},
		{tools.ReadInput{Path: "dir"}, errdefs.ErrInvalid},
		{tools.ReadInput{Path: "dir/file", Offset: -1}, errdefs.ErrInvalid},
		{tools.ReadInput{Path: "dir/file", Limit: -1}, errdefs.ErrInvalid},
		{tools.ReadInput{Path: "dir/file", ByteOffset: -1}, errdefs.ErrInvalid},
	} {
		_, err := tools.Read(context.Background(), sb, tc.in)
		if !errorsIs(err, tc.class) {
			t.Errorf("Read(%+v) = %v, want class %v", tc.in, err, tc.class)
		}
	}
}

// endless is a Sandbox whose one file is size bytes of short lines,
// generated as they are streamed; it counts what was streamed.
type endless struct {
	*hostSandbox
	size     int64
	oneLine  bool // no newlines at all
	streamed int64
}

func (e *endless) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	return sandbox.FileInfo{Name: "huge.log", Size: e.size}, nil
}

func (e *endless) ReadFile(ctx context.Context, p string, w io.Writer) error {
	chunk := bytes.Repeat([]byte("0123456789abcdef\n"), 2048) // 34 KiB
	if e.oneLine {
		chunk = bytes.Repeat([]byte("x"), 32<<10)
	}
	for e.streamed < e.size {
		n, err := w.Write(chunk)
		e.streamed += int64(n)
		if err != nil {
			return err
		}
	}
	return nil
}

func TestReadHugeFileStopsEarly(t *testing.T) {
	sb := &endless{hostSandbox: newSandbox(t), size: 1 << 30}
	out, err := tools.Read(context.Background(), sb, tools.ReadInput{Path: "huge.log", Offset: 100})
	if err != nil {
		t.Fatal(err)
	}
	if sb.streamed > 20<<20 {
		t.Errorf("streamed %d bytes of a 1 GiB file for one page", sb.streamed)
	}
	golden(t, "read_huge_file_notice", lastLines(out.Text, 1))
}

func TestReadHugeLineStopsEarly(t *testing.T) {
	sb := &endless{hostSandbox: newSandbox(t), size: 1 << 30, oneLine: true}
	out, err := tools.Read(context.Background(), sb, tools.ReadInput{Path: "huge.log", ByteOffset: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if sb.streamed > 20<<20 {
		t.Errorf("streamed %d bytes of a 1 GiB line for one slice", sb.streamed)
	}
	golden(t, "read_huge_line_notice", lastLines(out.Text, 1))
}
