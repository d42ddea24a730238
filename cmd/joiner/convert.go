package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newConvertCmd) }

// newConvertCmd is a placeholder until its issue lands.
func newConvertCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:                "convert",
		Short:              "Convert legacy Karpenter manifests (v1alpha5, v1beta1) to v1 (not implemented yet)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("convert: %w", errNotImplemented)
		},
	}
}
