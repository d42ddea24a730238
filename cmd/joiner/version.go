package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// Set by the linker: -X main.version=... -X main.commit=...
var (
	version = "dev"
	commit  = "unknown"
)

func init() { addCommand(newVersionCmd) }

func newVersionCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version and commit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "joiner %s (commit %s, %s)\n", version, commit, runtime.Version())
			return err
		},
	}
}
