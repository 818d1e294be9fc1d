package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
)

func newCompletionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "completion (bash | zsh | fish)",
		Short: "Print a shell completion script for bash, zsh or fish",
		Long: `Print the completion script of a shell. Besides commands and flags it
completes the conversations of the office registry where a command takes
one (<platform>/<conversation-id>, or --conversation) and the modes of
--sandbox. It reads only the registry file: it starts no daemon and no
engine, and with no state dir yet it suggests nothing.

  bash:  source <(hutch completion bash)     (needs bash-completion)
  zsh:   hutch completion zsh > "${fpath[1]}/_hutch"
  fish:  hutch completion fish > ~/.config/fish/completions/hutch.fish`,
		Example:   "  hutch completion bash > /etc/bash_completion.d/hutch",
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errdefs.New(errdefs.ErrInvalid, "Name one shell: bash, zsh or fish")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(g.stdout, true)
			case "zsh":
				return root.GenZshCompletion(g.stdout)
			case "fish":
				return root.GenFishCompletion(g.stdout, true)
			}
			return errdefs.New(errdefs.ErrInvalid, "No completion for "+args[0]+": use bash, zsh or fish")
		},
	}
}

// conversationUse is how a command's usage names a conversation argument.
const conversationUse = "<platform>/<conversation-id>"

// registerCompletions adds dynamic completion to the tree under root:
// conversations where a command's first argument or its --conversation
// flag is one, and modes for --sandbox.
func registerCompletions(g *globals, root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.ValidArgsFunction == nil && firstArgIsConversation(c.Use) {
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				// vault commands name their vault with --user or
				// --container instead of a conversation.
				if len(args) > 0 || flagSet(cmd, "user") || flagSet(cmd, "container") {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return g.completeConversations(toComplete)
			}
		}
		if c.Flags().Lookup("conversation") != nil {
			_ = c.RegisterFlagCompletionFunc("conversation", func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return g.completeConversations(toComplete)
			})
		}
		if c.Flags().Lookup("sandbox") != nil {
			_ = c.RegisterFlagCompletionFunc("sandbox", completeModes)
		}
	}
	walk(root)
}

// firstArgIsConversation: the usage's first argument is a conversation
// ("show <platform>/<conversation-id>", "ls (<platform>/... | --user ID").
func firstArgIsConversation(use string) bool {
	_, rest, _ := strings.Cut(use, " ")
	rest = strings.TrimLeft(rest, "([")
	return strings.HasPrefix(rest, conversationUse)
}

func flagSet(cmd *cobra.Command, name string) bool {
	f := cmd.Flags().Lookup(name)
	return f != nil && f.Changed
}

// completeConversations suggests the registered conversations starting
// with prefix. It reads the registry of an existing state dir and nothing
// else; on any error it suggests nothing.
func (g *globals) completeConversations(prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	dir, _, err := g.probeStateDir()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	recs, err := office.NewRegistry(dir).Offices()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, r := range recs {
		a := office.Address{Platform: r.Platform, ConversationID: r.ConversationID}.String()
		if strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// modeWords are the modes --sandbox completes: whole modes, and the
// prefixes of those that take a target.
var modeWords = []string{"host", "container:", "image:", "cloudflare:", "gondolin:default", "kube:"}

// completeModes suggests the modes starting with toComplete; after a
// prefix that takes a target it leaves the target to the user.
func completeModes(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, m := range modeWords {
		if strings.HasPrefix(m, toComplete) {
			out = append(out, m)
		}
	}
	dir := cobra.ShellCompDirectiveNoFileComp
	for _, m := range out {
		if strings.HasSuffix(m, ":") {
			// A target follows: no space after the prefix.
			dir |= cobra.ShellCompDirectiveNoSpace
		}
	}
	return out, dir
}
