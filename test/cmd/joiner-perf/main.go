// Command joiner-perf runs Joiner's end-to-end performance suite (see
// test/perf) and prints one row per scenario phase, with the settings that
// shape the figures. `make perf` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/test/perf"
)

func main() {
	joiner := flag.String("joiner", "bin/joiner", "the joiner binary")
	dir := flag.String("dir", "", "run directory (default: a new temporary one, removed on success)")
	scenarios := flag.String("scenarios", "", "comma-separated scenarios to run (default: all)")
	bootDelay := flag.Duration("boot-delay", 2*time.Second, "the sim's time from launch to a registered Node")
	qps := flag.Float64("sim-kube-qps", 500, "the sim's Kubernetes client QPS")
	burst := flag.Int("sim-kube-burst", 1000, "the sim's Kubernetes client burst")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := *dir
	keep := run != ""
	if run == "" {
		var err error
		if run, err = os.MkdirTemp("", "joiner-perf-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	bin, err := filepath.Abs(*joiner)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var names []string
	if *scenarios != "" {
		names = strings.Split(*scenarios, ",")
	}
	start := time.Now()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("joiner-perf %s: %d CPUs, load average %s", start.UTC().Format(time.RFC3339), runtime.NumCPU(), load)
	fmt.Printf("settings: sim boot delay %s, sim kube client %.0f qps / %d burst, coordinator kube client 200 qps / 300 burst, "+
		"3 coordinators (mutual TLS, the chart's default), kubelet stand-in (8 workers, every 500ms), no agents\n", *bootDelay, *qps, *burst)
	results, err := perf.RunSuite(ctx, perf.Options{Dir: run, JoinerBin: bin, BootDelay: *bootDelay, SimKubeQPS: float32(*qps),
		SimKubeBurst: *burst, Out: os.Stdout, Log: zap.NewNop()}, names)
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("\n== results (%s, load average at the end %s)", time.Since(start).Round(time.Second), strings.TrimSpace(string(load)))
	fmt.Println()
	perf.WriteTable(os.Stdout, results)
	failed := err != nil
	for _, r := range results {
		failed = failed || r.Note != "" && !strings.HasPrefix(strings.TrimSpace(r.Note), "all ")
	}
	if failed {
		fmt.Printf("logs kept in %s\n", run)
		os.Exit(1)
	}
	if !keep {
		_ = os.RemoveAll(run)
	}
}
