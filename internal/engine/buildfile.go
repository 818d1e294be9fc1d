package engine

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// A Dockerfile can make the engine itself fetch from the network, outside
// any network mode the build's RUN steps get: the engine pulls a FROM
// image, a COPY --from or RUN --mount from= image, and the BuildKit
// frontend a "# syntax=" line names, and it downloads an ADD whose
// source is a URL or a git repository. scanDockerfile finds those, so a
// build that must stay offline can be refused before it starts instead
// of reaching out through the engine. It reads the file as the builders
// do where it matters (parser directives, line continuations, comments,
// global ARGs in FROM) and errs on the side of reporting: a reference it
// cannot resolve is reported as it stands.

// fetch is one thing a Dockerfile makes the engine fetch.
type fetch struct {
	// Line is the 1-based line of the instruction.
	Line int
	// Instruction is the instruction's keyword as written (FROM, COPY,
	// RUN, ADD, or "# syntax" for the frontend).
	Instruction string
	// Ref is the image reference, or the URL for ADD (URL set).
	Ref string
	URL bool
}

// dockerfileInfo is what scanDockerfile finds.
type dockerfileInfo struct {
	// Frontend is the image a "# syntax=" parser directive names ("" for
	// none) and FrontendLine its 0-based line index.
	Frontend     string
	FrontendLine int
	// Fetches are the images and URLs the build would fetch, in order;
	// the frontend is not among them.
	Fetches []fetch
}

var (
	directiveRE = lazyregexp.New(`^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$`)
	argRefRE    = lazyregexp.New(`\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-+][^}]*)?\}|([A-Za-z_][A-Za-z0-9_]*))`)
)

// scanDockerfile reads df; args are the build args given.
func scanDockerfile(df []byte, args map[string]string) dockerfileInfo {
	var info dockerfileInfo
	lines := strings.Split(strings.ReplaceAll(string(df), "\r\n", "\n"), "\n")
	if len(lines) > 0 {
		lines[0] = strings.TrimPrefix(lines[0], "\ufeff")
	}
	escape := byte('\\')
	i := 0
	// Parser directives: only at the very top, before any other line.
	for ; i < len(lines); i++ {
		m := directiveRE.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			break
		}
		switch strings.ToLower(m[1]) {
		case "syntax":
			info.Frontend, info.FrontendLine = m[2], i
		case "escape":
			if len(m[2]) == 1 {
				escape = m[2][0]
			}
		}
	}

	global := map[string]string{}
	stages := map[string]bool{}
	inStage := false
	for _, ins := range logicalLines(lines, escape) {
		word, rest, _ := strings.Cut(strings.TrimSpace(ins.text), " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(word) {
		case "ARG":
			if inStage {
				continue
			}
			for _, a := range strings.Fields(rest) {
				name, def, hasDef := strings.Cut(a, "=")
				if v, ok := args[name]; ok {
					global[name] = v
				} else if hasDef {
					global[name] = unquote(def)
				}
			}
		case "FROM":
			inStage = true
			_, params := splitFlags(rest)
			if len(params) == 0 {
				continue
			}
			ref := expandArgs(params[0], global)
			if !isStage(ref, stages) {
				info.Fetches = append(info.Fetches, fetch{Line: ins.line, Instruction: word, Ref: ref})
			}
			if len(params) >= 3 && strings.EqualFold(params[1], "AS") {
				stages[strings.ToLower(params[2])] = true
			}
		case "COPY":
			flags, _ := splitFlags(rest)
			if from, ok := flags["from"]; ok {
				if ref := expandArgs(from, global); !isStage(ref, stages) {
					info.Fetches = append(info.Fetches, fetch{Line: ins.line, Instruction: word, Ref: ref})
				}
			}
		case "RUN":
			flags, _ := splitFlagList(rest)
			for _, f := range flags {
				name, value, _ := strings.Cut(f, "=")
				if !strings.EqualFold(name, "mount") {
					continue
				}
				for _, kv := range strings.Split(value, ",") {
					k, v, _ := strings.Cut(kv, "=")
					if strings.EqualFold(strings.TrimSpace(k), "from") {
						if ref := expandArgs(strings.TrimSpace(v), global); !isStage(ref, stages) {
							info.Fetches = append(info.Fetches, fetch{Line: ins.line, Instruction: word, Ref: ref})
						}
					}
				}
			}
		case "ADD":
			_, params := splitFlags(rest)
			if len(params) > 1 {
				params = params[:len(params)-1] // the last is the destination
			}
			for _, src := range params {
				if isRemote(src) {
					info.Fetches = append(info.Fetches, fetch{Line: ins.line, Instruction: word, Ref: src, URL: true})
				}
			}
		}
	}
	return info
}

