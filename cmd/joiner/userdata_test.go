package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/joiner-dev/joiner/userdata"
)

func examples(name string) string {
	return filepath.Join("..", "..", "userdata", "testdata", "examples", name)
}

func renderCLI(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{"userdata", "render"}, args...))
	err := root.Execute()
	return out.Bytes(), err
}

func TestUserdataRenderCLI(t *testing.T) {
	cluster := []string{"--cluster-name", "demo", "--endpoint", "https://demo.example",
		"--ca-file", examples("ca.crt"), "--service-cidr", "10.100.0.0/16"}
	// The Joiner hook is rendered only for a Joiner-built image
	// (--joiner-image) whose class does not opt out; a stock image joins
	// without it.
	cases := []struct {
		nodeclass, family, instanceType string
		joinerImage                     bool
		maxPods                         int32
		agent                           bool
	}{
		// m5.large: 2 vCPU. The class's maxPods 20 is rendered as given,
		// next to podsPerCore 2 (the kubelet applies the lower, 4), as
		// Karpenter renders it.
		{"nodeclass-al2023.yaml", userdata.FamilyAL2023, "m5.large", true, 20, true},
		{"nodeclass-al2023.yaml", userdata.FamilyAL2023, "m5.large", false, 20, false},
		{"nodeclass-bottlerocket.yaml", userdata.FamilyBottlerocket, "m5.large", true, 29, true},
		// The Bottlerocket example vouches for its bootstrap container
		// (joiner.io/agent: "true"), whatever the image.
		{"nodeclass-bottlerocket.yaml", userdata.FamilyBottlerocket, "m5.large", false, 29, true},
		{"nodeclass-al2-noagent.yaml", userdata.FamilyAL2, "", true, 110, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/joiner-image=%t", c.nodeclass, c.joinerImage), func(t *testing.T) {
			args := append([]string{"--nodeclass", examples(c.nodeclass), "--nodepool", examples("nodepool.yaml")}, cluster...)
			if c.instanceType != "" {
				args = append(args, "--instance-type", c.instanceType)
			}
			if c.joinerImage {
				args = append(args, "--joiner-image")
			}
			out, err := renderCLI(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			facts, err := userdata.Parse(c.family, out)
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, out)
			}
			if facts.MaxPods != c.maxPods || facts.Agent != c.agent || facts.ClusterDNS != "10.100.0.10" {
				t.Errorf("facts = %+v", facts)
			}
			if facts.Labels["karpenter.sh/nodepool"] != "general" || facts.Labels["karpenter.sh/capacity-type"] != "spot" ||
				facts.Labels["team"] != "platform" {
				t.Errorf("labels = %v", facts.Labels)
			}
			b64, err := renderCLI(t, append(args, "--base64")...)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b64)))
			if err != nil || !bytes.Equal(dec, out) {
				t.Errorf("--base64 output does not decode to the raw output: %v", err)
			}
		})
	}
}

func TestUserdataRenderCLIErrors(t *testing.T) {
	np := examples("nodepool.yaml")
	for name, args := range map[string][]string{
		"no cidr for AL2023":    {"--nodeclass", examples("nodeclass-al2023.yaml"), "--nodepool", np, "--cluster-name", "a", "--endpoint", "b"},
		"no cluster name":       {"--nodeclass", examples("nodeclass-al2023.yaml"), "--nodepool", np, "--service-cidr", "10.0.0.0/16"},
		"wrong kind":            {"--nodeclass", np, "--nodepool", np},
		"unknown type":          {"--nodeclass", examples("nodeclass-al2023.yaml"), "--nodepool", np, "--instance-type", "m9.huge"},
		"missing file":          {"--nodeclass", examples("nope.yaml"), "--nodepool", np},
		"missing nodepool flag": {"--nodeclass", examples("nodeclass-al2023.yaml")},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := renderCLI(t, args...); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}
