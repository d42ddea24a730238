package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func runPlan(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"plan"}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestPlanExamples(t *testing.T) {
	out, err := runPlan(t, "-f", filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatalf("plan examples: %v\n%s", err, out)
	}
	if !strings.Contains(out, "default/inflate-4") || !strings.Contains(out, "per hour") {
		t.Fatalf("plan does not show the inflate pods and cost:\n%s", out)
	}
	again, _ := runPlan(t, "-f", filepath.Join("..", "..", "examples"))
	if again != out {
		t.Fatal("two runs of plan differ")
	}
	for _, f := range []string{"json", "yaml"} {
		if _, err := runPlan(t, "-f", filepath.Join("..", "..", "examples", "mixed"), "-o", f); err != nil {
			t.Fatalf("-o %s: %v", f, err)
		}
	}
}

func TestPlanExitCodes(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers: [{name: c, image: x, resources: {requests: {cpu: \"5000\"}}}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec:\n  containers: [{name: c, image: x}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runPlan(t, "-f", big)
	var ec *errExitCode
	if !errors.As(err, &ec) || ec.code != planExitUnschedulable {
		t.Fatalf("want exit code %d, got %v", planExitUnschedulable, err)
	}
	if !strings.Contains(out, "default/big:") || !strings.Contains(out, "default/ok") {
		t.Fatalf("plan of the rest or the reason missing:\n%s", out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Gizmo\nmetadata: {name: g}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runPlan(t, "-f", bad); !errors.As(err, &ec) || ec.code != planExitInput {
		t.Fatalf("want exit code %d, got %v", planExitInput, err)
	}
}

// TestPlanMaxPods: a workload past --max-pods is an input error naming the
// field and value, decided before its pods are made; the rest is planned.
func TestPlanMaxPods(t *testing.T) {
	deployment := func(name string, replicas int) string {
		return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s}\nspec:\n  replicas: %d\n  selector: {matchLabels: {app: %[1]s}}\n"+
			"  template:\n    metadata: {labels: {app: %[1]s}}\n    spec:\n      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]\n", name, replicas)
	}
	tests := []struct {
		name       string
		manifests  string
		args       []string
		wantCode   int    // 0: success
		wantErr    string // in the error returned
		wantStderr string
		wantOut    string
	}{
		{
			name:       "a million replicas",
			manifests:  deployment("x", 1_000_000) + "---\n" + deployment("small", 1),
			wantCode:   planExitInput,
			wantStderr: "Deployment default/x: spec.replicas 1000000: more than the 100000 pods joiner plan simulates (--max-pods)",
			wantOut:    "default/small-0",
		},
		{
			name:      "Karpenter's benchmark size",
			manifests: deployment("x", 20_000),
			wantOut:   "default/x-19999",
		},
		{
			name:       "--max-pods lower",
			manifests:  deployment("x", 21),
			args:       []string{"--max-pods", "20"},
			wantCode:   planExitInput,
			wantStderr: "Deployment default/x: spec.replicas 21: more than the 20 pods joiner plan simulates (--max-pods)",
		},
		{
			name:      "--max-pods at the count",
			manifests: deployment("x", 20),
			args:      []string{"--max-pods", "20"},
			wantOut:   "default/x-19",
		},
		{
			name:      "--max-pods zero",
			manifests: deployment("x", 1),
			args:      []string{"--max-pods", "0"},
			wantErr:   "plan: --max-pods 0: must be positive",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "m.yaml")
			if err := os.WriteFile(f, []byte(tt.manifests), 0o644); err != nil {
				t.Fatal(err)
			}
			root := newRootCmd()
			var out, errb bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&errb)
			root.SetArgs(append([]string{"plan", "-f", f, "-o", "json"}, tt.args...))
			err := root.Execute()
			var ec *errExitCode
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
			case tt.wantCode != 0:
				if !errors.As(err, &ec) || ec.code != tt.wantCode {
					t.Fatalf("want exit code %d, got %v", tt.wantCode, err)
				}
			case err != nil:
				t.Fatalf("plan: %v\n%s", err, errb.String())
			}
			if !strings.Contains(errb.String(), tt.wantStderr) {
				t.Errorf("stderr does not hold %q:\n%s", tt.wantStderr, errb.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("output does not hold %q", tt.wantOut)
			}
		})
	}
}

// TestPlanStdinRecursiveAndFormats: -f - reads stdin, -R a directory
// tree; -o wide adds the NodeClass and every candidate, -o name prints
// nodeclaim.karpenter.sh/NAME.
func TestPlanStdinRecursiveAndFormats(t *testing.T) {
	pod := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers: [{name: c, image: x, resources: {requests: {cpu: \"1\"}}}]\n"
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "team", "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "team", "app", "pod.yaml"), []byte(pod("deep")), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		root.SetIn(strings.NewReader(stdin))
		root.SetArgs(append([]string{"plan"}, args...))
		err := root.Execute()
		return out.String(), err
	}
	if _, err := run("", "-f", dir); err == nil || !strings.Contains(err.Error(), "-R reads subdirectories") {
		t.Fatalf("a directory of directories without -R: %v", err)
	}
	out, err := run(pod("piped"), "-f", "-", "-R", "-f", dir, "-o", "wide")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	for _, want := range []string{"default/piped", "default/deep", "NODECLASS", "CANDIDATES"} {
		if !strings.Contains(out, want) {
			t.Errorf("-o wide lacks %q:\n%s", want, out)
		}
	}
	out, err = run(pod("piped"), "-f", "-", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^(nodeclaim\.karpenter\.sh/[a-z0-9-]+\n)+$`).MatchString(out) {
		t.Errorf("-o name:\n%s", out)
	}
}
