// Package imds watches the EC2 instance metadata service (IMDSv2) for
// interruption notices: spot instance-action, rebalance recommendations,
// scheduled maintenance events and the ASG target lifecycle state.
//
// The Watcher polls each path on a fixed interval (default 1 s), turns what it
// finds into Notices with a stable ID and a deadline, and hands each new
// Notice to a callback exactly once per process, and a scheduled event once
// more when it is canceled or completed (Notice.Ended). Transient errors
// back off per path and are logged; they never stop the watcher.
package imds

import (
	"fmt"
	"time"

	"github.com/joiner-dev/joiner/internal/defaults"
)

// Kind is the kind of interruption notice.
type Kind string

// Notice kinds.
const (
	KindSpotInterruption Kind = "spot-interruption"
	KindRebalance        Kind = "rebalance-recommendation"
	KindScheduledEvent   Kind = "scheduled-event"
	KindASGLifecycle     Kind = "asg-lifecycle"
)

// Kinds lists every kind, in a stable order.
var Kinds = []Kind{KindSpotInterruption, KindRebalance, KindScheduledEvent, KindASGLifecycle}

// Notice is one interruption notice as seen in IMDS.
type Notice struct {
	// ID is stable across polls and agent restarts: <instance>/<kind>/<notice time RFC3339>.
	// ASG lifecycle notices carry no time in IMDS, so theirs ends in the target state instead.
	// Within one watcher a notice is reported once even if its time moves
	// (see dedupeKey); the first sighting's ID is kept.
	ID         string
	Kind       Kind
	InstanceID string
	// NoticeTime is the time IMDS gives for the notice (spot: the action time;
	// rebalance: noticeTime; scheduled: NotBefore; ASG: when the agent first saw it).
	NoticeTime time.Time
	// Deadline is when the node is expected to go away (or the event to start).
	Deadline time.Time
	// Action is the spot action (terminate, stop, hibernate), the scheduled
	// event code (system-reboot, instance-stop, ...) or the ASG target state.
	Action string
	// EventID is the scheduled event's ID (scheduled events only).
	EventID string
	// Description is free text from IMDS (scheduled events only).
	Description string
	// Ended: the notice is over, the one the watcher reported earlier
	// (same ID) or was told to expect: a scheduled event that IMDS shows
	// canceled or completed, or no longer lists. Only scheduled events
	// end; the others last until the instance goes.
	Ended bool
}

// NoticeID builds the stable notice ID.
func NoticeID(instanceID string, kind Kind, at string) string {
	return fmt.Sprintf("%s/%s/%s", instanceID, kind, at)
}

// Deadlines configures the deadline of notices that carry no deadline of their own.
type Deadlines struct {
	// Rebalance is added to a rebalance recommendation's noticeTime (default 2m:
	// the shortest warning an interruption that may follow can give).
	Rebalance time.Duration
	// ASGTerminate is added to the first sighting of ASG state Terminated
	// (default 2m).
	ASGTerminate time.Duration
}

func (d Deadlines) withDefaults() Deadlines {
	defaults.Positive(&d.Rebalance, 2*time.Minute)
	defaults.Positive(&d.ASGTerminate, 2*time.Minute)
	return d
}
