package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/tools"
)

func newFilesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "files",
		Short: "Copy files into and out of a conversation's sandbox, and list them",
		Long: `Copy single files between this machine and a conversation's sandbox, as
its commands see them, and list directories there. The bytes are copied
unchanged, binary files included.

Paths in the sandbox are relative to the conversation's office, or
absolute as the sandbox sees them; like the agent's tools, they reach
only what the conversation's door policy mounts, symlinks included. When
a daemon answers for this state dir (in the mode asked for), the copy
goes through it; otherwise hutch reaches the sandbox itself.`,
	}
	cmd.AddCommand(newFilesGetCmd(g), newFilesPutCmd(g), newFilesLsCmd(g))
	return cmd
}

// fileFlags are the flags every files command takes.
type fileFlags struct {
	mode, conv, user string
}

func (f *fileFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.mode, "sandbox", "", "the conversation's mode: host, container:<name>, image:<image>, cloudflare:<id>, gondolin:default, kube:<image> (default: the daemon's mode when hutch serve answers on this state dir, else $HUTCH_SANDBOX, else host)")
	cmd.Flags().StringVar(&f.conv, "conversation", "", "the conversation, as <platform>/<conversation-id> (required)")
	cmd.Flags().StringVar(&f.user, "user", "", "platform user whose vault host mode checks")
}

// conversationFiles is a conversation's file access, through a daemon or
// this process; paths are as the user gave them.
type conversationFiles interface {
	Stat(ctx context.Context, p string) (sandbox.FileInfo, error)
	ReadFile(ctx context.Context, p string, w io.Writer) error
	// WriteFile returns the path written, absolute in the runtime.
	WriteFile(ctx context.Context, p string, r io.Reader, mode os.FileMode) (string, error)
	List(ctx context.Context, p string) ([]sandbox.FileInfo, error)
}

// open returns the conversation's files and what to close when done.
func (f *fileFlags) open(ctx context.Context, g *globals) (conversationFiles, func(), error) {
	if f.conv == "" {
		return nil, nil, errdefs.New(errdefs.ErrInvalid, "--conversation <platform>/<conversation-id> is required")
	}
	addr, err := office.ParseAddress(f.conv)
	if err != nil {
		return nil, nil, err
	}
	mode, err := g.sandboxMode(f.mode)
	if err != nil {
		return nil, nil, err
	}
	svc, err := g.service()
	if err != nil {
		return nil, nil, err
	}
	if c, ok := g.daemon(ctx, svc, f.mode); ok {
		conv := api.Conversation{Platform: string(addr.Platform), ConversationID: addr.ConversationID, User: f.user}
		return daemonFiles{c: c, conv: conv}, func() { _ = svc.Close() }, nil
	}
	return &localFiles{svc: svc, addr: addr, mode: mode, user: f.user}, func() { _ = svc.Close() }, nil
}

// daemonFiles reaches a conversation's files through the daemon's API.
type daemonFiles struct {
	c    *client.Client
	conv api.Conversation
}

func (d daemonFiles) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	fi, err := d.c.StatFile(ctx, d.conv, p)
	return sandbox.FileInfo(fi), classed(err)
}

func (d daemonFiles) ReadFile(ctx context.Context, p string, w io.Writer) error {
	return classed(d.c.ReadFile(ctx, d.conv, p, w))
}

func (d daemonFiles) WriteFile(ctx context.Context, p string, r io.Reader, mode os.FileMode) (string, error) {
	wa, err := d.c.WriteFile(ctx, d.conv, p, r, mode)
	return wa.Path, classed(err)
}

func (d daemonFiles) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	list, err := d.c.ListFiles(ctx, d.conv, p)
	if err != nil {
		return nil, classed(err)
	}
	out := make([]sandbox.FileInfo, len(list))
	for i, fi := range list {
		out[i] = sandbox.FileInfo(fi)
	}
	return out, nil
}

// localFiles reaches them from this process, through the mode's Files.
type localFiles struct {
	svc  *service.Service
	addr office.Address
	mode sandbox.Mode
	user string
}

func (l *localFiles) resolve(ctx context.Context, p string) (tools.Sandbox, string, error) {
	sb, err := l.svc.ToolSandbox(ctx, l.addr, l.mode, l.user)
	if err != nil {
		return nil, "", err
	}
	abs, err := tools.Resolve(sb, p)
	return sb, abs, err
}

func (l *localFiles) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	sb, abs, err := l.resolve(ctx, p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return sb.Stat(ctx, abs)
}

func (l *localFiles) ReadFile(ctx context.Context, p string, w io.Writer) error {
	sb, abs, err := l.resolve(ctx, p)
	if err != nil {
		return err
	}
	return sb.ReadFile(ctx, abs, w)
}

func (l *localFiles) WriteFile(ctx context.Context, p string, r io.Reader, mode os.FileMode) (string, error) {
	sb, abs, err := l.resolve(ctx, p)
	if err != nil {
		return "", err
	}
	return abs, sb.WriteFile(ctx, abs, r, mode)
}

