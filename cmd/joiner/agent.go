package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newAgentCmd) }

// newAgentCmd is a placeholder until its issue lands.
func newAgentCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:                "agent",
		Short:              "Run the node agent (DaemonSet pod or systemd service) (not implemented yet)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("agent: %w", errNotImplemented)
		},
	}
}
