package backoff

import (
	"context"
	"testing"
	"time"
)

func TestJitteredDoublesUpToTheCap(t *testing.T) {
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{{0, time.Second}, {1, 2 * time.Second}, {3, 8 * time.Second}, {4, 10 * time.Second}, {40, 10 * time.Second}} {
		for range 100 {
			got := Jittered(tc.attempt, time.Second, 10*time.Second)
			if lo, hi := tc.want*8/10, tc.want*12/10; got < lo || got > hi {
				t.Fatalf("attempt %d: %s, want %s ±20%%", tc.attempt, got, tc.want)
			}
		}
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep returned true after the context ended")
	}
	if !Sleep(t.Context(), time.Millisecond) {
		t.Fatal("Sleep returned false with a live context")
	}
}
