package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/coordinator/cluster"
)

func init() { addCommand(newStatusCmd) }

// newStatusCmd asks one coordinator replica for its view (GET /v1/status)
// and prints raft peers with the leader marked, then launch intents and
// instances. A follower answers from its own FSM, which may lag the leader.
func newStatusCmd(*globals) *cobra.Command {
	var addr, tlsDir, output string
	var all bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show raft peers, leader, launch intents and instances of a coordinator",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("status: -o %q: want table or json", output)
			}
			client, err := statusClient(addr, tlsDir)
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			st, err := api.FetchStatus(ctx, client, addr)
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return renderStatus(cmd.OutOrStdout(), st, all)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "https://127.0.0.1:8080", "coordinator HTTP API base URL (any replica)")
	fl.StringVar(&tlsDir, "tls-dir", "/var/lib/joiner/tls", "directory with tls.crt, tls.key and ca.crt: the client certificate the coordinator keeps there for tools run in its pod (https only)")
	fl.StringVarP(&output, "output", "o", "table", "output format: table or json")
	fl.BoolVar(&all, "all", false, "also list cancelled intents and terminated or lost instances")
	fl.DurationVar(&timeout, "timeout", 10*time.Second, "give up on the coordinator after this long")
	return cmd
}

// statusClient presents the certificate in dir to an https address (the
// files the coordinator keeps for tools, see cluster.TLS.WriteFiles).
func statusClient(addr, dir string) (*http.Client, error) {
	if !strings.HasPrefix(addr, "https://") {
		return &http.Client{}, nil
	}
	t, err := cluster.LoadTLS(cluster.TLSFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		CAFile: filepath.Join(dir, "ca.crt")})
	if err != nil {
		return nil, fmt.Errorf("--tls-dir %s: %w", dir, err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: t.HTTPClientConfig()}}, nil
}

// renderStatus prints the tables (pure: the same status, the same text).
func renderStatus(w io.Writer, st api.Status, all bool) error {
	role := "follower: its view may lag the leader"
	if st.ServedByLeader {
		role = "leader"
	}
	fmt.Fprintf(w, "Served by %s (%s), applied index %d, last index %d, term %d\n\n",
		st.ServedBy, role, st.Raft.AppliedIndex, st.Raft.LastIndex, st.Raft.Term)
	if st.Cluster != nil {
		renderCluster(w, st.Cluster)
	}

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tADDRESS\tSUFFRAGE\tROLE")
	for _, p := range st.Raft.Peers {
		r := ""
		switch {
		case p.Leader:
			r = "leader *"
		case p.Voter:
			r = "follower"
		default:
			r = "non-voter"
		}
		if p.ID == st.ServedBy {
			r += " (this replica)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.ID, p.Address, p.Suffrage, r)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if st.Raft.LeaderID == "" {
		fmt.Fprintln(w, "no leader known to this replica")
	}

	intents := 0
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INTENT\tNODECLAIM\tNODEPOOL\tSTATE\tATTEMPT\tINSTANCE\tPODS\tINSTANCE TYPES")
	for _, in := range st.Intents {
		if !all && in.State == "cancelled" {
			continue
		}
		intents++
		types := strings.Join(in.InstanceTypes, ",")
		if len(in.InstanceTypes) > 3 {
			types = fmt.Sprintf("%s and %d more", strings.Join(in.InstanceTypes[:3], ","), len(in.InstanceTypes)-3)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\n", in.ID, dash(in.NodeClaim), dash(in.NodePool), in.State, in.Attempt,
			dash(in.InstanceID), in.Pods, dash(types))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if intents == 0 {
		fmt.Fprintln(w, "no launch intents")
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tTYPE\tZONE\tCAPACITY\tPRICE/H\tSTATE\tNODE")
	var total float64
	byType := map[string]int{}
	shown := 0
	for _, i := range st.Instances {
		live := i.State != "terminated" && i.State != "lost"
		if live {
			total += i.Price
			byType[i.InstanceType]++
		}
		if !all && !live {
			continue
		}
		shown++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%s\t%s\n", i.ID, i.InstanceType, i.Zone, i.CapacityType, i.Price, i.State, dash(i.Node))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shown == 0 {
		fmt.Fprintln(w, "no instances")
	}
	types := make([]string, 0, len(byType))
	for t, n := range byType {
		types = append(types, fmt.Sprintf("%s x%d", t, n))
	}
	sort.Strings(types)
	live := 0
	for _, n := range byType {
		live += n
	}
	fmt.Fprintf(w, "%d live instance(s)", live)
	if len(types) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(types, ", "))
	}
	fmt.Fprintf(w, ", $%.4f/hour\n", total)

	pending := 0
	for _, t := range st.Terminations {
		if t.State != "done" {
			pending++
		}
	}
	if pending > 0 || len(st.UnhandledInterruptions) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PENDING\tINSTANCE\tDETAIL")
		for _, t := range st.Terminations {
			if t.State != "done" {
				fmt.Fprintf(tw, "termination %s\t%s\t%s\n", t.ID, t.InstanceID, t.Reason)
			}
		}
		for _, r := range st.UnhandledInterruptions {
			fmt.Fprintf(tw, "interruption %s\t%s\t%s, notice %s\n", r.ID, r.InstanceID, r.Kind, r.NoticeTime.UTC().Format(time.RFC3339))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// renderCluster prints what new nodes are told about the cluster, and
// the discovery's error.
func renderCluster(w io.Writer, c *api.ClusterFacts) {
	fmt.Fprintf(w, "Cluster %s: Kubernetes %s, endpoint %s, service CIDR %s (cluster DNS %s, %s)", c.Name, dash(c.KubernetesVersion),
		dash(c.Endpoint), dash(c.ServiceCIDR), dash(c.ClusterDNS), dash(c.IPFamily))
	if c.DiscoveredAt != nil {
		fmt.Fprintf(w, ", discovered %s", c.DiscoveredAt.UTC().Format(time.RFC3339))
	}
	if len(c.Overridden) > 0 {
		fmt.Fprintf(w, ", given: %s", strings.Join(c.Overridden, ", "))
	}
	fmt.Fprintln(w)
	if c.Error != "" {
		fmt.Fprintf(w, "Cluster discovery: %s\n", c.Error)
	}
	fmt.Fprintln(w)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
