package mcptools

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/lazyregexp"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// Progress of the bash tool (StartProgress). A client that puts a
// progressToken in a call's _meta gets notifications/progress while the
// command runs: at
// most one per ProgressInterval, and only when the command wrote
// something since the last one, so that progress (the count of output
// bytes) increases with every notification, as MCP requires. However
// much the command writes, the notifications stay at that rate and what
// hutch keeps for them stays at a few hundred bytes.
const (
	// ProgressInterval is the least time between two notifications of
	// one call.
	ProgressInterval = time.Second
	// ProgressLineRunes bounds the last line a notification's message
	// shows: its last ProgressLineRunes characters.
	ProgressLineRunes = 100
	// tailKeep is how many of the latest bytes of each stream are kept to
	// find the last line in.
	tailKeep = 512
)

// outputWatch counts a command's output and keeps the end of each
// stream, in fixed memory, for the progress messages.
type outputWatch struct {
	mu sync.Mutex
	// total counts every byte of both streams.
	total int64
	// tails holds the last tailKeep bytes of stdout and of stderr; latest
	// is the one written last.
	tails  [2][]byte
	latest int
	// cut is set for a stream whose bytes outgrew its tail.
	cut [2]bool
}

func newOutputWatch() *outputWatch {
	w := &outputWatch{}
	for i := range w.tails {
		w.tails[i] = make([]byte, 0, tailKeep)
	}
	return w
}

// write records p, written to stream i (0 stdout, 1 stderr).
func (w *outputWatch) write(i int, p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total += int64(len(p))
	w.latest = i
	t := w.tails[i]
	switch {
	case len(p) >= tailKeep:
		t = append(t[:0], p[len(p)-tailKeep:]...)
		w.cut[i] = true
	case len(t)+len(p) > tailKeep:
		drop := len(t) + len(p) - tailKeep
		t = append(t[:copy(t, t[drop:])], p...)
		w.cut[i] = true
	default:
		t = append(t, p...)
	}
	w.tails[i] = t
}

// snapshot returns the byte count and the last line of the stream
// written last.
func (w *outputWatch) snapshot() (int64, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total, lastLine(w.tails[w.latest], w.cut[w.latest])
}

// csi matches the terminal control sequences commands colour and move
// their output with.
var csi = lazyregexp.New(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]`)

// lastLine is the last non-blank line of tail, as a terminal would show
// it (after the last carriage return, without control sequences and
// characters that do not print), cut to
// its last ProgressLineRunes characters; cut says tail may start inside a
// line. A line cut at either end starts with "…".
func lastLine(tail []byte, cut bool) string {
	tail = bytes.TrimRight(tail, " \t\r\n")
	from := bytes.LastIndexByte(tail, '\n') + 1
	partial := from == 0 && cut
	line := tail[from:]
	if i := bytes.LastIndexByte(line, '\r'); i >= 0 {
		line, partial = line[i+1:], false
	}
	s := csi.ReplaceAllStringFunc(strings.ToValidUTF8(string(line), "\uFFFD"), func(string) string { return "" })
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case !unicode.IsPrint(r) && r != ' ':
			// Control characters, and format ones: a direction
			// override or a zero-width character would make the line
			// read otherwise in the client than it is.
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if n := utf8.RuneCountInString(s); n > ProgressLineRunes {
		for ; n > ProgressLineRunes; n-- {
			_, size := utf8.DecodeRuneInString(s)
			s = s[size:]
		}
		partial = true
	}
	if partial && s != "" {
		s = "…" + s
	}
	return s
}

// progressMessage is a notification's message: how much output so far,
// and its last line.
func progressMessage(total int64, line string) string {
	msg := sandbox.ByteCount(total) + " of output"
	if line != "" {
		msg += "; last line: " + line
	}
	return msg
}

// Progress reports one bash call's output to the client that asked. A
// nil *Progress reports nothing: its methods do nothing, and Sandbox
// returns the sandbox it is given.
type Progress struct {
	watch  *outputWatch
	cancel context.CancelFunc
	done   chan struct{}
}

// StartProgress starts reporting the output of the command that req's
// handler runs through Sandbox, until Stop; it returns nil when req
// carries no progress token. Use:
//
//	p := mcptools.StartProgress(ctx, req, log)
//	defer p.Stop()
//	out, err := tools.Bash(ctx, p.Sandbox(sb), in)
func StartProgress(ctx context.Context, req *mcp.CallToolRequest, log *slog.Logger) *Progress {
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	session := req.Session
	ctx, cancel := context.WithCancel(ctx)
	p := &Progress{watch: newOutputWatch(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		// The wait starts again after each notification is sent: a slow
		// client holds this goroutine, never the command, and two
		// notifications are never closer than ProgressInterval.
		t := time.NewTimer(ProgressInterval)
		defer t.Stop()
		var sent int64
		for ; ; t.Reset(ProgressInterval) {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			total, line := p.watch.snapshot()
			if total <= sent {
				continue // nothing new: progress must increase
			}
			sent = total
			err := session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(total),
				Message:       progressMessage(total, line),
			})
			if err != nil && ctx.Err() == nil {
				log.Debug("bash progress not sent", "error", err)
			}
		}
	}()
	return p
}

// Stop ends the reports; none is sent once it returns, so none follows
// the call's result.
func (p *Progress) Stop() {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
}

// Sandbox returns sb, whose commands' output p watches.
func (p *Progress) Sandbox(sb tools.Sandbox) tools.Sandbox {
	if p == nil {
		return sb
	}
	return &watchedSandbox{Sandbox: sb, watch: p.watch}
}

// watchedSandbox is a tools.Sandbox whose Exec shows its output to a
// watch as it comes, all of it: the request's OutputLimit is applied
// here, after the count, rather than by the runtime, which reads and
// drops what is past it all the same (the exec contract), so the count
// goes on past the capture limit.
type watchedSandbox struct {
	tools.Sandbox
	watch *outputWatch
}

func (s *watchedSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	stdout := sandbox.NewLimitWriter(req.Stdout, req.OutputLimit)
	stderr := sandbox.NewLimitWriter(req.Stderr, req.OutputLimit)
	req.Stdout = watchWriter{s.watch, 0, stdout}
	req.Stderr = watchWriter{s.watch, 1, stderr}
	req.OutputLimit = 0
	res, err := s.Sandbox.Exec(ctx, req)
	res.StdoutTruncated = res.StdoutTruncated || stdout.Truncated()
	res.StderrTruncated = res.StderrTruncated || stderr.Truncated()
	return res, err
}

// watchWriter shows what it passes on to a watch.
type watchWriter struct {
	watch  *outputWatch
	stream int
	next   *sandbox.LimitWriter
}

func (w watchWriter) Write(p []byte) (int, error) {
	w.watch.write(w.stream, p)
	return w.next.Write(p)
}
