package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newSimCmd) }

// newSimCmd is a placeholder until its issue lands.
func newSimCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:                "sim",
		Short:              "Run a simulated EC2 region on 127.0.0.1 (not implemented yet)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("sim: %w", errNotImplemented)
		},
	}
}
