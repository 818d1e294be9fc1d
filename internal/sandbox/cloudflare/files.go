package cloudflare

// File operations over exec.
//
// A bridge has no file API, only POST /exec, so the four confined file
// operations the agent tools need (read, write, stat, list) run as one
// POSIX sh script each in the remote runtime, with commands that a Debian
// or busybox image has: readlink -f, stat -c, base64, mkdir, mv, chmod,
// cat, printf.
//
// Confinement follows internal/agent's (confine.go): the path and every
// root are resolved with every symlink followed (missing components at
// the end kept as written), and the path must be a resolved root or lie
// under one; otherwise the refusal is "Path <path> is outside the
// sandbox's workspace" (errdefs.ErrFailedPrecondition), checked before
// anything says whether the path exists. A write resolves the parent
// directory, refuses an entry outside the roots, creates missing parents
// only when their nearest existing ancestor is inside a root, and
// replaces a final symlink rather than following it.
//
// Content never travels in argv except as base64 chunks. A read comes
// back base64 on stdout, followed by a trailer line, so output a bridge
// cut short is an error, not a short file. A write is staged next to its
// target (.<name>.hutch-stage-<hex>) and renamed over it with mv -f once
// it is whole, so an aborted write never truncates the target: with the
// stdin extension each exec appends up to 8 MiB of standard
// input to the stage; without it each exec appends one base64 chunk of at
// most 64 KiB (printf) to a stage of base64 text, which the last exec
// decodes. Stage files are removed when a write fails.
//
// Limits: the checks are on names, made by a shell: unlike the agent,
// nothing is pinned by a file descriptor, so a process in the remote
// runtime that swaps a checked directory for a symlink between the check
// and the use can redirect the operation within that runtime (whose
// contents are its own: the host is never reachable this way).
// Modification times have a resolution of one second. A resolution that
// meets ".." after a missing directory (a dangling symlink's text), or a
// symlink loop, is refused rather than resolved lexically. Each write of
// more than one chunk costs one exec per chunk.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

const (
	// b64Chunk is how many bytes of content one exec carries without the
	// stdin extension: 64 KiB of base64 in one argument, well under
	// Linux's 128 KiB limit on a single argument (a base bridge passes the
	// whole command as one). A multiple of 3, so that the chunks'
	// base64 texts concatenate into one.
	b64Chunk = 48 << 10
	// defaultStdinChunk is how many bytes of content one exec carries as
	// standard input (extension stdin): under MaxStdin, and, in base64,
	// under the request body limits bridges set.
	defaultStdinChunk = 8 << 20
	// fileTimeout bounds each exec of a file operation.
	fileTimeout = 5 * time.Minute
	// abortTimeout bounds the exec that removes a failed write's stage.
	abortTimeout = 30 * time.Second
	// maxInfoOutput bounds what Stat and List read back.
	maxInfoOutput = 64 << 20
	// maxStderr bounds the standard error kept for a message.
	maxStderr = 4 << 10
	// maxStageBase keeps a stage name under NAME_MAX for long targets (as
	// the agent does).
	maxStageBase = 200
	// stageInfix marks stage files (the agent's infix).
	stageInfix = ".hutch-stage-"
)

// The exit codes of filesScript, each a class of failure.
const (
	codeNotFound     = 80 // the path (or a missing parent's ancestor) does not exist
	codeOutside      = 81 // the path resolves outside the roots
	codeIsDir        = 82 // read or write of a directory
	codeNotDir       = 83 // list of something that is not a directory
	codeNotRegular   = 84 // read of a device, FIFO, socket
	codeParentNotDir = 85 // a write's parent is not a directory
	codePermission   = 86 // the runtime's user may not
	codeRoot         = 87 // a root cannot be resolved (stderr names it)
	codeUnresolvable = 88 // a symlink loop, or ".." after a missing directory
	codeStageGone    = 89 // a write's stage vanished between execs
	codeNoCommand    = 127
)

