package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newBootstrapCmd) }

// newBootstrapCmd is a placeholder until its issue lands.
func newBootstrapCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:                "bootstrap",
		Short:              "First-boot step that rendered user data runs on a new instance (not implemented yet)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("bootstrap: %w", errNotImplemented)
		},
	}
}
