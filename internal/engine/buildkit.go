package engine

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// BuildKit reports a build's progress in the build endpoint's JSON stream
// as messages with the id "moby.buildkit.trace", whose aux is a base64
// string holding one protobuf-encoded moby.buildkit.v1.StatusResponse.
// Only the fields hutch shows are read, by their field numbers in
// BuildKit's control.proto:
//
//	StatusResponse: vertexes = 1 (Vertex), logs = 3 (VertexLog)
//	Vertex:         digest = 1, name = 3, cached = 4, started = 5,
//	                completed = 6, error = 7
//	VertexLog:      vertex = 1, msg = 4
//
// Decoding them by hand keeps BuildKit's module (and its dependencies)
// out of hutch for a dozen lines of wire format.
const buildkitTraceID = "moby.buildkit.trace"

// vertex is one step of a BuildKit build as the trace reports it.
type vertex struct {
	digest, name, err  string
	cached             bool
	started, completed bool
}

// vertexLog is output of one step.
type vertexLog struct {
	vertex string
	msg    []byte
}

// decodeStatus decodes one StatusResponse.
func decodeStatus(b []byte) (vs []vertex, logs []vertexLog, err error) {
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			var x vertex
			err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					x.digest = string(v)
				case num == 3 && typ == protowire.BytesType:
					x.name = string(v)
				case num == 4 && typ == protowire.VarintType:
					n, _ := protowire.ConsumeVarint(v)
					x.cached = n != 0
				case num == 5 && typ == protowire.BytesType:
					x.started = true
				case num == 6 && typ == protowire.BytesType:
					x.completed = true
				case num == 7 && typ == protowire.BytesType:
					x.err = string(v)
				}
				return nil
			})
			if err != nil {
				return err
			}
			vs = append(vs, x)
		case num == 3 && typ == protowire.BytesType:
			var l vertexLog
			err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					l.vertex = string(v)
				case num == 4 && typ == protowire.BytesType:
					l.msg = append([]byte(nil), v...)
				}
				return nil
			})
			if err != nil {
				return err
			}
			logs = append(logs, l)
		}
		return nil
	})
	return vs, logs, err
}

// fields calls fn with each field of the message b; for a varint, v is
// its encoding.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			val, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			v, n = val, m
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			v, n = b[:m], m
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// buildkitPrinter turns trace messages into lines like BuildKit's plain
// progress: "#3 [2/4] RUN make" when a step starts, its output prefixed
// "#3 ", then "#3 DONE", "#3 CACHED" or "#3 ERROR: ...". Steps are
// numbered in the order they appear.
type buildkitPrinter struct {
	out     io.Writer
	num     map[string]int
	seen    map[string]*vertex
	pending map[string]string // a step's output not yet ended by a newline
	// failed is the name of the last step that failed, for the error.
	failed string
}

func newBuildkitPrinter(out io.Writer) *buildkitPrinter {
	return &buildkitPrinter{out: out, num: map[string]int{}, seen: map[string]*vertex{}, pending: map[string]string{}}
}

// aux handles one trace message's aux. A message that does not decode is
// skipped: progress is best-effort and the build's result comes from the
// stream's error message.
func (p *buildkitPrinter) aux(raw json.RawMessage) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return
	}
	vs, logs, err := decodeStatus(b)
	if err != nil {
		return
	}
	for _, v := range vs {
		p.vertex(v)
	}
	for _, l := range logs {
		p.log(l)
	}
}

func (p *buildkitPrinter) id(digest string) int {
	n, ok := p.num[digest]
	if !ok {
		n = len(p.num) + 1
		p.num[digest] = n
	}
	return n
}

func (p *buildkitPrinter) vertex(v vertex) {
	old := p.seen[v.digest]
	if old == nil {
		old = &vertex{digest: v.digest}
		p.seen[v.digest] = old
	}
	n := p.id(v.digest)
	if v.name != "" {
		old.name = v.name
	}
	if v.started && !old.started {
		old.started = true
		p.printf("#%d %s\n", n, old.name)
	}
	if v.cached && !old.cached {
		old.cached = true
		if !old.started {
			p.printf("#%d %s\n", n, old.name)
		}
		p.printf("#%d CACHED\n", n)
	}
	if v.err != "" && old.err == "" {
		old.err = v.err
		p.flush(v.digest, n)
		p.failed = old.name
		p.printf("#%d ERROR: %s\n", n, v.err)
	} else if v.completed && !old.completed {
		old.completed = true
		p.flush(v.digest, n)
		if !old.cached {
			p.printf("#%d DONE\n", n)
		}
	}
}

func (p *buildkitPrinter) log(l vertexLog) {
	n := p.id(l.vertex)
	text := p.pending[l.vertex] + string(l.msg)
	lines := strings.SplitAfter(text, "\n")
	p.pending[l.vertex] = lines[len(lines)-1]
	for _, line := range lines[:len(lines)-1] {
		p.printf("#%d %s", n, line)
	}
}

// flush ends a step's unfinished output line.
func (p *buildkitPrinter) flush(digest string, n int) {
	if rest := p.pending[digest]; rest != "" {
		p.printf("#%d %s\n", n, rest)
		delete(p.pending, digest)
	}
}

// printf writes progress, best-effort: a build does not fail because its
// progress could not be shown.
func (p *buildkitPrinter) printf(format string, a ...any) { _, _ = fmt.Fprintf(p.out, format, a...) }