// filesScript is the one script every file operation runs, as
//
//	sh -c filesScript hutch-files OP PATH [STAGE MODE FLAGS CHUNK] ROOT...
//
// OP is read, stat, list or write; the bracketed arguments are write's.
// FLAGS letters: p prepare (make parents, create the stage), i append
// stdin to the stage (else CHUNK, base64, to the base64 stage), c commit
// (decode, chmod, rename over the target), x remove the stage. MODE is an
// octal mode or "-" to keep the target's (0644 for a new file). Output
// ends with the line "#end" when the operation completed.
const filesScript = `IFS=' 	
'
LC_ALL=C
export LC_ALL
unset CDPATH

# realp P: R is the real path of P (every symlink followed, missing
# components at the end kept as written), A that of its nearest existing
# ancestor. Fails on a symlink loop and on ".." in the missing part.
realp() {
	_p=$1 _rest= _n=0
	while :; do
		if [ -e "$_p" ]; then
			_r=$(readlink -f -- "$_p" && echo x) || return 1
			A=${_r%?x}
			break
		fi
		if [ -L "$_p" ]; then
			_n=$((_n + 1))
			[ "$_n" -le 40 ] || return 1
			_t=$(readlink -- "$_p" && echo x) || return 1
			_t=${_t%?x}
			case $_t in
			/*) _p=$_t ;;
			*) _p=${_p%/*}/$_t ;;
			esac
			continue
		fi
		case ${_p##*/} in
		'' | .) ;;
		..) return 1 ;;
		*) _rest=/${_p##*/}$_rest ;;
		esac
		_p=${_p%/*}
		[ -n "$_p" ] || _p=/
	done
	R=${A%/}$_rest
	[ -n "$R" ] || R=/
}

# inside P ROOT ENTRY...: P is a resolved root or lies under one.
inside() {
	_x=$1
	shift
	while [ $# -gt 1 ]; do
		case $_x in "$1" | "${1%/}"/*) return 0 ;; esac
		shift 2
	done
	return 1
}

# entry P ROOT ENTRY...: P is a root's own directory entry.
entry() {
	_x=$1
	shift
	while [ $# -gt 1 ]; do
		[ "$_x" != "$2" ] || return 0
		shift 2
	done
	return 1
}

op=$1 p=$2
shift 2
if [ "$op" = write ]; then
	stage=$1 mode=$2 flags=$3 chunk=$4
	shift 4
fi

# The roots, resolved, each followed by its entry: its parent resolved,
# its name as given.
confined=$#
n=$#
while [ "$n" -gt 0 ]; do
	realp "$1" || { printf '%s\n' "$1" >&2; exit 87; }
	_root=$R _entry=
	if [ "$1" != / ]; then
		_d=${1%/*}
		! realp "${_d:-/}" || _entry=${R%/}/${1##*/}
	fi
	shift
	set -- "$@" "$_root" "$_entry"
	n=$((n - 1))
done

if [ "$op" = write ]; then
	_d=${p%/*}
	realp "${_d:-/}" || exit 88
	rd=$R
	ra=$A
	st=${rd%/}/$stage
	case $flags in *x*)
		rm -f -- "$st" "$st.b64"
		echo '#end'
		exit 0
	esac
fi
realp "$p" || exit 88
[ "$confined" = 0 ] || inside "$R" "$@" || exit 81

case $op in
read)
	[ -e "$R" ] || exit 80
	[ ! -d "$R" ] || exit 82
	[ -f "$R" ] || exit 84
	[ -r "$R" ] || exit 86
	base64 < "$R" || exit
	echo '#end'
	;;
stat)
	[ -e "$R" ] || exit 80
	stat -c '%f %s %Y' -- "$R" || exit
	if [ -L "$p" ]; then
		_l=$(readlink -- "$p" && echo x) && printf '%s' "${_l%?x}" | base64 || exit
	fi
	echo '#end'
	;;
list)
	[ -e "$R" ] || exit 80
	[ -d "$R" ] || exit 83
	cd -- "$R" 2>/dev/null && [ -r . ] || exit 86
	for _pat in '*' '.[!.]*' '..?*'; do
		set -- $_pat
		[ -e "$1" ] || [ -L "$1" ] || continue
		printf '%s\0' "$@" | base64 || exit
		echo '#'
		if _s=$(stat -c '%f %s %Y' -- "$@" 2>/dev/null); then
			printf '%s\n' "$_s"
		else
			for _e; do stat -c '%f %s %Y' -- "$_e" 2>/dev/null || echo '- 0 0'; done
		fi
		echo '#'
		for _e; do
			if [ -L "$_e" ]; then
				_l=$(readlink -- "$_e" && echo x) || _l=?x
				printf '%s\0%s\0' "$_e" "${_l%?x}"
			fi
		done | base64 || exit
		echo '#'
	done
	echo '#end'
	;;
write)
	[ "$p" != / ] || exit 82
	dst=${rd%/}/${p##*/}
	[ "$confined" = 0 ] || inside "$dst" "$@" || entry "$dst" "$@" || exit 81
	fail() {
		_c=$?
		[ $# = 0 ] || _c=$1
		rm -f -- "$st" "$st.b64"
		exit "$_c"
	}
	case $flags in
	*p*)
		if [ ! -d "$rd" ]; then
			[ ! -e "$rd" ] || exit 85
			[ -d "$ra" ] || exit 85
			[ "$confined" = 0 ] || inside "$ra" "$@" || exit 80
			(umask 022 && mkdir -p -- "$rd") || exit
			realp "$rd" && [ "$R" = "$rd" ] || exit 81
		fi
		[ ! -d "$dst" ] || [ -L "$dst" ] || exit 82
		[ -w "$rd" ] || exit 86
		(umask 077 && set -C && : > "$st") || exit
		case $flags in *i*) ;; *)
			(umask 077 && set -C && : > "$st.b64") || fail
		esac
		;;
	*)
		[ -f "$st" ] && [ ! -L "$st" ] || exit 89
		;;
	esac
	case $flags in
	*i*) cat >> "$st" || fail ;;
	*) [ -z "$chunk" ] || printf '%s' "$chunk" >> "$st.b64" || fail ;;
	esac
	case $flags in *c*)
		case $flags in *i*) ;; *)
			base64 -d < "$st.b64" > "$st" || fail
			rm -f -- "$st.b64"
		esac
		[ ! -d "$dst" ] || [ -L "$dst" ] || fail 82
		_own=
		_m=$mode
		if [ "$_m" = - ]; then
			_m=644
			if [ -f "$dst" ] && [ ! -L "$dst" ]; then
				_m=$(stat -c %a -- "$dst") && _own=$(stat -c %u:%g -- "$dst") || fail
				_m=00$_m
				_m=${_m#"${_m%???}"}
			fi
		fi
		chmod "$_m" "$st" || fail
		[ -z "$_own" ] || chown "$_own" "$st" 2>/dev/null || :
		if [ -L "$dst" ] && [ -d "$dst" ]; then
			mv -f -T -- "$st" "$dst" || fail
		else
			mv -f -- "$st" "$dst" || fail
		fi
	esac
	echo '#end'
	;;
*)
	echo "unknown operation $op" >&2
	exit 2
	;;
esac
`

