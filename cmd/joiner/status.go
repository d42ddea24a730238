package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newStatusCmd) }

// newStatusCmd is a placeholder until its issue lands.
func newStatusCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:                "status",
		Short:              "Show raft peers, leader, launch intents and instances (not implemented yet)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("status: %w", errNotImplemented)
		},
	}
}
