package main

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-dev/joiner/cloud/catalog"
)

// completionTimeout bounds a completion that asks the cluster.
const completionTimeout = 5 * time.Second

// manifestFileExts are the files -f completes, as kubectl -f reads them.
var manifestFileExts = []string{"yaml", "yml", "json"}

// setupCompletion adds the completion command (bash, zsh, fish,
// powershell), the values of the root's flags, and examples for cobra's
// own commands.
func setupCompletion(root *cobra.Command) {
	root.AddCommand(newCompletionCmd())
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"json", "console"}, cobra.ShellCompDirectiveNoFileComp))
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			c.Example = "  joiner help plan\n  joiner help migrate check"
		}
	}
}

// newCompletionCmd is `joiner completion SHELL`: cobra's scripts, which
// complete commands, flags and flag values (output formats, log levels,
// kubeconfig contexts, namespaces, coordinator pods, instance types ...).
func newCompletionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "completion SHELL",
		Short: "Print the shell completion script (bash, zsh, fish or powershell)",
		Long: `completion prints a script that completes joiner's commands, flags and flag values
(output formats, log levels, kubeconfig contexts, clusters and users, namespaces, coordinator
Services and pods, instance types of the embedded catalogue, manifest files) in your shell.`,
		Example: `  # bash (needs the bash-completion package)
  source <(joiner completion bash)
  joiner completion bash > /etc/bash_completion.d/joiner
  # zsh
  joiner completion zsh > "${fpath[1]}/_joiner"
  # fish
  joiner completion fish > ~/.config/fish/completions/joiner.fish`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	shells := []struct {
		name, example string
		gen           func(c *cobra.Command) error
	}{
		{"bash", "  source <(joiner completion bash)", func(c *cobra.Command) error { return c.Root().GenBashCompletionV2(c.OutOrStdout(), true) }},
		{"zsh", `  joiner completion zsh > "${fpath[1]}/_joiner"`, func(c *cobra.Command) error { return c.Root().GenZshCompletion(c.OutOrStdout()) }},
		{"fish", "  joiner completion fish | source", func(c *cobra.Command) error { return c.Root().GenFishCompletion(c.OutOrStdout(), true) }},
		{"powershell", "  joiner completion powershell | Out-String | Invoke-Expression",
			func(c *cobra.Command) error { return c.Root().GenPowerShellCompletionWithDesc(c.OutOrStdout()) }},
	}
	for _, s := range shells {
		cmd.AddCommand(&cobra.Command{
			Use:               s.name,
			Short:             "Print the " + s.name + " completion script",
			Example:           s.example,
			Args:              cobra.NoArgs,
			ValidArgsFunction: cobra.NoFileCompletions,
			RunE:              func(c *cobra.Command, _ []string) error { return s.gen(c) },
		})
	}
	return cmd
}

// registerKubeCompletions completes kubectl's connection flags: contexts,
// clusters and users from the kubeconfig, namespaces from the cluster.
func registerKubeCompletions(cmd *cobra.Command, k *kubeFlags) {
	fromConfig := func(names func(contexts, clusters, users []string) []string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			raw, err := k.loader().RawConfig()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return names(sortedKeys(raw.Contexts), sortedKeys(raw.Clusters), sortedKeys(raw.AuthInfos)), cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = cmd.RegisterFlagCompletionFunc("context", fromConfig(func(c, _, _ []string) []string { return c }))
	_ = cmd.RegisterFlagCompletionFunc("cluster", fromConfig(func(_, c, _ []string) []string { return c }))
	_ = cmd.RegisterFlagCompletionFunc("user", fromConfig(func(_, _, u []string) []string { return u }))
	_ = cmd.RegisterFlagCompletionFunc("namespace", func(c *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		rc, err := k.restConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		rc.Timeout = completionTimeout
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(c.Context(), completionTimeout)
		defer cancel()
		l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, ns := range l.Items {
			if strings.HasPrefix(ns.Name, prefix) {
				out = append(out, ns.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.MarkFlagFilename("kubeconfig")
}

// completeInstanceTypes completes instance types of the embedded catalogue.
func completeInstanceTypes(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, e := range catalog.Entries() {
		if strings.HasPrefix(e.Name, prefix) {
			out = append(out, e.Name)
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
