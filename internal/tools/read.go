package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Limits of the read tool.
const (
	// MaxImageBytes is the largest image read returns.
	MaxImageBytes = 5 << 20
	// MaxBinaryBytes is the largest other binary file read returns (as
	// its bytes, for a client to keep or hand on, not as text).
	MaxBinaryBytes = 1 << 20
	// sniffLen is how much of a file decides whether it is binary.
	sniffLen = 8 << 10
	// countBudget bounds how many bytes read scans past what it shows,
	// only to count the file's lines (or the length of a long line).
	// Past it, the notice says "at least" instead of a total.
	countBudget = 16 << 20
)

// ReadInput is the read tool's input.
type ReadInput struct {
	Path       string `json:"path" jsonschema:"The file to read, relative to the office or absolute"`
	Offset     int    `json:"offset,omitempty" jsonschema:"The line to start at, counting from 1 (default 1)"`
	Limit      int    `json:"limit,omitempty" jsonschema:"The most lines to return (default and maximum 2000)"`
	ByteOffset int64  `json:"byteOffset,omitempty" jsonschema:"For a line too long to show at once: the byte within the line (at offset) to start at, counting from 0"`
}

// ReadOutput is the read tool's result: text, and for an image or
// another binary file its content.
type ReadOutput struct {
	Text   string `json:"text" jsonschema:"The lines read, followed by a notice when more remains"`
	Image  *Image `json:"image,omitempty" jsonschema:"The image, when the file is one"`
	Binary *Blob  `json:"binary,omitempty" jsonschema:"The file's bytes, when it is binary and not an image"`
}

// Blob is a binary file's content. Data marshals to JSON as base64.
type Blob struct {
	MIMEType string `json:"mimeType" jsonschema:"The media type the file's first bytes suggest"`
	Size     int64  `json:"size" jsonschema:"The file's size in bytes"`
	Data     []byte `json:"data" jsonschema:"The file's bytes, base64-encoded"`
}

// Image is an image file's content. Data marshals to JSON as base64.
type Image struct {
	MIMEType string `json:"mimeType" jsonschema:"The image's media type"`
	Data     []byte `json:"data" jsonschema:"The image's bytes, base64-encoded"`
}

