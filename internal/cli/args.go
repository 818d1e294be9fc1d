package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// usageError is a command line hutch cannot parse: it exits 2 and points
// at the help of the command it was meant for.
type usageError struct {
	msg     string
	command string // "hutch office"
}

func (e *usageError) Error() string { return e.msg }

// unknownGroupWord refuses a word a command group below the root
// (office, project, sandbox, ...) does not know, as the root does. Left to
// cobra, a group without a run of its own prints its help and exits 0 for
// `hutch project upp`, and a script never learns its command did nothing.
// It runs before cobra does, so a group's help stays what it was.
func unknownGroupWord(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root || !cmd.HasSubCommands() || cmd.Runnable() {
		return nil
	}
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			return nil
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if takesValue(cmd, a) {
				i++ // its value
			}
		default:
			return unknownSubcommand(cmd, a)
		}
	}
	return nil
}

// unknownSubcommand says that group has no subcommand word, with the
// names it could have meant, in the words cobra uses at the top level.
func unknownSubcommand(group *cobra.Command, word string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown command %q for %q", word, group.CommandPath())
	if group.SuggestionsMinimumDistance <= 0 {
		group.SuggestionsMinimumDistance = 2 // what cobra uses at the root
	}
	if s := group.SuggestionsFor(word); len(s) > 0 {
		b.WriteString("\n\nDid you mean this?\n")
		for _, name := range s {
			fmt.Fprintf(&b, "\t%s\n", name)
		}
		return &usageError{msg: strings.TrimSuffix(b.String(), "\n"), command: group.CommandPath()}
	}
	return &usageError{msg: b.String(), command: group.CommandPath()}
}

// negativeNumber is an argument such as Telegram's group id -1001234567890,
// which flag parsing would otherwise take for a cluster of short flags.
var negativeNumber = lazyregexp.New(`^-[0-9]+$`)

// negativeMark stands in for the leading "-" of a negative number while
// flags are parsed: an argument that does not start with "-" is an
// argument to pflag. No argument hutch takes can start with a NUL.
const negativeMark = "\x00"

// keepNegativeArgs marks every negative number among args that flag
// parsing would take for a flag (not after "--", not the value of a flag
// that takes one), so that `hutch office key telegram -1001234567890`
// works without a "--" the user would have to know about. restoreArgs,
// run before each command, takes the marks off again.
func keepNegativeArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil {
		cmd = root
	}
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range args {
		if a == "--" {
			break
		}
		if !negativeNumber.MatchString(a) || i > 0 && takesValue(cmd, args[i-1]) {
			continue
		}
		out[i] = negativeMark + a[1:]
	}
	return out
}

// takesValue reports whether arg is a flag of cmd (or of its parents)
// given without "=" whose value is the next argument.
func takesValue(cmd *cobra.Command, arg string) bool {
	var f *pflag.Flag
	switch {
	case strings.HasPrefix(arg, "--") && !strings.Contains(arg, "="):
		f = lookupFlag(cmd, arg[2:], "")
	case len(arg) == 2 && arg[0] == '-' && arg[1] != '-':
		f = lookupFlag(cmd, "", arg[1:])
	}
	return f != nil && f.NoOptDefVal == ""
}

func lookupFlag(cmd *cobra.Command, name, short string) *pflag.Flag {
	for c := cmd; c != nil; c = c.Parent() {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			if name != "" {
				if f := fs.Lookup(name); f != nil {
					return f
				}
			} else if f := fs.ShorthandLookup(short); f != nil {
				return f
			}
		}
	}
	return nil
}

// restoreArgs wraps every command's run so that it sees the negative
// numbers keepNegativeArgs marked as the user wrote them.
func restoreArgs(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error { return run(cmd, unmark(args)) }
		}
		if run := c.Run; run != nil {
			c.Run = func(cmd *cobra.Command, args []string) { run(cmd, unmark(args)) }
		}
		if check := c.Args; check != nil {
			c.Args = func(cmd *cobra.Command, args []string) error { return check(cmd, unmark(args)) }
		}
	}
	walk(root)
}

func unmark(args []string) []string {
	for i, a := range args {
		if strings.HasPrefix(a, negativeMark) {
			args[i] = "-" + a[len(negativeMark):]
		}
	}
	return args
}
