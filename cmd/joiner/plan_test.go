package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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