// imageExts are the extensions read treats as images (when the bytes agree).
var imageExts = map[string]bool{".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true}

// Read returns a file's text, paged by lines, or an image.
//
// Text is served from line in.Offset (1-based), at most in.Limit lines
// and never more than MaxLines lines or MaxBytes bytes; when more
// remains, a blank line and `[Showing lines a-b of N. Use offset=X to
// continue]` follow. A line is what "\n" ends; a final line without one
// counts. A line too long to show at all is served in slices of at most
// MaxBytes bytes cut on UTF-8 boundaries, from in.ByteOffset (0-based
// within the line), followed by `[Line L is <size>; showing bytes s-e.
// Use byteOffset=e to continue]` or `... End of line reached]`.
//
// A file whose name ends .png .jpg .jpeg .gif or .webp and whose first
// bytes are one of those formats is returned as an Image (at most
// MaxImageBytes) with a short text. Any other file whose first 8 KiB hold
// a byte no text has (NUL and the other control bytes that the MIME
// sniffing standard calls binary) is binary: its bytes are returned as a
// Blob (at most MaxBinaryBytes) with a short text naming its size and
// media type, never as text. Text that is not valid UTF-8 (Latin-1, say)
// is shown with each byte that is not as U+FFFD, and a notice says so:
// a JSON string could not carry the bytes anyway.
//
// Read streams the file through Sandbox.ReadFile and stops it (its
// writer returns an error) as soon as it has what it needs: the lines
// before the offset are skipped as they pass, only the page is kept, and
// counting the lines after the page stops after countBudget bytes, so a
// file of any size costs at most about MaxBytes of memory and a bounded
// read past the page.
func Read(ctx context.Context, sb Sandbox, in ReadInput) (ReadOutput, error) {
	switch {
	case in.Offset < 0:
		return ReadOutput{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Offset %d is invalid: lines count from 1", in.Offset))
	case in.Limit < 0:
		return ReadOutput{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Limit %d is invalid: give a number of lines from 1 to %d", in.Limit, MaxLines))
	case in.ByteOffset < 0:
		return ReadOutput{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Byte offset %d is invalid: bytes count from 0", in.ByteOffset))
	}
	abs, err := Resolve(sb, in.Path)
	if err != nil {
		return ReadOutput{}, err
	}
	fi, err := sb.Stat(ctx, abs)
	if err != nil {
		return ReadOutput{}, err
	}
	if fi.IsDir {
		return ReadOutput{}, errdefs.New(errdefs.ErrInvalid, "Path "+showPath(in.Path)+" is a directory; list it with bash (ls)")
	}

	s := newScan(in, imageExts[strings.ToLower(path.Ext(abs))], fi.Size)
	if err := sb.ReadFile(ctx, abs, s); err != nil && !s.stopped {
		return ReadOutput{}, err
	}
	s.finish()

	switch s.kind {
	case kindBinary:
		if s.tooLarge {
			return ReadOutput{}, errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf("File %s is binary (%s, %s); read returns binary files of at most %s: look into it with bash (od -c, head -c), or copy it out with hutch files get", showPath(in.Path), sandbox.ByteCount(max(fi.Size, s.blobSize)), s.mime, sandbox.ByteCount(MaxBinaryBytes)))
		}
		return ReadOutput{
			Text:   fmt.Sprintf("Read binary file [%s, %s]", s.mime, sandbox.ByteCount(int64(len(s.blob)))),
			Binary: &Blob{MIMEType: s.mime, Size: int64(len(s.blob)), Data: s.blob},
		}, nil
	case kindImage:
		if s.tooLarge {
			return ReadOutput{}, errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf("Image %s is %s; read returns images of at most %s", showPath(in.Path), sandbox.ByteCount(max(fi.Size, int64(len(s.image)))), sandbox.ByteCount(MaxImageBytes)))
		}
		return ReadOutput{
			Text:  "Read image file [" + s.mime + "]",
			Image: &Image{MIMEType: s.mime, Data: s.image},
		}, nil
	}
	out, err := s.text()
	if err == nil && !utf8.ValidString(out.Text) {
		// A JSON string carries UTF-8 only: replace explicitly and say so,
		// rather than let the encoder replace in silence.
		out.Text = strings.ToValidUTF8(out.Text, "\uFFFD") + "\n\n" + notUTF8Notice
	}
	return out, err
}

// notUTF8Notice ends a page of text that is not valid UTF-8.
const notUTF8Notice = "[The file is not valid UTF-8: such bytes are shown as \uFFFD]"

// sniffImage returns the media type the first bytes of a file announce,
// or "" when they are none of the image formats read returns.
func sniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && bytes.HasPrefix(b, []byte("RIFF")) && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// errStop is what the scan's Write returns to end the stream early.
var errStop = errors.New("read: enough bytes")

type fileKind int

const (
	kindUndecided fileKind = iota
	kindText
	kindBinary
	kindImage
)

type scanPhase int

const (
	phaseSkip  scanPhase = iota // lines before the offset
	phasePage                   // lines shown
	phaseSlice                  // one long line, served by bytes
	phaseCount                  // lines after, only counted
)

// scan is the io.Writer a file streams into. It decides what the file is
// from its first bytes, then keeps only what the result shows. Once it
// has that, its Write returns errStop.
type scan struct {
	// The request.
	offset     int   // first line shown, 1-based
	maxLines   int   // most lines shown
	byteOffset int64 // > 0: serve line offset from this byte
	imageExt   bool  // the name says image
	size       int64 // from Stat, for the image cap

	kind     fileKind
	head     []byte // the first bytes, until the kind is decided
	mime     string
	image    []byte
	blob     []byte // a binary file's bytes
	blobSize int64  // how many of them streamed, kept or not
	tooLarge bool
	stopped  bool

	phase       scanPhase
	line        int    // the line being scanned, 1-based
	pos         int64  // bytes of it scanned so far
	page        []byte // lines shown, each followed by "\n", then the current one
	shown       int    // complete lines in page
	byteLimited bool   // the page ended because the next line did not fit
	sliceLine   int    // the long line served by bytes
	sliceFrom   int64  // where its window starts in it
	window      []byte // its bytes from sliceFrom, at most MaxBytes+UTFMax
	sliceSize   int64  // its length, once its end was seen
	sliceEnded  bool
	extra       int64 // bytes scanned past what is shown, against countBudget
}

func newScan(in ReadInput, imageExt bool, size int64) *scan {
	s := &scan{offset: max(in.Offset, 1), maxLines: MaxLines, byteOffset: in.ByteOffset, imageExt: imageExt, size: size, line: 1}
	if in.Limit > 0 && in.Limit < MaxLines {
		s.maxLines = in.Limit
	}
	s.enter()
	return s
}

// enter starts the phase for the current line when it is the offset.
func (s *scan) enter() {
	if s.line != s.offset {
		return
	}
	if s.byteOffset > 0 {
		s.phase, s.sliceLine, s.sliceFrom = phaseSlice, s.line, s.byteOffset
	} else {
		s.phase = phasePage
	}
}

// Write takes the next bytes of the file.
func (s *scan) Write(p []byte) (int, error) {
	if s.stopped {
		return 0, errStop
	}
	n := len(p)
	if s.kind == kindUndecided {
		take := min(len(p), sniffLen-len(s.head))
		s.head = append(s.head, p[:take]...)
		p = p[take:]
		if len(s.head) < sniffLen {
			return n, nil
		}
		s.decide()
	}
	switch s.kind {
	case kindImage:
		s.addImage(p)
	case kindBinary:
		s.addBlob(p)
	case kindText:
		s.scanText(p)
	}
	if s.stopped {
		return 0, errStop
	}
	return n, nil
}

// decide classifies the file from its head and hands the head on.
func (s *scan) decide() {
	head := s.head
	s.head = nil
	if s.imageExt {
		if s.mime = sniffImage(head); s.mime != "" {
			s.kind = kindImage
			if s.size > MaxImageBytes {
				s.tooLarge, s.stopped = true, true
				return
			}
			s.addImage(head)
			return
		}
	}
	if binaryHead(head) {
		s.kind, s.mime = kindBinary, http.DetectContentType(head)
		if s.size > MaxBinaryBytes {
			s.tooLarge, s.stopped = true, true
			return
		}
		s.addBlob(head)
		return
	}
	s.kind = kindText
	s.scanText(head)
}

// binaryHead reports whether the first bytes of a file hold a byte that
// no text holds: the binary data bytes of the MIME sniffing standard
// (0x00-0x08, 0x0B, 0x0E-0x1A, 0x1C-0x1F; tab, newlines, form feed and
// escape are text).
func binaryHead(b []byte) bool {
	for _, c := range b {
		if c <= 0x08 || c == 0x0B || c >= 0x0E && c <= 0x1A || c >= 0x1C && c <= 0x1F {
			return true
		}
	}
	return false
}

func (s *scan) addBlob(p []byte) {
	s.blobSize += int64(len(p))
	if len(s.blob)+len(p) > MaxBinaryBytes {
		s.tooLarge, s.stopped = true, true
		s.blob = nil
		return
	}
	s.blob = append(s.blob, p...)
}

func (s *scan) addImage(p []byte) {
	if len(s.image)+len(p) > MaxImageBytes {
		s.tooLarge, s.stopped = true, true
		s.image = nil
		return
	}
	s.image = append(s.image, p...)
}

// scanText scans text, line by line.
func (s *scan) scanText(p []byte) {
	for len(p) > 0 && !s.stopped {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.bytesOf(p)
			return
		}
		s.bytesOf(p[:i])
		p = p[i+1:]
		if !s.stopped {
			s.endLine()
		}
	}
}

// bytesOf takes bytes of the current line (no newline among them).
func (s *scan) bytesOf(b []byte) {
	switch s.phase {
	case phaseSkip:
		s.pos += int64(len(b))
	case phasePage:
		if len(s.page)+len(b) <= MaxBytes {
			s.page = append(s.page, b...)
			s.pos += int64(len(b))
			return
		}
		if s.shown == 0 {
			// The first line shown is too long on its own: serve it by bytes.
			s.phase, s.sliceLine, s.sliceFrom = phaseSlice, s.line, 0
			s.window, s.page = s.page, nil
			s.sliceBytes(b)
			return
		}
		// The line does not fit: the page ends before it.
		s.page = s.page[:len(s.page)-int(s.pos)]
		s.byteLimited = true
		s.phase = phaseCount
		s.pos += int64(len(b))
		s.spend(int64(len(b)))
	case phaseSlice:
		s.sliceBytes(b)
	case phaseCount:
		s.pos += int64(len(b))
		s.spend(int64(len(b)))
	}
}

// sliceBytes keeps the bytes of the long line that fall in its window.
func (s *scan) sliceBytes(b []byte) {
	lo, hi := s.pos, s.pos+int64(len(b))
	wantEnd := s.sliceFrom + MaxBytes + utf8.UTFMax
	from, to := max(lo, s.sliceFrom), min(hi, wantEnd)
	if from < to {
		s.window = append(s.window, b[from-lo:to-lo]...)
	}
	if hi > wantEnd {
		s.spend(hi - max(lo, wantEnd))
	}
	s.pos = hi
}

// spend counts bytes scanned past what is shown and stops at the budget.
func (s *scan) spend(n int64) {
	s.extra += n
	if s.extra > countBudget {
		s.stopped = true
	}
}

// endLine takes the newline ending the current line.
func (s *scan) endLine() {
	switch s.phase {
	case phasePage:
		s.page = append(s.page, '\n')
		s.shown++
		if s.shown == s.maxLines {
			s.phase = phaseCount
		}
	case phaseSlice:
		s.sliceSize, s.sliceEnded = s.pos, true
		s.phase = phaseCount
	case phaseCount:
		s.spend(1)
	}
	s.line++
	s.pos = 0
	s.enter()
}

// finish ends the stream: decides a short file's kind and ends an
// unterminated last line. After a stop it does nothing.
func (s *scan) finish() {
	if s.stopped {
		return
	}
	if s.kind == kindUndecided {
		s.decide()
		if s.stopped {
			return
		}
	}
	if s.kind == kindText && s.pos > 0 {
		s.endLine()
	}
}

// text builds the result of a text read.
func (s *scan) text() (ReadOutput, error) {
	// Lines seen so far: the total when the file was read to its end.
	seen := s.line - 1
	if s.stopped && s.pos > 0 {
		seen++
	}
	total := fmt.Sprint(seen)
	if s.stopped {
		total = fmt.Sprintf("at least %d", seen)
	}
	if !s.stopped && s.offset > seen {
		if seen == 0 && s.offset == 1 && s.byteOffset == 0 {
			return ReadOutput{Text: "[File is empty]"}, nil
		}
		return ReadOutput{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Offset %d is beyond end of file (%d lines total)", s.offset, seen))
	}
	if s.sliceLine > 0 {
		return s.sliceText(seen)
	}
	first, last := s.offset, s.offset+s.shown-1
	text := strings.TrimSuffix(string(s.page), "\n")
	if !s.stopped && last >= seen {
		return ReadOutput{Text: text}, nil
	}
	limit := ""
	if s.byteLimited {
		limit = " (" + sandbox.ByteCount(MaxBytes) + " limit)"
	}
	return ReadOutput{Text: fmt.Sprintf("%s\n\n[Showing lines %d-%d of %s%s. Use offset=%d to continue]", text, first, last, total, limit, last+1)}, nil
}

// sliceText builds the result of serving one long line by bytes.
func (s *scan) sliceText(seen int) (ReadOutput, error) {
	size := s.sliceSize
	sizeText := sandbox.ByteCount(size)
	if !s.sliceEnded {
		// Stopped before the line's end: only a lower bound is known.
		size = s.pos
		sizeText = "more than " + sandbox.ByteCount(size)
	}
	if s.sliceFrom >= size {
		return ReadOutput{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Byte offset %d is beyond end of line %d (%d bytes)", s.sliceFrom, s.sliceLine, size))
	}
	// Start on a rune: skip continuation bytes of a rune cut by the offset.
	w, start := s.window, s.sliceFrom
	for len(w) > 0 && !utf8.RuneStart(w[0]) && start-s.sliceFrom < utf8.UTFMax-1 {
		w, start = w[1:], start+1
	}
	end := min(start+MaxBytes, size)
	if end < size {
		// End before a rune cut by the limit (the window holds byte end).
		for end > start && !utf8.RuneStart(w[end-start]) {
			end--
		}
	}
	text := string(w[:end-start])
	var more string
	switch {
	case end < size || !s.sliceEnded && end == size:
		more = fmt.Sprintf("Use byteOffset=%d to continue", end)
	case s.stopped || s.sliceLine < seen:
		more = fmt.Sprintf("End of line reached. Use offset=%d to continue", s.sliceLine+1)
	default:
		more = "End of line reached"
	}
	return ReadOutput{Text: fmt.Sprintf("%s\n\n[Line %d is %s; showing bytes %d-%d. %s]", text, s.sliceLine, sizeText, start, end, more)}, nil
}