// Files returns the conversation's file operations: run as commands
// through the bridge in its remote runtime (spec.OfficeKey picks it),
// confined to the remote workspace, where its commands start too. The
// remote runtime sees nothing of the host, so the door policy's plan
// does not apply there.
func (r *Runtime) Files(spec sandbox.Spec) sandbox.Files {
	remote := r.RemoteFiles(spec)
	return sandbox.ConfinedFiles(func(context.Context) (sandbox.Confined, error) { return remote, nil }, RemoteRoot, []string{RemoteRoot})
}

// RemoteFiles are the file operations of one conversation's remote
// runtime, confined to the roots each call names, run as commands through
// the bridge. They have the method set of agent.Client's confined
// operations (sandbox.Confined). They are safe for concurrent use; two
// writes of one path race like two agents' (the last rename wins).
type RemoteFiles struct {
	r    *Runtime
	spec sandbox.Spec
}

var _ sandbox.Confined = (*RemoteFiles)(nil)

// RemoteFiles returns the file operations of the conversation spec names
// (spec.OfficeKey picks its remote runtime).
func (r *Runtime) RemoteFiles(spec sandbox.Spec) *RemoteFiles {
	return &RemoteFiles{r: r, spec: spec}
}

// ReadFileWithin copies the regular file at path (absolute and clean)
// into w, refusing a path that resolves outside roots (none: no
// confinement). When w fails the read stops and its error is returned.
//
// Errors: errdefs.ErrNotFound for a missing path; ErrFailedPrecondition
// for a path outside the roots; ErrInvalid for a directory, a file that
// is not regular, a path that is not absolute and clean; ErrUnavailable
// when the bridge fails or cut the content short; and Exec's errors.
func (f *RemoteFiles) ReadFileWithin(ctx context.Context, p string, roots []string, w io.Writer) error {
	if err := checkArgs(p, roots); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	sink := &b64Sink{w: w, stop: stop}
	code, stderr, err := f.run(ctx, "read", p, nil, roots, nil, sink)
	if sink.werr != nil {
		// The writer wants no more; the command was stopped.
		return sink.werr
	}
	if err != nil {
		return err
	}
	if err := fileError("read", p, code, stderr); err != nil {
		return err
	}
	if err := sink.finish(); err != nil {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Reading %s failed: the bridge at %s returned its content %v", p, f.r.display, err))
	}
	return sink.werr
}

