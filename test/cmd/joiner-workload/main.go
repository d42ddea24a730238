// Command joiner-workload writes the pods of Karpenter's scheduling
// benchmark (test/workload) as a JSON PodList, so another scheduler can be
// run on exactly the pods Joiner's benchmark uses (tools/karpenter-bench).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/test/workload"
)

func main() {
	n := flag.Int("pods", 1000, "number of pods")
	seed := flag.Int64("seed", 42, "math/rand seed (Karpenter's benchmark uses 42)")
	flag.Parse()
	if *n <= 0 {
		fmt.Fprintf(os.Stderr, "--pods %d: want > 0\n", *n)
		os.Exit(2)
	}
	list := corev1.PodList{}
	list.APIVersion, list.Kind = "v1", "PodList"
	for _, p := range workload.KarpenterPodsSeeded(*n, *seed) {
		list.Items = append(list.Items, *p)
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(&list); err != nil {
		fmt.Fprintf(os.Stderr, "writing pods: %v\n", err)
		os.Exit(1)
	}
}
