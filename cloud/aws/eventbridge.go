package aws

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/cloud"
)

// The EventBridge events an interruption queue receives: the rules
// Karpenter's getting-started stack creates send EC2's spot interruption
// warnings, capacity reservation interruption warnings, rebalance
// recommendations and instance state-change notifications (source aws.ec2) and AWS Health events (aws.health) to
// the queue. Each arrives as the SQS message body, the event's JSON.
const (
	sourceEC2    = "aws.ec2"
	sourceHealth = "aws.health"

	detailSpotInterruption = "EC2 Spot Instance Interruption Warning"
	detailRebalance        = "EC2 Instance Rebalance Recommendation"
	// detailReservationInterruption: an interruptible capacity
	// reservation's owner reclaims it.
	detailReservationInterruption = "EC2 Capacity Reservation Instance Interruption Warning"
	detailStateChange             = "EC2 Instance State-change Notification"
	detailHealth                  = "AWS Health Event"

	// eventVersion is the only EventBridge envelope version there is.
	eventVersion = "0"

	// spotNotice is the time between a spot interruption warning and the
	// instance's reclaim.
	spotNotice = 2 * time.Minute
)

// event is the EventBridge envelope (field names as AWS documents them).
type event struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       time.Time       `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// ec2Detail is the detail of the aws.ec2 events Joiner reads.
type ec2Detail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"` // spot and reservation interruption warnings
	State          string `json:"state"`           // state-change notification
	// TerminationTime: reservation interruption warning (RFC 3339).
	TerminationTime string `json:"instance-termination-time"`
}

// healthDetail is the detail of an AWS Health event.
type healthDetail struct {
	EventARN          string `json:"eventArn"`
	Service           string `json:"service"`
	EventTypeCode     string `json:"eventTypeCode"`
	EventTypeCategory string `json:"eventTypeCategory"`
	StartTime         string `json:"startTime"`
	EndTime           string `json:"endTime"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// State-change states Joiner reacts to, as Karpenter does.
var stateKinds = map[string]cloud.InterruptionKind{
	"stopping":      cloud.InterruptionStopped,
	"stopped":       cloud.InterruptionStopped,
	"shutting-down": cloud.InterruptionTerminated,
	"terminated":    cloud.InterruptionTerminated,
}

// parseEvent reads one queue message body. Events of other types or
// versions, state changes to other states and health events that are not
// EC2 scheduled changes are no-ops; a body that is not such an event is a
// no-op with Err saying why (the caller deletes both, as Karpenter does).
// An event of a known type that names no instance (an EC2 event without
// detail.instance-id, a scheduled change without affected entities) is of
// its type with no Events: Karpenter counts it under its message type and
// finds no NodeClaim for it.
func parseEvent(body string) cloud.InterruptionMessage {
	out := cloud.InterruptionMessage{Kind: cloud.InterruptionNoOp}
	if strings.TrimSpace(body) == "" {
		return out
	}
	var ev event
	if err := json.Unmarshal([]byte(body), &ev); err != nil {
		out.Err = fmt.Errorf("message body is not an EventBridge event: %w", err)
		return out
	}
	out.EventID, out.Time = ev.ID, ev.Time
	if ev.Version != eventVersion {
		return out
	}
	var err error
	switch {
	case ev.Source == sourceEC2 && (ev.DetailType == detailSpotInterruption || ev.DetailType == detailRebalance ||
		ev.DetailType == detailStateChange || ev.DetailType == detailReservationInterruption):
		err = ec2Event(&out, ev)
	case ev.Source == sourceHealth && ev.DetailType == detailHealth:
		err = healthEvent(&out, ev)
	}
	if err != nil {
		return cloud.InterruptionMessage{Kind: cloud.InterruptionNoOp, EventID: ev.ID, Time: ev.Time,
			Err: fmt.Errorf("event %s (%s): %w", ev.ID, ev.DetailType, err)}
	}
	return out
}

// ec2Event fills out from an aws.ec2 event about one instance. A
// state-change to a state Joiner does not react to leaves out a no-op.
func ec2Event(out *cloud.InterruptionMessage, ev event) error {
	var d ec2Detail
	if err := unmarshalDetail(ev.Detail, &d); err != nil {
		return err
	}
	ie := cloud.InterruptionEvent{InstanceID: d.InstanceID, Time: ev.Time}
	switch ev.DetailType {
	case detailSpotInterruption:
		ie.Kind, ie.Detail, ie.Deadline = cloud.InterruptionSpot, d.InstanceAction, ev.Time.Add(spotNotice)
	case detailReservationInterruption:
		// The instance goes at instance-termination-time, two minutes
		// after the warning.
		ie.Kind, ie.Detail, ie.Deadline = cloud.InterruptionCapacityReservation, d.InstanceAction, ev.Time.Add(spotNotice)
		if t, err := time.Parse(time.RFC3339, d.TerminationTime); err == nil {
			ie.Deadline = t.UTC()
		}
	case detailRebalance:
		ie.Kind = cloud.InterruptionRebalance
	default: // a state-change notification
		ie.Detail = strings.ToLower(d.State)
		if ie.Kind = stateKinds[ie.Detail]; ie.Kind == "" {
			return nil
		}
		ie.Deadline = ev.Time
	}
	out.Kind = ie.Kind
	if ie.InstanceID != "" {
		out.Events = []cloud.InterruptionEvent{ie}
	}
	return nil
}

// unmarshalDetail reads an event's detail into d; a missing or null
// detail leaves d zero, as Karpenter reads the whole event at once.
func unmarshalDetail(raw json.RawMessage, d any) error {
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, d); err != nil {
		return fmt.Errorf("detail: %w", err)
	}
	return nil
}

// healthEvent fills out from an AWS Health event: an EC2 scheduledChange
// acts on every affected instance (none: no events), from its start time.
func healthEvent(out *cloud.InterruptionMessage, ev event) error {
	var d healthDetail
	if err := unmarshalDetail(ev.Detail, &d); err != nil {
		return err
	}
	if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
		return nil
	}
	start := healthTime(d.StartTime)
	var events []cloud.InterruptionEvent
	for _, e := range d.AffectedEntities {
		if e.EntityValue != "" {
			events = append(events, cloud.InterruptionEvent{InstanceID: e.EntityValue, Kind: cloud.InterruptionScheduledChange,
				Time: ev.Time, Deadline: start, Detail: d.EventTypeCode})
		}
	}
	out.Kind, out.Events = cloud.InterruptionScheduledChange, events
	return nil
}

// healthTime reads a Health event's start or end time: AWS writes them as
// RFC 1123 ("Fri, 27 Jan 2023 06:00:00 GMT"); RFC 3339 is read too. An
// unreadable time is no deadline (zero), not an error.
func healthTime(s string) time.Time {
	for _, layout := range []string{time.RFC1123, time.RFC1123Z, time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
