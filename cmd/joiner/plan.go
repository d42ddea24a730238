package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/scheduler/manifests"
	"github.com/joiner-dev/joiner/coordinator/scheduler/report"
)

func init() { addCommand(newPlanCmd) }

// Exit codes of joiner plan.
const (
	planExitInput         = 1 // some documents could not be used (the plan of the rest is printed)
	planExitUnschedulable = 2 // some pods fit nothing
)

func newPlanCmd(*globals) *cobra.Command {
	var files []string
	var nodesFile string
	var recursive bool
	var maxPods int
	var output *outputFlag
	cmd := &cobra.Command{
		Use:   "plan -f FILE|DIR|- [-R] [-o table|wide|yaml|json|name] [--nodes FILE] [--max-pods N]",
		Short: "Offline: manifests in, the nodes Joiner would launch out (types, zones, price)",
		Long: `plan reads Kubernetes and Karpenter manifests (multi-document YAML; -f takes a file,
- for stdin, or a directory, read like kubectl -f reads one: its *.yaml, *.yml
and *.json files in name order, with -R its subdirectories too) and prints the
NodeClaims Joiner would create for their pods: NodePool, instance type chosen
and candidates, zone, capacity type, pods, cpu and memory used vs allocatable,
and the hourly cost, plus pods that fit nothing and why.

Pods, Deployments, ReplicaSets, StatefulSets, Jobs and CronJobs (one run) give
pending pods; DaemonSets give per-node overhead; NodePools and EC2NodeClasses
may be karpenter.sh/v1 or legacy (v1alpha5 Provisioner, v1beta1), converted as
joiner convert does; Nodes (and Pods bound to them with spec.nodeName) are
existing capacity. Without a NodePool, a default one is used: linux, amd64 or
arm64, on-demand or spot, instance categories c/m/r of generation 3 or later,
with an AL2023 EC2NodeClass. Instance types and prices come from the embedded
catalogue (us-east-1 prices, zones us-east-1a/b/c).

The pods the manifests describe (workloads expanded into their replicas,
bare and bound Pods) are limited by --max-pods; a workload that would pass
the limit is an input error naming the field and its value, and adds no pod.

Exit codes: 0 all placed; 1 some input was invalid (the plan of the rest is
still printed); 2 some pods are unschedulable.`,
		Example: `  joiner plan -f examples/
  joiner plan -f workloads.yaml -o json --nodes nodes.yaml
  # what a Helm release would need, from stdin; every column
  helm template my-app ./chart | joiner plan -f - -o wide
  # a GitOps tree, recursively; the NodeClaims' names only
  joiner plan -R -f clusters/prod/ -o name`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("plan: -f FILE|DIR is required")
			}
			if maxPods <= 0 {
				return fmt.Errorf("plan: --max-pods %d: must be positive", maxPods)
			}
			if err := output.check(); err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			if nodesFile == "-" && slices.Contains(files, "-") {
				return errors.New("plan: --nodes - and -f -: stdin can be read only once; give one of them a file")
			}
			paths := slices.Clone(files)
			if nodesFile != "" {
				paths = append(paths, nodesFile)
			}
			inputs, err := readInputs(paths, recursive, cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			in := make([]manifests.File, len(inputs))
			for i, f := range inputs {
				in[i] = manifests.File{Name: f.Name, Data: f.Data}
			}
			res, errs := manifests.LoadWith(in, manifests.Options{MaxPods: maxPods})
			stderr := cmd.ErrOrStderr()
			for _, w := range res.Warnings {
				fmt.Fprintln(stderr, "warning:", w)
			}
			for _, e := range errs {
				fmt.Fprintln(stderr, "error:", e)
			}
			plan := scheduler.Solve(res.Input)
			out, err := report.Render(plan, output.value)
			if err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			if _, err := cmd.OutOrStdout().Write(out); err != nil {
				return fmt.Errorf("plan: writing output: %w", err)
			}
			switch {
			case len(errs) > 0:
				return &errExitCode{code: planExitInput, err: fmt.Errorf("plan: %d input problem(s), see above", len(errs))}
			case len(plan.Unschedulable) > 0:
				return &errExitCode{code: planExitUnschedulable, err: fmt.Errorf("plan: %d pod(s) unschedulable", len(plan.Unschedulable))}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory (*.yaml, *.yml, *.json) or - for stdin; repeatable")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "read the directories given with -f recursively")
	output = addOutputFlag(cmd, report.Formats...)
	cmd.Flags().StringVar(&nodesFile, "nodes", "", "file with existing Nodes (and Pods bound to them)")
	cmd.Flags().IntVar(&maxPods, "max-pods", manifests.DefaultMaxPods, "most pods the manifests may describe (workloads expanded into their replicas); a workload past it is an input error")
	_ = cmd.MarkFlagFilename("filename", manifestFileExts...)
	_ = cmd.MarkFlagFilename("nodes", manifestFileExts...)
	return cmd
}
