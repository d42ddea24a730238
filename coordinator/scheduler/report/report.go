// Package report renders a scheduler.Plan for people (table, wide) and
// programs (JSON, YAML, name), as kubectl prints its -o formats. Renderers
// are pure and deterministic.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// Formats Render accepts, the default first.
var Formats = []string{"table", "wide", "yaml", "json", "name"}

// Render writes plan in format: table (kubectl's columns), wide (also the
// NodeClass and every candidate type), yaml, json, or name (a
// nodeclaim.karpenter.sh/NAME line per planned NodeClaim).
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
		return table(plan, false)
	case "wide":
		return table(plan, true)
	case "name":
		var b bytes.Buffer
		for _, nc := range plan.NodeClaims {
			fmt.Fprintf(&b, "nodeclaim.karpenter.sh/%s\n", nc.Name)
		}
		return b.Bytes(), nil
	}
	return nil, fmt.Errorf("unknown output format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

func table(plan *scheduler.Plan, wide bool) ([]byte, error) {
	var b bytes.Buffer
	if len(plan.NodeClaims) > 0 {
		t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "NodeClaim", Type: "string"}, {Name: "NodePool", Type: "string"}, {Name: "NodeClass", Type: "string", Priority: 1},
			{Name: "Instance Type", Type: "string"}, {Name: "Zone", Type: "string"}, {Name: "Capacity", Type: "string"},
			{Name: "Price/h", Type: "string"}, {Name: "Pods", Type: "integer"}, {Name: "CPU Used/Alloc", Type: "string"},
			{Name: "Memory Used/Alloc", Type: "string"}, {Name: "Candidates", Type: "string"},
		}}
		for _, nc := range plan.NodeClaims {
			cands := candidates(nc.InstanceTypes)
			if wide {
				cands = strings.Join(nc.InstanceTypes, ",")
			}
			t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{nc.Name, nc.NodePool, nc.NodeClass, nc.InstanceType, nc.Zone, nc.CapacityType,
				fmt.Sprintf("$%.4f", nc.Price), len(nc.Pods), usage(nc.Requests, nc.Allocatable, corev1.ResourceCPU),
				usage(nc.Requests, nc.Allocatable, corev1.ResourceMemory), cands}})
		}
		if err := printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(t, &b); err != nil {
			return nil, fmt.Errorf("printing the plan: %w", err)
		}
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
	return b.Bytes(), nil
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
