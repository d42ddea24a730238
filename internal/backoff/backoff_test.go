package backoff

import (
	"context"
	"testing"
	"time"
)

func TestNewDoublesUpToTheCap(t *testing.T) {
	for range 100 {
		b := New(time.Second, 10*time.Second)
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second} {
			got := b.Step()
			if hi := time.Duration(float64(want) * (1 + Jitter)); got < want || got > hi {
				t.Fatalf("step %d: %s, want %s to %s", i, got, want, hi)
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
