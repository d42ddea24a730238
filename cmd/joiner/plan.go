package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newPlanCmd) }

// newPlanCmd is a placeholder until its issue lands.
func newPlanCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:                "plan",
		Short:              "Offline: manifests in, the nodes Joiner would launch out (not implemented yet)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("plan: %w", errNotImplemented)
		},
	}
}
