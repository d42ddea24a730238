package harness

import (
	"slices"
	"strings"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"

	"github.com/joiner-dev/joiner/cloud/sim"
)

func TestDuplicates(t *testing.T) {
	inst := func(id, state, launch, claim string) sim.InstanceInfo {
		return sim.InstanceInfo{ID: id, State: state, Tags: map[string]string{karpv1.TagLaunchID: launch, karpv1.TagNodeClaim: claim}}
	}
	tests := []struct {
		name string
		in   []sim.InstanceInfo
		want []string
	}{
		{"none", nil, nil},
		{"distinct", []sim.InstanceInfo{inst("i-1", "running", "a", "nc-a"), inst("i-2", "pending", "b", "nc-b")}, nil},
		{"terminated retry is no duplicate", []sim.InstanceInfo{inst("i-1", "terminated", "a", "nc-a"), inst("i-2", "running", "a", "nc-a")}, nil},
		{"same launch id twice", []sim.InstanceInfo{inst("i-1", "running", "a", "nc-a"), inst("i-2", "pending", "a", "nc-a")},
			[]string{"launch-id a has 2 instances: [i-1 i-2]", "nodeclaim nc-a has 2 instances: [i-1 i-2]"}},
		{"two launches for one claim", []sim.InstanceInfo{inst("i-1", "running", "a", "nc-a"), inst("i-2", "running", "b", "nc-a")},
			[]string{"nodeclaim nc-a has 2 instances: [i-1 i-2]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (&State{Instances: tt.in}).Duplicates()
			if !slices.Equal(got, tt.want) {
				t.Errorf("Duplicates() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStateSummary(t *testing.T) {
	price := Price("m5.large", "us-east-1a", "on-demand")
	if price <= 0 {
		t.Fatalf("Price(m5.large, us-east-1a, on-demand) = %v, want > 0", price)
	}
	if p := Price("no-such.type", "us-east-1a", "on-demand"); p != 0 {
		t.Errorf("Price of an unknown type = %v, want 0", p)
	}
	s := &State{Pods: 3, Pending: 1, Bound: 2,
		NodeClaims: []NodeClaimInfo{{Name: "a", Launched: true, Registered: true}, {Name: "b", Launched: true, Deleting: true}},
		Nodes: []NodeInfo{{Name: "n1", InstanceType: "m5.large", CapacityType: "on-demand", Price: price},
			{Name: "n2", InstanceType: "m5.large", CapacityType: "on-demand", Price: price, Unschedulable: true}},
		Instances: []sim.InstanceInfo{{ID: "i-1", State: "running"}, {ID: "i-2", State: "terminated"}}}
	if got, want := s.Types(), "m5.large/on-demand x2"; got != want {
		t.Errorf("Types() = %q, want %q", got, want)
	}
	line := s.Line()
	for _, want := range []string{"pods 3: pending 1, bound 2, running 0", "nodeclaims 2 (launched 2, registered 1, initialized 0, deleting 1)",
		"nodes 2 (cordoned 1)", "instances 1"} {
		if !strings.Contains(line, want) {
			t.Errorf("Line() = %q, want it to contain %q", line, want)
		}
	}
}

func TestFreePortOnEveryAddress(t *testing.T) {
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	port, err := freePort(ips)
	if err != nil {
		t.Skipf("loopback aliases unavailable: %v", err)
	}
	if port <= 0 {
		t.Fatalf("freePort = %d", port)
	}
}
