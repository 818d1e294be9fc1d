// Command hutch runs the tools of AI agents inside sandboxes: every shell
// command and file operation of a conversation runs where its door policy,
// vault and mode allow, and nowhere else.
package main

import (
	"os"

	"github.com/hutchsandbox/hutch/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