// WriteFileWithin replaces the file at path (absolute and clean)
// atomically with what r yields, creating missing parents (only under a
// root when roots are given). A zero mode keeps an existing regular
// file's mode (0644 for a new one); otherwise mode.Perm() is set. A
// symlink at path is replaced, not followed; one that leads outside roots
// is refused. When r fails, or an exec does, the target is left as it
// was and the stage is removed.
//
// Errors: ErrFailedPrecondition outside the roots; ErrInvalid for a
// directory at path, a parent that is not a directory, a path that is not
// absolute and clean; ErrNotFound when a missing parent would have to be
// made outside the roots; ErrUnavailable when the content did not arrive
// whole; ErrConflict when the stage vanished meanwhile; and Exec's errors.
func (f *RemoteFiles) WriteFileWithin(ctx context.Context, p string, roots []string, r io.Reader, mode os.FileMode) error {
	if err := checkArgs(p, roots); err != nil {
		return err
	}
	h, err := f.r.cachedHealth(ctx)
	if err != nil {
		return err
	}
	viaStdin := h.Has(ExtStdin)
	m := "-"
	if mode != 0 {
		m = strconv.FormatUint(uint64(mode.Perm()), 8)
	}
	stage := stageName(path.Base(p))
	size := b64Chunk
	if viaStdin {
		size = f.r.stdinChunk
	}
	for first := true; ; first = false {
		// A short chunk is the last; after a full one, the next may be
		// empty (one more exec, which commits).
		data, rerr := io.ReadAll(io.LimitReader(r, int64(size)))
		if rerr != nil {
			if !first {
				f.abort(ctx, p, stage, roots)
			}
			return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Writing %s failed: the content did not arrive whole: %v", p, rerr))
		}
		last := len(data) < size
		flags, chunk, stdin := "", "", []byte(nil)
		if first {
			flags += "p"
		}
		if viaStdin {
			flags += "i"
			stdin = data
		} else {
			chunk = base64.StdEncoding.EncodeToString(data)
		}
		if last {
			flags += "c"
		}
		out := &cappedBuffer{limit: maxStderr}
		code, stderr, err := f.run(ctx, "write", p, []string{stage, m, flags, chunk}, roots, stdin, out)
		if err != nil {
			// The command's end is unknown: it may have made the stage.
			f.abort(ctx, p, stage, roots)
			return err
		}
		// The script removes the stage itself when it fails.
		if err := fileError("write", p, code, stderr); err != nil {
			return err
		}
		if !bytes.HasSuffix(out.Bytes(), []byte("#end\n")) {
			f.abort(ctx, p, stage, roots)
			return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Writing %s failed: the bridge at %s did not report the end of the command", p, f.r.display))
		}
		if last {
			return nil
		}
	}
}

