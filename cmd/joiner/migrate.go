package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/migrate"
)

func init() { addCommand(newMigrateCmd) }

// newMigrateCmd is `joiner migrate`: checks for a switch from Karpenter.
func newMigrateCmd(*globals) *cobra.Command {
	cmd := &cobra.Command{Use: "migrate", Short: "Check a cluster running Karpenter before switching it to Joiner",
		Example: `  joiner migrate check --context prod`}
	cmd.AddCommand(newMigrateCheckCmd())
	return cmd
}

func newMigrateCheckCmd() *cobra.Command {
	var caFile string
	var output *outputFlag
	var kf *kubeFlags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Say what Joiner will do with every NodePool, EC2NodeClass and NodeClaim: adopt, reject or replace as drifted",
		Long: `check reads the NodePools, EC2NodeClasses, NodeClaims and Nodes of a live cluster (read-only)
and judges each with the validation and drift code the coordinator runs:

  Adopt   Joiner takes it over as it is (NodeClaims: no drift, no relaunch)
  Reject  Joiner marks it invalid and does not use it (REASON and DETAIL say why)
  Drift   Joiner replaces the NodeClaim, paced by its NodePool's budgets
  Ignore  not Joiner's to manage

Subnet and security-group drift need the EC2 instances and are judged only by the running
coordinator. The exit code is 0 when nothing is rejected and 3 when something is.`,
		Example: `  # before installing Joiner, against the cluster Karpenter runs on
  joiner migrate check --kubeconfig ~/.kube/config
  joiner migrate check --context prod -o json | jq '.[] | select(.action != "Adopt")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.check(); err != nil {
				return fmt.Errorf("migrate check: %w", err)
			}
			rc, err := kf.restConfig()
			if err != nil {
				return fmt.Errorf("migrate check: %w", err)
			}
			clients, err := kube.NewClients(rc)
			if err != nil {
				return fmt.Errorf("migrate check: %w", err)
			}
			ctx := cmd.Context()
			in := migrate.Input{Now: time.Now()}
			if in.NodePools, err = kube.List[karpv1.NodePool](ctx, clients, kube.NodePoolsGVR); err != nil {
				return fmt.Errorf("migrate check: %w", err)
			}
			if in.NodeClasses, err = kube.List[awsv1.EC2NodeClass](ctx, clients, kube.EC2NodeClassesGVR); err != nil {
				return fmt.Errorf("migrate check: %w", err)
			}
			if in.NodeClaims, err = kube.List[karpv1.NodeClaim](ctx, clients, kube.NodeClaimsGVR); err != nil {
				return fmt.Errorf("migrate check: %w", err)
			}
			nodes, err := clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("migrate check: listing nodes: %w", err)
			}
			for i := range nodes.Items {
				in.Nodes = append(in.Nodes, &nodes.Items[i])
			}
			if in.CABundle, err = clusterCABundle(rc, caFile); err != nil {
				return fmt.Errorf("migrate check: %w", err)
			}
			findings := migrate.Check(in)
			if err := printFindings(cmd.OutOrStdout(), findings, output.value); err != nil {
				return err
			}
			for _, f := range findings {
				if f.Action == migrate.Reject {
					return &errExitCode{code: 3, err: errors.New("migrate check: some objects would be rejected")}
				}
			}
			return nil
		},
	}
	kf = addKubeFlags(cmd, "")
	fl := cmd.Flags()
	fl.StringVar(&caFile, "cluster-ca-file", "", "cluster CA bundle nodes are given (empty: the kubeconfig's, as Karpenter takes it)")
	_ = cmd.MarkFlagFilename("cluster-ca-file")
	output = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

func printFindings(w io.Writer, fs []migrate.Finding, output string) error {
	if output != outTable {
		if fs == nil {
			fs = []migrate.Finding{}
		}
		return printData(w, fs, output)
	}
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("Kind", false), column("Name", false), column("Action", false), column("Reason", false), column("Detail", false)}}
	for _, f := range fs {
		t.Rows = append(t.Rows, row(f.Kind, f.Name, f.Action, dash(f.Reason), dash(f.Detail)))
	}
	return printTable(w, t, false)
}
