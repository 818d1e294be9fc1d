package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// What a command prints on standard output is its result: a write that
// fails (a closed or full standard output) fails the command, as the Flush
// of a table always did. Standard error carries notes (progress, warnings,
// the "hutch: " line of a failure): a note that cannot be written has
// nowhere else to go, so its error is dropped.

// printf writes one piece of a command's output and returns its error.
func printf(w io.Writer, format string, a ...any) error {
	_, err := fmt.Fprintf(w, format, a...)
	return err
}

// note writes a note to standard error (w), dropping the error.
func note(w io.Writer, format string, a ...any) {
	_, _ = fmt.Fprintf(w, format, a...)
}

// printer writes a command's output in several pieces and keeps the first
// error (the pieces after it are not written), so that the run is checked
// once, at its end.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

func (p *printer) println(a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintln(p.w, a...)
	}
}

// flush ends a table written through p into tw: the first error of its
// rows, else the Flush's.
func (p *printer) flush(tw *tabwriter.Writer) error {
	if p.err != nil {
		return p.err
	}
	return tw.Flush()
}