// abort removes a failed write's stage files, with a deadline of its own
// (the caller's context may be what ended the write). Best effort: a
// stage left behind is a hidden file next to the target.
func (f *RemoteFiles) abort(ctx context.Context, p, stage string, roots []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	if _, _, err := f.run(ctx, "write", p, []string{stage, "-", "x", ""}, roots, nil, io.Discard); err != nil {
		f.r.log.Debug("bridge files: removing a write's stage failed", "path", p, "err", err)
	}
}

// Stat describes what path resolves to (like os.Stat); when path itself
// is a symlink, Link holds its target. Name is path's last element.
// Errors as ReadFileWithin's, but any kind of file may be described.
func (f *RemoteFiles) Stat(ctx context.Context, p string, roots []string) (sandbox.FileInfo, error) {
	if err := checkArgs(p, roots); err != nil {
		return sandbox.FileInfo{}, err
	}
	out := &cappedBuffer{limit: maxInfoOutput}
	code, stderr, err := f.run(ctx, "stat", p, nil, roots, nil, out)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if err := fileError("stat", p, code, stderr); err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := parseStat(path.Base(p), out.Bytes())
	if err != nil {
		return sandbox.FileInfo{}, f.garbled("stat", p, err)
	}
	return fi, nil
}

// List returns the entries of the directory path resolves to, sorted by
// name. Entries are not followed: a symlink is reported as one, with Link
// set, wherever it points. Errors as Stat's, and ErrInvalid when path is
// not a directory.
func (f *RemoteFiles) List(ctx context.Context, p string, roots []string) ([]sandbox.FileInfo, error) {
	if err := checkArgs(p, roots); err != nil {
		return nil, err
	}
	out := &cappedBuffer{limit: maxInfoOutput}
	code, stderr, err := f.run(ctx, "list", p, nil, roots, nil, out)
	if err != nil {
		return nil, err
	}
	if err := fileError("list", p, code, stderr); err != nil {
		return nil, err
	}
	if out.over {
		return nil, errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf("Directory %s has too many entries to list through the bridge (its listing passed %d MiB)", p, maxInfoOutput>>20))
	}
	infos, err := parseList(out.Bytes())
	if err != nil {
		return nil, f.garbled("list", p, err)
	}
	return infos, nil
}

// run runs filesScript once and returns its exit code and the start of
// its standard error. err is set when it did not run to an exit: Exec
// failed, it was aborted (ctx's error) or it timed out.
func (f *RemoteFiles) run(ctx context.Context, op, p string, args, roots []string, stdin []byte, stdout io.Writer) (code int, stderr string, err error) {
	argv := make([]string, 0, 6+len(args)+len(roots))
	argv = append(argv, "sh", "-c", filesScript, "hutch-files", op, p)
	argv = append(argv, args...)
	argv = append(argv, roots...)
	errBuf := &cappedBuffer{limit: maxStderr}
	req := sandbox.ExecRequest{
		Argv:    argv,
		Dir:     "/",
		Stdout:  stdout,
		Stderr:  errBuf,
		Timeout: fileTimeout,
	}
	if stdin != nil {
		req.Stdin = bytes.NewReader(stdin)
	}
	res, err := f.r.Exec(ctx, f.spec, req)
	switch {
	case err != nil:
		return 0, "", err
	case res.Aborted:
		if ctx.Err() != nil {
			return 0, "", fmt.Errorf("%s %s: %w", op, p, ctx.Err())
		}
		return 0, "", fmt.Errorf("%s %s: the command was aborted", op, p)
	case res.TimedOut:
		return 0, "", errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Cannot %s %s: the bridge at %s did not finish within %v", op, p, f.r.display, fileTimeout))
	}
	return res.ExitCode, strings.TrimSpace(errBuf.String()), nil
}

