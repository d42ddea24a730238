package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newUserdataCmd) }

// newUserdataCmd is a placeholder until its issue lands.
func newUserdataCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:                "userdata",
		Short:              "Render the user data an EC2NodeClass and NodePool produce (not implemented yet)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("userdata: %w", errNotImplemented)
		},
	}
}
