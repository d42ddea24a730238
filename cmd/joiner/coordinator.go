package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newCoordinatorCmd) }

// newCoordinatorCmd is a placeholder until its issue lands.
func newCoordinatorCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:                "coordinator",
		Short:              "Run a coordinator replica (StatefulSet pod) (not implemented yet)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("coordinator: %w", errNotImplemented)
		},
	}
}
