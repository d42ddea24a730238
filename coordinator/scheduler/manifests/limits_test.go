package manifests

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func deployment(name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %s}
spec:
  replicas: %d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: c, image: x}]
`, name, replicas)
}

const jobTmpl = "    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: x}]\n"

func barePod(name string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers: [{name: c, image: x}]\n"
}

// TestLoadMaxPods: the pods the input describes are bounded before they
// are made; the workload that passes the bound is an error naming the
// field and value and adds no pod; the rest is kept.
func TestLoadMaxPods(t *testing.T) {
	tests := []struct {
		name     string
		maxPods  int // 0: DefaultMaxPods
		docs     []string
		wantErrs []string // substrings, one per error
		wantPods int
	}{
		{
			name:     "a million replicas",
			docs:     []string{deployment("x", 1_000_000), deployment("small", 2)},
			wantErrs: []string{"bad.yaml: document 1 (line 1): Deployment default/x: spec.replicas 1000000: more than the 100000 pods joiner plan simulates (--max-pods)"},
			wantPods: 2,
		},
		{
			name:     "Karpenter's benchmark size fits the default",
			docs:     []string{deployment("x", 20_000)},
			wantPods: 20_000,
		},
		{
			name:     "exactly the limit",
			maxPods:  5,
			docs:     []string{deployment("a", 3), barePod("p"), deployment("b", 1)},
			wantPods: 5,
		},
		{
			name:     "the sum passes the limit",
			maxPods:  5,
			docs:     []string{deployment("a", 3), deployment("b", 3), deployment("c", 2)},
			wantErrs: []string{"Deployment default/b: spec.replicas 3: 6 pods with the 3 before it, more than the 5 pods joiner plan simulates (--max-pods)"},
			wantPods: 5,
		},
		{
			name:     "bare pods count",
			maxPods:  2,
			docs:     []string{barePod("p1"), barePod("p2"), barePod("p3")},
			wantErrs: []string{"Pod default/p3: 3 pods with the 2 before it, more than the 2 pods"},
			wantPods: 2,
		},
		{
			name:    "StatefulSet and ReplicaSet",
			maxPods: 10,
			docs: []string{
				strings.Replace(deployment("s", 11), "kind: Deployment", "kind: StatefulSet", 1),
				strings.Replace(deployment("r", 12), "kind: Deployment", "kind: ReplicaSet", 1),
			},
			wantErrs: []string{
				"StatefulSet default/s: spec.replicas 11: more than the 10 pods",
				"ReplicaSet default/r: spec.replicas 12: more than the 10 pods",
			},
		},
		{
			name:    "Job parallelism and completions",
			maxPods: 10,
			docs: []string{
				"apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\nspec:\n  parallelism: 2000000000\n  template:\n" + jobTmpl,
				"apiVersion: batch/v1\nkind: Job\nmetadata: {name: k}\nspec:\n  parallelism: 50\n  completions: 20\n  template:\n" + jobTmpl,
				"apiVersion: batch/v1\nkind: Job\nmetadata: {name: ok}\nspec:\n  parallelism: 50\n  completions: 4\n  template:\n" + jobTmpl,
			},
			wantErrs: []string{
				"Job ns/j: spec.parallelism 2000000000: more than the 10 pods",
				"Job default/k: spec.completions 20: more than the 10 pods",
			},
			wantPods: 4,
		},
		{
			name:     "CronJob",
			maxPods:  10,
			docs:     []string{"apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      parallelism: 11\n      template:\n    " + strings.ReplaceAll(jobTmpl, "\n    ", "\n        ")},
			wantErrs: []string{"CronJob default/c: spec.jobTemplate.spec.parallelism 11: more than the 10 pods"},
		},
		{
			name:     "negative replicas",
			docs:     []string{deployment("neg", -1)},
			wantErrs: []string{"Deployment default/neg: spec.replicas -1: must not be negative"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, errs := LoadWith([]File{{Name: "bad.yaml", Data: []byte(strings.Join(tt.docs, "---\n"))}}, Options{MaxPods: tt.maxPods})
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("errors %v, want %d", errs, len(tt.wantErrs))
			}
			for i, e := range errs {
				if !errors.Is(e, ErrInput) || !strings.Contains(e.Error(), tt.wantErrs[i]) {
					t.Errorf("error %d: %v\nwant ErrInput containing %q", i, e, tt.wantErrs[i])
				}
			}
			if got := len(res.Input.Pods); got != tt.wantPods {
				t.Errorf("%d pods, want %d", got, tt.wantPods)
			}
		})
	}
}
