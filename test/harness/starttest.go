package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/test/testenv"
)

// StartTest builds joiner (or takes $JOINER_TEST_BINARY) into a temporary folder and starts a harness for
// one test (opts.Dir and opts.JoinerBin are set here). It skips the test
// under -short or when the control-plane tools are missing, fails it on
// any other error, and stops the processes when the test ends (printing
// the tail of their logs if it failed).
func StartTest(t testing.TB, opts Options) *Harness {
	t.Helper()
	if testing.Short() {
		t.Skip("real processes skipped under -short")
	}
	// The build and the start each get their own budget: on a loaded
	// machine a cold build alone can take minutes.
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer bcancel()
	dir := t.TempDir()
	// JOINER_TEST_BINARY runs another joiner binary (to show that a test
	// fails on an earlier build, say) instead of building this tree's.
	bin := os.Getenv("JOINER_TEST_BINARY")
	if bin == "" {
		var err error
		if bin, err = BuildJoiner(bctx, dir); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	opts.Dir, opts.JoinerBin = dir, bin
	h, err := Start(ctx, opts)
	if errors.Is(err, testenv.ErrToolsMissing) {
		t.Skipf("%v (run `make tools`)", err)
	}
	if h != nil {
		keepLogsOnFailure(t, dir)
		testenv.StopWhenDone(t, "process logs (tail)", h.Logs, h.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// keepLogsOnFailure copies dir's *.log files to $JOINER_TEST_LOGS/<test>
// when the test fails, after its processes have stopped (cleanups run
// last-registered first), so a flake seen under load can be read whole.
func keepLogsOnFailure(t testing.TB, dir string) {
	keep := os.Getenv("JOINER_TEST_LOGS")
	if keep == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dst := filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_")+"-"+time.Now().UTC().Format("150405"))
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, src := range logs {
			b, err := os.ReadFile(src)
			if err == nil {
				err = os.MkdirAll(dst, 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dst, filepath.Base(src)), b, 0o644)
			}
			if err != nil {
				t.Logf("keeping %s: %v", src, err)
			}
		}
		t.Logf("logs kept in %s", dst)
	})
}

// StartReady is StartTest, then a wait until every coordinator is ready;
// the context it returns ends timeout from now (and with the test) and
// bounds the wait.
func StartReady(t testing.TB, opts Options, timeout time.Duration) (*Harness, context.Context) {
	t.Helper()
	h := StartTest(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return h, ctx
}
