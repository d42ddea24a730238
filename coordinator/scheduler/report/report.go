// Package report renders a scheduler.Plan for people (table) and programs
// (JSON, YAML). Renderers are pure and deterministic.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// Formats Render accepts.
var Formats = []string{"table", "yaml", "json"}

// Render writes plan in format (table, yaml or json).
func Render(plan *scheduler.Plan, format string) ([]byte, error) {
	switch format {
	case "json":
		b, err := json.MarshalIndent(plan, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encoding plan: %w", err)
		}
		return append(b, '\n'), nil
	case "yaml":
		b, err := yaml.Marshal(plan)
		if err != nil {
			return nil, fmt.Errorf("encoding plan: %w", err)
		}
		return b, nil
	case "table", "":
		return table(plan), nil
	}
	return nil, fmt.Errorf("unknown output format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

func table(plan *scheduler.Plan) []byte {
	var b bytes.Buffer
	if len(plan.NodeClaims) > 0 {
		w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NODECLAIM\tNODEPOOL\tINSTANCE TYPE\tZONE\tCAPACITY\tPRICE/H\tPODS\tCPU USED/ALLOC\tMEMORY USED/ALLOC\tCANDIDATES")
		for _, nc := range plan.NodeClaims {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t$%.4f\t%d\t%s\t%s\t%s\n", nc.Name, nc.NodePool, nc.InstanceType, nc.Zone, nc.CapacityType, nc.Price,
				len(nc.Pods), usage(nc.Requests, nc.Allocatable, corev1.ResourceCPU), usage(nc.Requests, nc.Allocatable, corev1.ResourceMemory), candidates(nc.InstanceTypes))
		}
		w.Flush()
		b.WriteString("\n")
		for _, nc := range plan.NodeClaims {
			fmt.Fprintf(&b, "%s pods: %s\n", nc.Name, strings.Join(nc.Pods, ", "))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Total: %d new NodeClaims, $%.4f per hour\n", len(plan.NodeClaims), plan.TotalPrice)
	if len(plan.Nominations) > 0 {
		fmt.Fprintf(&b, "\nNominated to existing nodes (%d):\n", len(plan.Nominations))
		for _, n := range plan.Nominations {
			fmt.Fprintf(&b, "  %s -> %s\n", n.Pod, n.Node)
		}
	}
	if len(plan.Unschedulable) > 0 {
		fmt.Fprintf(&b, "\nUnschedulable pods (%d):\n", len(plan.Unschedulable))
		for _, u := range plan.Unschedulable {
			fmt.Fprintf(&b, "  %s: %s\n", u.Pod, u.Reason)
		}
	}
	for _, p := range plan.NodePools {
		if len(p.Messages) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\nNodePool %s (%d instance types):\n", p.NodePool, p.InstanceTypes)
		for _, m := range p.Messages {
			fmt.Fprintf(&b, "  %s\n", m)
		}
	}
	return b.Bytes()
}

func usage(req, alloc corev1.ResourceList, r corev1.ResourceName) string {
	u, a := req[r], alloc[r]
	return qty(u, r) + "/" + qty(a, r)
}

func qty(q resource.Quantity, r corev1.ResourceName) string {
	if r == corev1.ResourceMemory {
		return fmt.Sprintf("%.1fGi", float64(q.Value())/(1<<30))
	}
	return fmt.Sprintf("%.2f", float64(q.MilliValue())/1000)
}

func candidates(types []string) string {
	const show = 3
	if len(types) <= show {
		return strings.Join(types, ",")
	}
	return fmt.Sprintf("%s,... (%d)", strings.Join(types[:show], ","), len(types))
}
