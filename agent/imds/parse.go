package imds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// InstanceAction is the body of spot/instance-action.
type InstanceAction struct {
	Action string    // terminate, stop or hibernate
	Time   time.Time // when the action happens
	// RawTime is the time exactly as IMDS gave it (used in the notice ID).
	RawTime string
}

// ParseInstanceAction parses {"action":"terminate","time":"2017-09-18T08:22:00Z"}.
func ParseInstanceAction(b []byte) (InstanceAction, error) {
	var v struct {
		Action *string `json:"action"`
		Time   *string `json:"time"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return InstanceAction{}, fmt.Errorf("parsing spot instance-action: %w", err)
	}
	if v.Action == nil || *v.Action == "" {
		return InstanceAction{}, fmt.Errorf("parsing spot instance-action: field action missing")
	}
	if v.Time == nil {
		return InstanceAction{}, fmt.Errorf("parsing spot instance-action: field time missing")
	}
	t, err := time.Parse(time.RFC3339, *v.Time)
	if err != nil {
		return InstanceAction{}, fmt.Errorf("parsing spot instance-action: field time %q: %w", *v.Time, err)
	}
	return InstanceAction{Action: *v.Action, Time: t, RawTime: *v.Time}, nil
}

// Rebalance is the body of events/recommendations/rebalance.
type Rebalance struct {
	NoticeTime time.Time
	RawTime    string
}

// ParseRebalance parses {"noticeTime":"2020-10-27T08:22:00Z"}.
func ParseRebalance(b []byte) (Rebalance, error) {
	var v struct {
		NoticeTime *string `json:"noticeTime"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return Rebalance{}, fmt.Errorf("parsing rebalance recommendation: %w", err)
	}
	if v.NoticeTime == nil {
		return Rebalance{}, fmt.Errorf("parsing rebalance recommendation: field noticeTime missing")
	}
	t, err := time.Parse(time.RFC3339, *v.NoticeTime)
	if err != nil {
		return Rebalance{}, fmt.Errorf("parsing rebalance recommendation: field noticeTime %q: %w", *v.NoticeTime, err)
	}
	return Rebalance{NoticeTime: t, RawTime: *v.NoticeTime}, nil
}

// ScheduledEvent is one entry of events/maintenance/scheduled.
type ScheduledEvent struct {
	Code         string // system-reboot, instance-reboot, instance-stop, instance-retirement, system-maintenance
	Description  string
	EventID      string
	State        string // active, canceled, completed
	NotBefore    time.Time
	NotAfter     time.Time // zero when absent
	RawNotBefore string
}

// Active reports whether the event is still going to happen.
func (e ScheduledEvent) Active() bool { return e.State == "" || e.State == "active" }

// scheduledTimeLayout is the time format IMDS uses for scheduled events.
const scheduledTimeLayout = "2 Jan 2006 15:04:05 GMT"

// ParseScheduledEvents parses the JSON array of scheduled events. An empty
// body and [] both mean no events.
func ParseScheduledEvents(b []byte) ([]ScheduledEvent, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	var raw []struct {
		Code        string `json:"Code"`
		Description string `json:"Description"`
		EventID     string `json:"EventId"`
		State       string `json:"State"`
		NotBefore   string `json:"NotBefore"`
		NotAfter    string `json:"NotAfter"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parsing scheduled events: %w", err)
	}
	out := make([]ScheduledEvent, 0, len(raw))
	for i, r := range raw {
		if r.Code == "" {
			return nil, fmt.Errorf("parsing scheduled events: [%d].Code missing", i)
		}
		nb, err := parseScheduledTime(r.NotBefore)
		if err != nil {
			return nil, fmt.Errorf("parsing scheduled events: [%d].NotBefore %q: %w", i, r.NotBefore, err)
		}
		var na time.Time
		if r.NotAfter != "" {
			if na, err = parseScheduledTime(r.NotAfter); err != nil {
				return nil, fmt.Errorf("parsing scheduled events: [%d].NotAfter %q: %w", i, r.NotAfter, err)
			}
		}
		out = append(out, ScheduledEvent{
			Code: r.Code, Description: r.Description, EventID: r.EventID, State: r.State,
			NotBefore: nb, NotAfter: na, RawNotBefore: r.NotBefore,
		})
	}
	return out, nil
}

func parseScheduledTime(s string) (time.Time, error) {
	if t, err := time.Parse(scheduledTimeLayout, s); err == nil {
		return t.UTC(), nil
	}
	// Tolerate RFC3339 too; some emulators use it.
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want %q or RFC3339", scheduledTimeLayout)
	}
	return t.UTC(), nil
}

// ParseLifecycleState parses autoscaling/target-lifecycle-state (plain text,
// e.g. InService or Terminated).
func ParseLifecycleState(b []byte) (string, error) {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("parsing target-lifecycle-state: empty")
	}
	if strings.ContainsAny(s, " \t\r\n{}[]\"") {
		return "", fmt.Errorf("parsing target-lifecycle-state: %q is not a state name", truncate(s, 64))
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
