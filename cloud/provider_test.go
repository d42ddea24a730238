package cloud

import (
	"errors"
	"fmt"
	"testing"
)

func TestIsRetryable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("x: %w", ErrRetryable), true},
		{fmt.Errorf("x: %w", &InsufficientCapacityError{}), true},
		{fmt.Errorf("x: %w", ErrInvalidSpec), false},
		{fmt.Errorf("x: %w", ErrNotFound), false},
		{errors.New("other"), false},
	} {
		if got := IsRetryable(tt.err); got != tt.want {
			t.Errorf("IsRetryable(%v) = %v", tt.err, got)
		}
	}
}

func TestProviderID(t *testing.T) {
	if got := (Instance{ID: "i-1", Zone: "us-east-1a"}).ProviderID(); got != "aws:///us-east-1a/i-1" {
		t.Errorf("ProviderID = %q", got)
	}
}

func TestInstanceID(t *testing.T) {
	for in, want := range map[string]string{"aws:///us-east-1a/i-0123": "i-0123", "": "", "gce://p/z/n": "", "aws:///i-9": "i-9"} {
		if got := InstanceID(in); got != want {
			t.Errorf("InstanceID(%q) = %q, want %q", in, got, want)
		}
	}
}
