package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/api"
)

// The machine-readable output of the commands that list or describe:
// --json prints one JSON value on one line, written as the API writes its
// answers ('<', '>' and '&' as they are), of the API's types (internal/api)
// where the API serves the same data, so that a script reads the same
// shape from hutch and from the daemon. Errors still go to standard error
// as text, with a non-zero exit. --quiet prints names only, one a line.

// jsonFlag registers --json on cmd.
func jsonFlag(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, "json", false, "print one JSON value (docs/api.md, \"Machine-readable output\")")
}

// quietFlag registers -q/--quiet on cmd; what is a name is what says.
func quietFlag(cmd *cobra.Command, v *bool, what string) {
	cmd.Flags().BoolVarP(v, "quiet", "q", false, "print only "+what+", one a line")
}

// printJSON writes v as one line of JSON, as the API writes it.
func printJSON(w io.Writer, v any) error { return api.EncodeJSON(w, v) }