// garbled is the error of output that is not what the script prints.
func (f *RemoteFiles) garbled(op, p string, err error) error {
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Cannot %s %s: the bridge at %s returned output hutch cannot read (%v)", op, p, f.r.display, err))
}

// fileError classes the script's exit code, with the agent's texts.
func fileError(verb, p string, code int, stderr string) error {
	switch code {
	case 0:
		return nil
	case codeNotFound:
		return errdefs.New(errdefs.ErrNotFound, "File not found: "+p)
	case codeOutside:
		return errdefs.New(errdefs.ErrFailedPrecondition, "Path "+p+" is outside the sandbox's workspace")
	case codeIsDir:
		return errdefs.New(errdefs.ErrInvalid, "Path is a directory: "+p)
	case codeNotDir:
		return errdefs.New(errdefs.ErrInvalid, "Path is not a directory: "+p)
	case codeNotRegular:
		return errdefs.New(errdefs.ErrInvalid, "Path is not a regular file: "+p)
	case codeParentNotDir:
		return errdefs.New(errdefs.ErrInvalid, "A parent of "+p+" is not a directory")
	case codePermission:
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Cannot %s %s: permission denied", verb, p))
	case codeRoot:
		root, _, _ := strings.Cut(stderr, "\n")
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Root %s cannot be resolved in the remote runtime", root))
	case codeUnresolvable:
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Path %s cannot be resolved: it leads through a symlink loop, or through '..' after a missing directory", p))
	case codeStageGone:
		return errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Writing %s failed: its staged content vanished from the remote runtime meanwhile", p))
	case codeNoCommand:
		return errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf(
			"Cannot %s %s: the remote runtime lacks a command file operations need (sh, readlink, stat, base64, mkdir, mv, chmod, cat): %s", verb, p, stderr))
	}
	if stderr == "" {
		stderr = fmt.Sprintf("exit status %d", code)
	}
	return fmt.Errorf("cannot %s %s: %s", verb, p, stderr)
}

// checkArgs checks path and roots as the agent does: absolute, clean,
// no NUL byte, no "..".
func checkArgs(p string, roots []string) error {
	if err := agent.CheckPath(p); err != nil {
		return err
	}
	for _, root := range roots {
		if err := agent.CheckPath(root); err != nil {
			return errdefs.New(errdefs.ErrInvalid, "Root is not valid: "+err.Error())
		}
	}
	return nil
}