func (l *localFiles) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	sb, abs, err := l.resolve(ctx, p)
	if err != nil {
		return nil, err
	}
	return sb.List(ctx, abs)
}

func newFilesGetCmd(g *globals) *cobra.Command {
	var f fileFlags
	cmd := &cobra.Command{
		Use:   "get --conversation <platform>/<conversation-id> <path> [<local-path>|-]",
		Short: "Copy a file out of a conversation's sandbox",
		Long: `Copy the file <path> of the conversation's sandbox to <local-path>, or to
standard output when it is - or left out. <local-path> may be a directory:
the file keeps its name there. The local file appears whole or not at all
(written beside it, then renamed); an existing one is replaced.`,
		Example: `  hutch files get --conversation slack/C0123ABC report.pdf ./report.pdf
  hutch files get --conversation slack/C0123ABC /workspace/shared/data.bin - | sha256sum`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			files, done, err := f.open(ctx, g)
			if err != nil {
				return err
			}
			defer done()
			src := args[0]
			if len(args) == 1 || args[1] == "-" {
				return files.ReadFile(ctx, src, g.stdout)
			}
			dst := args[1]
			if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
				dst = filepath.Join(dst, filepath.Base(filepath.Clean(src)))
			}
			n, err := receive(ctx, files, src, dst)
			if err != nil {
				return err
			}
			note(g.stderr, "Copied %s to %s\n", sandbox.ByteCount(n), dst)
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

// receive copies src into a new file beside dst and renames it over dst
// once all of it arrived, so a failed copy leaves dst as it was.
func receive(ctx context.Context, files conversationFiles, src, dst string) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".hutch-get-*")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	cw := &countWriter{w: tmp}
	if err := files.ReadFile(ctx, src, cw); err != nil {
		_ = tmp.Close()
		return 0, err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return 0, err
	}
	return cw.n, os.Rename(tmp.Name(), dst)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func newFilesPutCmd(g *globals) *cobra.Command {
	var (
		f    fileFlags
		mode string
	)
	cmd := &cobra.Command{
		Use:   "put --conversation <platform>/<conversation-id> <local-path>|- <path>",
		Short: "Copy a file into a conversation's sandbox",
		Long: `Copy <local-path> (or standard input, for -) into the conversation's
sandbox as <path>, creating missing parent directories. The file is
replaced whole or not at all: the sandbox stages the bytes and renames
them into place once all arrived (a file mounted on its own, such as a
shared MEMORY.md, is written in place). An existing file keeps its mode
unless --mode says otherwise; a new one is 0644.`,
		Example: `  hutch files put --conversation slack/C0123ABC ./data.csv input/data.csv
  tar czf - src | hutch files put --conversation slack/C0123ABC - src.tgz`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var perm os.FileMode
			if mode != "" {
				n, err := strconv.ParseUint(mode, 8, 32)
				if err != nil || n > 0o777 {
					return errdefs.New(errdefs.ErrInvalid, "--mode "+mode+" is not valid: give octal permission bits such as 0644")
				}
				perm = os.FileMode(n)
			}
			var src io.Reader = g.stdin
			if args[0] != "-" {
				file, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer func() { _ = file.Close() }()
				if fi, err := file.Stat(); err == nil && !fi.Mode().IsRegular() {
					return errdefs.New(errdefs.ErrInvalid, args[0]+" is not a regular file: hutch files put copies one file (for a directory: tar cf - DIR | hutch files put ... - DIR.tar)")
				}
				src = file
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			files, done, err := f.open(ctx, g)
			if err != nil {
				return err
			}
			defer done()
			cr := &countReader{r: src}
			abs, err := files.WriteFile(ctx, args[1], cr, perm)
			if err != nil {
				return err
			}
			note(g.stderr, "Copied %s to %s\n", sandbox.ByteCount(cr.n), abs)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&mode, "mode", "", "permission bits of the file, octal (default: an existing file's, 0644 for a new one)")
	return cmd
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func newFilesLsCmd(g *globals) *cobra.Command {
	var f fileFlags
	cmd := &cobra.Command{
		Use:   "ls --conversation <platform>/<conversation-id> [<path>]",
		Short: "List a directory of a conversation's sandbox",
		Long: `List the directory <path> of the conversation's sandbox (its office when
left out): mode, size, modification time and name of each entry, and
where a symlink points (not followed). A name that holds bytes a
terminal should not print raw is shown quoted.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := "."
			if len(args) == 1 {
				p = args[0]
			}
			files, done, err := f.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer done()
			list, err := files.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			out := &printer{w: tw}
			for _, e := range list {
				name := showName(e.Name)
				if e.Link != "" {
					name += " -> " + showName(e.Link)
				}
				out.printf("%s\t%d\t%s\t%s\n", e.Mode, e.Size, e.ModTime.Local().Format(time.DateTime), name)
			}
			return out.flush(tw)
		},
	}
	f.add(cmd)
	return cmd
}

// showName is a file name as ls shows it: as it is, or quoted when it is
// not UTF-8 or holds what a terminal should not print raw.
func showName(s string) string {
	if strings.ToValidUTF8(s, "\uFFFD") != s || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
