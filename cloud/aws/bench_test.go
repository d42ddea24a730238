package aws_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// BenchmarkLaunch measures one Launch with 60 overrides through the real
// SDK against the sim on loopback (launch template cached).
func BenchmarkLaunch(b *testing.B) {
	e := newEnv(b)
	p := e.newProvider(b, joineraws.Options{Cluster: "bench", KubernetesVersion: sim.DefaultKubernetesVersion, Now: time.Now})
	var cands []cloud.Candidate
	for _, it := range catalog.InstanceTypes(catalog.Options{}) {
		if it.Labels["kubernetes.io/arch"] != "amd64" {
			continue
		}
		for _, o := range it.Offerings {
			cands = append(cands, cloud.Candidate{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType,
				Price: o.Price, ImageID: "ami-0sim2023x86"})
		}
	}
	subnets := map[string]string{"us-east-1a": "subnet-0sim0001", "us-east-1b": "subnet-0sim0002", "us-east-1c": "subnet-0sim0003"}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := strconv.Itoa(i)
		_, err := p.Launch(ctx, cloud.LaunchRequest{LaunchID: "l-" + n, Attempt: 1, Spec: cloud.LaunchSpec{NodeClaim: "nc-" + n,
			NodePool: "default", NodeClass: "default", Candidates: cands, Subnets: subnets,
			SecurityGroupIDs: []string{"sg-0sim0001"}, UserData: []byte("#!/bin/bash\n")}})
		if err != nil {
			b.Fatal(err)
		}
	}
}