// stageName is a fresh stage file name for the target name: hidden, the
// agent's infix, random, short enough for NAME_MAX. The script adds
// ".b64" for the stage of base64 text.
func stageName(name string) string {
	if len(name) > maxStageBase {
		name = name[:maxStageBase]
		// Cut on a character boundary, so that a UTF-8 name stays UTF-8.
		for len(name) > 0 && !utf8.ValidString(name) {
			name = name[:len(name)-1]
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return "." + name + stageInfix + hex.EncodeToString(rnd[:])
}

// parseStat reads stat's output: "<hex mode> <size> <mtime>", then the
// link's text in base64 when the path is a symlink, then "#end".
func parseStat(name string, out []byte) (sandbox.FileInfo, error) {
	sections, err := splitSections(out)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if len(sections) != 1 {
		return sandbox.FileInfo{}, fmt.Errorf("%d sections, want 1", len(sections))
	}
	line, rest, _ := strings.Cut(sections[0], "\n")
	fi, ok, err := parseStatLine(name, line)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if !ok {
		return sandbox.FileInfo{}, errors.New("no stat line")
	}
	link, err := decodeB64(rest)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi.Link = string(link)
	return fi, nil
}

// parseList reads list's output: for each group of entries, their names
// (base64 of NUL-terminated names), a stat line per name, and their links
// (base64 of NUL-terminated name, target pairs), each section ended by a
// "#" line; then "#end".
func parseList(out []byte) ([]sandbox.FileInfo, error) {
	sections, err := splitSections(out)
	if err != nil {
		return nil, err
	}
	if len(sections)%3 != 0 {
		return nil, fmt.Errorf("%d sections, want a multiple of 3", len(sections))
	}
	infos := []sandbox.FileInfo{}
	for g := 0; g < len(sections); g += 3 {
		raw, err := decodeB64(sections[g])
		if err != nil {
			return nil, err
		}
		names := nulFields(raw)
		lines := strings.Split(strings.TrimSuffix(sections[g+1], "\n"), "\n")
		if len(lines) != len(names) {
			return nil, fmt.Errorf("%d names but %d stat lines", len(names), len(lines))
		}
		raw, err = decodeB64(sections[g+2])
		if err != nil {
			return nil, err
		}
		pairs := nulFields(raw)
		if len(pairs)%2 != 0 {
			return nil, errors.New("an odd number of link fields")
		}
		links := make(map[string]string, len(pairs)/2)
		for i := 0; i < len(pairs); i += 2 {
			links[pairs[i]] = pairs[i+1]
		}
		for i, name := range names {
			fi, ok, err := parseStatLine(name, lines[i])
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // removed meanwhile
			}
			if fi.Mode&os.ModeSymlink != 0 {
				fi.Link = links[name]
			}
			infos = append(infos, fi)
		}
	}
	slices.SortFunc(infos, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return infos, nil
}

// splitSections splits output at its "#" lines, and checks that it ends
// with "#end": the text before each "#" line (and before "#end") is a
// section, the last one possibly empty.
func splitSections(out []byte) ([]string, error) {
	s := string(out)
	body, ok := strings.CutSuffix(s, "#end\n")
	if !ok || (body != "" && !strings.HasSuffix(body, "\n")) {
		return nil, errors.New(`no "#end" line`)
	}
	var sections []string
	for body != "" {
		i := strings.Index("\n"+body, "\n#\n")
		if i < 0 {
			sections = append(sections, body)
			break
		}
		sections = append(sections, body[:i])
		body = body[i+2:]
	}
	return sections, nil
}

// parseStatLine reads "<hex mode> <size> <mtime>" ("- 0 0" for an entry
// gone meanwhile: ok is false).
func parseStatLine(name, line string) (fi sandbox.FileInfo, ok bool, err error) {
	fields := strings.Fields(line)
	if len(fields) != 3 {
		return fi, false, fmt.Errorf("stat line %q", line)
	}
	if fields[0] == "-" {
		return fi, false, nil
	}
	raw, err1 := strconv.ParseUint(fields[0], 16, 32)
	size, err2 := strconv.ParseInt(fields[1], 10, 64)
	mtime, err3 := strconv.ParseInt(fields[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return fi, false, fmt.Errorf("stat line %q: %w", line, err)
	}
	mode := fileMode(uint32(raw))
	return sandbox.FileInfo{
		Name:    name,
		Size:    size,
		Mode:    mode,
		ModTime: time.Unix(mtime, 0),
		IsDir:   mode.IsDir(),
	}, true, nil
}

// The file type bits of st_mode, as stat's %f prints them (Linux's).
const (
	sIFMT   = 0o170000
	sIFSOCK = 0o140000
	sIFLNK  = 0o120000
	sIFBLK  = 0o060000
	sIFDIR  = 0o040000
	sIFCHR  = 0o020000
	sIFIFO  = 0o010000
	sISUID  = 0o4000
	sISGID  = 0o2000
	sISVTX  = 0o1000
)

// fileMode turns a raw st_mode into an os.FileMode, as the agent does.
func fileMode(raw uint32) os.FileMode {
	mode := os.FileMode(raw & 0o777)
	switch raw & sIFMT {
	case sIFBLK:
		mode |= os.ModeDevice
	case sIFCHR:
		mode |= os.ModeDevice | os.ModeCharDevice
	case sIFDIR:
		mode |= os.ModeDir
	case sIFIFO:
		mode |= os.ModeNamedPipe
	case sIFLNK:
		mode |= os.ModeSymlink
	case sIFSOCK:
		mode |= os.ModeSocket
	}
	if raw&sISUID != 0 {
		mode |= os.ModeSetuid
	}
	if raw&sISGID != 0 {
		mode |= os.ModeSetgid
	}
	if raw&sISVTX != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

// decodeB64 decodes base64 text broken into lines.
func decodeB64(s string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.NewReplacer("\n", "", "\r", "").Replace(s))
}

// nulFields splits NUL-terminated fields.
func nulFields(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// b64Sink decodes a read's output as it comes: base64 text in lines,
// then the trailer "#end". The decoded bytes go to w; when w fails, stop
// ends the command and nothing more is written.
type b64Sink struct {
	w    io.Writer
	stop func()
	// pend is base64 text not decoded yet; dec the decoding buffer.
	pend, dec []byte
	// trailer is what came from the first '#' on (bounded).
	trailer []byte
	ended   bool
	werr    error // w's error
	derr    error // the text was not base64
}

func (s *b64Sink) Write(p []byte) (int, error) {
	n := len(p)
	if s.werr != nil || s.derr != nil {
		return n, nil
	}
	if s.ended {
		if len(s.trailer) < 64 {
			s.trailer = append(s.trailer, p...)
		}
		return n, nil
	}
	if i := bytes.IndexByte(p, '#'); i >= 0 {
		s.trailer = append(s.trailer, p[i:]...)
		p, s.ended = p[:i], true
	}
	for _, c := range p {
		if c != '\n' && c != '\r' {
			s.pend = append(s.pend, c)
		}
	}
	s.flush(len(s.pend) / 4 * 4)
	return n, nil
}

// flush decodes the first k characters of pend.
func (s *b64Sink) flush(k int) {
	if k == 0 || s.werr != nil || s.derr != nil {
		return
	}
	s.dec = slices.Grow(s.dec[:0], base64.StdEncoding.DecodedLen(k))[:base64.StdEncoding.DecodedLen(k)]
	nd, err := base64.StdEncoding.Decode(s.dec, s.pend[:k])
	if err != nil {
		s.derr = err
		return
	}
	s.pend = append(s.pend[:0], s.pend[k:]...)
	if _, err := s.w.Write(s.dec[:nd]); err != nil {
		s.werr = err
		s.stop()
	}
}

// finish decodes what is left and checks the trailer.
func (s *b64Sink) finish() error {
	if !s.ended || !bytes.HasPrefix(s.trailer, []byte("#end")) {
		return errors.New("cut short (its output had no end line)")
	}
	s.flush(len(s.pend))
	if s.derr != nil {
		return fmt.Errorf("in a form it cannot decode (%v)", s.derr)
	}
	return nil
}

// cappedBuffer keeps the first limit bytes written to it and drops the
// rest; over says whether it dropped any.
type cappedBuffer struct {
	bytes.Buffer
	limit int
	over  bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.limit - c.Len(); room < len(p) {
		c.over = true
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buffer.Write(p)
}
