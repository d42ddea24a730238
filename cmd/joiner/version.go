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

// versionInfo is `joiner version -o json|yaml`, named as kubectl's.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func newVersionCmd(*globals) *cobra.Command {
	var output *outputFlag
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print version and commit",
		Example: "  joiner version\n  joiner version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.check(); err != nil {
				return fmt.Errorf("version: %w", err)
			}
			if output.value != outTable {
				return printData(cmd.OutOrStdout(), versionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(),
					Platform: runtime.GOOS + "/" + runtime.GOARCH}, output.value)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "joiner %s (commit %s, %s)\n", version, commit, runtime.Version())
			return err
		},
	}
	output = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}
