package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

func TestStuckTerminating(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name    string
		deleted *time.Time
		want    bool
	}{
		{"not terminating", nil, false},
		{"deletionTimestamp ahead (grace period running)", new(now.Add(30 * time.Second)), false},
		{"a minute past: not yet", new(now.Add(-StuckAfter)), false},
		{"over a minute past", new(now.Add(-StuckAfter - time.Second)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{}
			if tc.deleted != nil {
				p.DeletionTimestamp = new(metav1.NewTime(*tc.deleted))
			}
			if got := StuckTerminating(p, now); got != tc.want {
				t.Errorf("StuckTerminating = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDoNotDisruptActive(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name    string
		value   *string
		started time.Duration // before now; 0: no start time
		want    bool
	}{
		{"no annotation", nil, time.Minute, false},
		{"true", new("true"), time.Hour, true},
		{"true, no start time", new("true"), 0, true},
		{"duration not elapsed", new("5m"), 4 * time.Minute, true},
		{"duration just elapsed", new("5m"), 5 * time.Minute, false},
		{"duration elapsed", new("5m"), 6 * time.Minute, false},
		{"duration, no start time", new("5m"), 0, true},
		{"false", new("false"), time.Minute, false},
		{"empty", new(""), time.Minute, false},
		{"not a duration", new("forever"), time.Minute, false},
		{"no unit", new("300"), time.Minute, false},
		{"zero", new("0s"), 0, false},
		{"negative", new("-5m"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{}
			if tc.value != nil {
				p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: *tc.value}
			}
			if tc.started > 0 {
				p.Status.StartTime = new(metav1.NewTime(now.Add(-tc.started)))
			}
			if got := DoNotDisruptActive(p, now); got != tc.want {
				t.Errorf("DoNotDisruptActive = %v, want %v", got, tc.want)
			}
		})
	}
}
