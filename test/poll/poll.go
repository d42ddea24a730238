// Package poll waits in tests for a condition to hold. Test code only.
package poll

import (
	"testing"
	"time"
)

// Until checks cond every interval until it holds, and fails t when it
// still does not after timeout.
func Until(t testing.TB, timeout, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(every)
	}
}