// isStage reports whether ref names an earlier stage (by name or index)
// or scratch, which need no fetch.
func isStage(ref string, stages map[string]bool) bool {
	if strings.EqualFold(ref, "scratch") || stages[strings.ToLower(ref)] {
		return true
	}
	_, err := strconv.Atoi(ref)
	return err == nil
}

func isRemote(src string) bool {
	s := strings.ToLower(src)
	return strings.Contains(s, "://") || strings.HasPrefix(s, "git@")
}

// logicalLine is one instruction, continuation lines joined.
type logicalLine struct {
	line int // 1-based, of its first line
	text string
}

// logicalLines joins continued lines and drops comments and blank lines,
// as the builders read a Dockerfile.
func logicalLines(lines []string, escape byte) []logicalLine {
	var out []logicalLine
	var cur strings.Builder
	start := 0
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") || (t == "" && cur.Len() > 0) {
			continue // comments, also inside a continued instruction
		}
		if t == "" {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if t[len(t)-1] == escape {
			cur.WriteString(t[:len(t)-1])
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(t)
		out = append(out, logicalLine{line: start, text: cur.String()})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, logicalLine{line: start, text: cur.String()})
	}
	return out
}

// splitFlags splits an instruction's arguments into its --flags (name to
// value, names lower-cased) and the rest; the JSON form of the rest is
// read as such.
func splitFlags(rest string) (map[string]string, []string) {
	list, params := splitFlagList(rest)
	flags := map[string]string{}
	for _, f := range list {
		name, value, _ := strings.Cut(f, "=")
		flags[strings.ToLower(name)] = value
	}
	return flags, params
}

func splitFlagList(rest string) (flags, params []string) {
	fields := strings.Fields(rest)
	i := 0
	for ; i < len(fields) && strings.HasPrefix(fields[i], "--"); i++ {
		flags = append(flags, strings.TrimPrefix(fields[i], "--"))
	}
	tail := strings.TrimSpace(strings.Join(fields[i:], " "))
	if strings.HasPrefix(tail, "[") {
		var js []string
		if json.Unmarshal([]byte(tail), &js) == nil {
			return flags, js
		}
	}
	return flags, fields[i:]
}

// expandArgs substitutes $NAME and ${NAME} (with :-, :+, - and +
// modifiers) from vars, as the builders do in FROM.
func expandArgs(s string, vars map[string]string) string {
	return argRefRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := argRefRE.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		v, set := vars[name]
		if sub[1] == "" {
			return v
		}
		inner := m[2 : len(m)-1] // NAME:-word
		rest := inner[len(name):]
		colon := strings.HasPrefix(rest, ":")
		rest = strings.TrimPrefix(rest, ":")
		switch {
		case strings.HasPrefix(rest, "-"):
			if !set || (colon && v == "") {
				return rest[1:]
			}
		case strings.HasPrefix(rest, "+"):
			if set && (!colon || v != "") {
				return rest[1:]
			}
			return ""
		}
		return v
	})
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// dropLine returns df without its 0-based line i.
func dropLine(df []byte, i int) []byte {
	lines := bytes.SplitAfter(df, []byte("\n"))
	if i < 0 || i >= len(lines) {
		return df
	}
	return bytes.Join(append(lines[:i:i], lines[i+1:]...), nil)
}
