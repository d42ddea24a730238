// Command joiner is Joiner's one binary: coordinator, agent, bootstrap and the
// offline tools, as subcommands.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	// The Mozilla roots Go falls back to where the system has none (the
	// FROM-scratch image): AWS's endpoints are checked against them. A
	// system bundle, a mounted one or SSL_CERT_FILE takes precedence.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/joiner-dev/joiner/internal/logging"
)

// globals are the flags every subcommand shares.
type globals struct {
	logLevel  string
	logFormat string
	log       *zap.Logger
}

// logger returns the root logger, building it from the flags on first use.
func (g *globals) logger() (*zap.Logger, error) {
	if g.log != nil {
		return g.log, nil
	}
	l, err := logging.New(logging.Options{Level: g.logLevel, Format: g.logFormat})
	if err != nil {
		return nil, err
	}
	logging.RouteKlog(l) // client-go's klog lines in the same format
	g.log = l
	return l, nil
}

// commandFactories are registered by each subcommand's file in init.
var commandFactories []func(*globals) *cobra.Command

func addCommand(f func(*globals) *cobra.Command) { commandFactories = append(commandFactories, f) }

// errExitCode carries a specific exit code without printing another message.
type errExitCode struct {
	code int
	err  error
}

func (e *errExitCode) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}
func (e *errExitCode) Unwrap() error { return e.err }

// errNotImplemented is returned by subcommands that are not built yet.
var errNotImplemented = errors.New("not implemented yet")

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "joiner",
		Short:         "Joiner provisions right-sized EC2 nodes for pending Kubernetes pods",
		Long:          "Joiner provisions Kubernetes nodes on AWS. It serves the Karpenter v1 API (NodePool, NodeClaim, EC2NodeClass)\nwith a raft-replicated coordinator and an agent on every node.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "json", "log format: json or console")
	for _, f := range commandFactories {
		root.AddCommand(f(g))
	}
	setupCompletion(root)
	return root
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ec *errExitCode
	if errors.As(err, &ec) {
		if ec.err != nil {
			fmt.Fprintln(os.Stderr, "joiner:", ec.err)
		}
		return ec.code
	}
	fmt.Fprintln(os.Stderr, "joiner:", err)
	return 1
}
