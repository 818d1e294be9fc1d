package cli

import "github.com/spf13/cobra"

// mcpCmd is `hutch project mcp` (being written).
func (p *projectCmd) mcpCmd() *cobra.Command {
	return &cobra.Command{Use: "mcp", Short: "Serve MCP tools scoped to the project's sandbox", Hidden: true}
}
