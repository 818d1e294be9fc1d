package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// BuildDockerfile builds dockerfile, with no context besides it, as tag
// with the classic builder (args as build args), streaming the build's
// lines to out (nil discards them). A failure names the step that failed
// and carries the engine's message.
func BuildDockerfile(ctx context.Context, cli *client.Client, dockerfile []byte, tag string, args map[string]*string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	buildCtx, err := contextTar(dockerfile)
	if err != nil {
		return fmt.Errorf("making the build context: %w", err)
	}
	// Without the engine at hand, the message alone decides: only Buildah
	// (Podman) ends one with killedStepText.
	return retryKilledStep(ctx, true, out, func() error {
		res, err := cli.ImageBuild(ctx, bytes.NewReader(buildCtx), client.ImageBuildOptions{
			Tags:        []string{tag},
			Dockerfile:  "Dockerfile",
			Remove:      true,
			ForceRemove: true,
			Version:     build.BuilderV1,
			BuildArgs:   args,
		})
		if err != nil {
			return fmt.Errorf("starting the image build: %w", err)
		}
		defer func() { _ = res.Body.Close() }()
		return streamBuild(res.Body, out)
	})
}

// streamBuild copies a build's JSON message stream to out as lines and
// returns an error naming the failed step and the engine's message. It
// reads both builders' streams: the classic builder's (and Podman's)
// "Step N/M" lines, and BuildKit's trace messages (buildkit.go).
func streamBuild(r io.Reader, out io.Writer) error {
	p := NewProgress(out)
	bk := newBuildkitPrinter(out)
	step := ""
	dec := json.NewDecoder(r)
	for {
		var msg jsonstream.Message
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the build's progress: %w", err)
		}
		if msg.ID == buildkitTraceID && msg.Aux != nil {
			bk.aux(*msg.Aux)
			if bk.failed != "" {
				step = bk.failed
			}
			continue
		}
		if s := stepOf(msg.Stream); s != "" {
			step = s
		}
		if msg.Error != nil {
			p.Flush()
			raw := strings.TrimSpace(msg.Error.Message)
			text := shortenCommands(raw)
			var err error
			if step == "" {
				err = fmt.Errorf("image build failed: %s", text)
			} else {
				err = fmt.Errorf("image build failed at %s: %s", shorten(step, maxStepText), text)
			}
			if strings.HasSuffix(raw, killedStepText) {
				err = killedStep{err}
			}
			return err
		}
		p.Print(msg)
	}
}

// maxStepText is how much of a failed step an error quotes: a RUN step
// can be a script, which the progress above the error shows whole.
const maxStepText = 120

// shorten cuts s to n bytes (at a rune boundary) with an ellipsis.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// commandRE finds the command the classic builder quotes in its error
// ("The command '/bin/sh -c ...' returned a non-zero code: 1") and the
// one BuildKit does ("executor failed running [/bin/sh -c ...]").
var commandRE = lazyregexp.New(`('/bin/sh -c |\[/bin/sh -c )(.*?)(' returned|\]: )`)

// shortenCommands cuts the commands an engine's error quotes to
// maxStepText.
func shortenCommands(msg string) string {
	return commandRE.ReplaceAllStringFunc(msg, func(m string) string {
		sub := commandRE.FindStringSubmatch(m)
		return sub[1] + shorten(sub[2], maxStepText) + sub[3]
	})
}

var (
	stepRE = lazyregexp.New(`(?m)^(Step \d+/\d+ : .*)$`)
	// Podman's, "[2/3] STEP 1/4: RUN make" in a multi-stage build.
	podmanStepRE = lazyregexp.New(`(?m)^(?:\[\d+/\d+\] )?(STEP \d+/\d+: .*)$`)
)

// stepOf returns the "Step N/M : INSTRUCTION" line in a build message, if
// any (the legacy builder's; Podman prints "STEP N/M: ...").
func stepOf(s string) string {
	if m := stepRE.FindStringSubmatch(s); m != nil {
		return strings.TrimSpace(m[1])
	}
	if m := podmanStepRE.FindStringSubmatch(s); m != nil {
		return strings.TrimSpace(m[1])
	}
	return ""
}

// Progress turns the JSON messages of a build or pull into readable
// lines: build output as it comes, status lines once per change (progress
// bars are left out). Writing them is best-effort: a build does not fail
// because its progress could not be shown, so write errors are dropped.
type Progress struct {
	out     io.Writer
	last    map[string]string
	partial bool // the last Stream text did not end in a newline
}

// NewProgress writes the lines to out.
func NewProgress(out io.Writer) *Progress { return &Progress{out: out, last: map[string]string{}} }

// Print writes what m says, if anything new.
func (p *Progress) Print(m jsonstream.Message) {
	switch {
	case m.Stream != "":
		_, _ = io.WriteString(p.out, m.Stream)
		p.partial = !strings.HasSuffix(m.Stream, "\n")
	case m.Status != "":
		if p.last[m.ID] == m.Status {
			return
		}
		p.last[m.ID] = m.Status
		p.Flush()
		if m.ID != "" {
			_, _ = fmt.Fprintf(p.out, "%s: %s\n", m.ID, m.Status)
		} else {
			_, _ = fmt.Fprintln(p.out, m.Status)
		}
	}
}

// Flush ends a partial line.
func (p *Progress) Flush() {
	if p.partial {
		_, _ = io.WriteString(p.out, "\n")
		p.partial = false
	}
}

// contextTar is a build context holding dockerfile as "Dockerfile".
func contextTar(dockerfile []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(dockerfile); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
