package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasAnExample: `joiner X --help` shows how X is used, for
// every command a user can run (cobra's help and completion included).
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no Example", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	root := newRootCmd()
	for _, c := range root.Commands() {
		walk(c)
	}
	if n < 15 {
		t.Fatalf("walked %d commands: the tree is not what this test expects", n)
	}
}

// complete runs cobra's completion request, as the shell scripts do, and
// returns the candidates (without descriptions).
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{cobra.ShellCompNoDescRequestCmd}, args...))
	if err := root.Execute(); err != nil {
		t.Fatalf("completing %q: %v", args, err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(l, ":") && l != "" {
			got = append(got, l)
		}
	}
	return got
}

func TestFlagValueCompletion(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- {name: prod, cluster: {server: "https://127.0.0.1:1"}}
- {name: staging, cluster: {server: "https://127.0.0.1:1"}}
users:
- {name: admin, user: {token: x}}
contexts:
- {name: prod-admin, context: {cluster: prod, user: admin}}
- {name: staging-admin, context: {cluster: staging, user: admin}}
current-context: prod-admin
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"status", "-o", ""}, "table wide json yaml name"},
		{[]string{"plan", "-o", ""}, "table wide yaml json name"},
		{[]string{"convert", "-o", ""}, "yaml json name"},
		{[]string{"migrate", "check", "-o", ""}, "table json yaml"},
		{[]string{"version", "-o", ""}, "table json yaml"},
		{[]string{"status", "--log-level", ""}, "debug info warn error"},
		{[]string{"plan", "--log-format", ""}, "json console"},
		{[]string{"status", "--kubeconfig", kubeconfig, "--context", ""}, "prod-admin staging-admin"},
		{[]string{"migrate", "check", "--kubeconfig", kubeconfig, "--cluster", ""}, "prod staging"},
		{[]string{"status", "--scheme", ""}, "https http"},
		{[]string{"userdata", "render", "--instance-type", "m5.2xl"}, "m5.2xlarge"},
		{[]string{"userdata", "render", "--capacity-type", ""}, "on-demand spot reserved"},
		{[]string{"agent", "--kinds", ""}, "spot-interruption rebalance-recommendation scheduled-event asg-lifecycle"},
		{[]string{"completion", ""}, "bash fish powershell zsh"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got := strings.Join(complete(t, tt.args...), " ")
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"completion", shell})
		if err := root.Execute(); err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
		if !strings.Contains(out.String(), "joiner") || out.Len() < 1000 {
			t.Errorf("%s: script of %d bytes", shell, out.Len())
		}
	}
}
