package defaults

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Duration
	}{
		{0, time.Second},
		{-time.Minute, time.Second},
		{time.Millisecond, time.Millisecond},
	} {
		got := tc.in
		Positive(&got, time.Second)
		if got != tc.want {
			t.Errorf("Positive(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestZeroAndClock(t *testing.T) {
	s := ""
	Zero(&s, "joiner-agent")
	kept := "mine"
	Zero(&kept, "joiner-agent")
	if s != "joiner-agent" || kept != "mine" {
		t.Fatalf("Zero: got %q and %q", s, kept)
	}
	var now func() time.Time
	Clock(&now)
	if now == nil {
		t.Fatal("Clock left now nil")
	}
	fixed := func() time.Time { return time.Unix(1, 0) }
	mine := fixed
	Clock(&mine)
	if !mine().Equal(time.Unix(1, 0)) {
		t.Fatal("Clock replaced a clock that was set")
	}
}
