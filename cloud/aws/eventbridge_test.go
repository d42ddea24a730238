package aws

import (
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/cloud"
)

// envelope is an EventBridge event as AWS documents it, around detail.
func envelope(detailType, source, resources, detail string) string {
	return `{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602","detail-type":"` + detailType + `","source":"` + source +
		`","account":"123456789012","time":"2026-11-22T01:00:00Z","region":"us-east-1","resources":[` + resources + `],"detail":` + detail + `}`
}

// TestParseEvent reads the events Karpenter's interruption controller
// reads, as AWS shapes them: what each means for which instances, and
// which events are no-ops or errors.
func TestParseEvent(t *testing.T) {
	at := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	spotARN := `"arn:aws:ec2:us-east-1a:instance/i-0b662ef9931388ba0"`
	stateARN := `"arn:aws:ec2:us-east-1:123456789012:instance/i-0b662ef9931388ba0"`
	health := func(service, category, entities string) string {
		return envelope("AWS Health Event", "aws.health", `"i-0aaa","i-0bbb"`, `{"eventArn":"arn:aws:health:us-east-1::event/EC2/`+
			`AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_ABC123","service":"`+service+
			`","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventTypeCategory":"`+category+
			`","eventScopeCode":"ACCOUNT_SPECIFIC","startTime":"Sun, 06 Dec 2026 06:00:00 GMT","endTime":"Sun, 06 Dec 2026 07:00:00 GMT",`+
			`"statusCode":"upcoming","eventRegion":"us-east-1","eventDescription":[{"language":"en_US","latestDescription":"retiring"}],`+
			`"affectedEntities":[`+entities+`]}`)
	}
	start := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	type ev = cloud.InterruptionEvent
	for _, tc := range []struct {
		name   string
		body   string
		kind   cloud.InterruptionKind
		events []ev
		err    string // in Err when set
	}{
		{name: "spot interruption warning: reclaimed two minutes later",
			body: envelope("EC2 Spot Instance Interruption Warning", "aws.ec2", spotARN,
				`{"instance-id":"i-0b662ef9931388ba0","instance-action":"terminate"}`),
			kind: cloud.InterruptionSpot, events: []ev{{InstanceID: "i-0b662ef9931388ba0", Kind: cloud.InterruptionSpot, Time: at,
				Deadline: at.Add(2 * time.Minute), Detail: "terminate"}}},
		{name: "capacity reservation interruption warning: gone at its termination time",
			body: envelope("EC2 Capacity Reservation Instance Interruption Warning", "aws.ec2", stateARN,
				`{"instance-id":"i-0b662ef9931388ba0","instance-action":"terminate","instance-termination-time":"2026-11-22T01:02:30Z","azId":"use1-az1"}`),
			kind: cloud.InterruptionCapacityReservation, events: []ev{{InstanceID: "i-0b662ef9931388ba0", Kind: cloud.InterruptionCapacityReservation,
				Time: at, Deadline: at.Add(150 * time.Second), Detail: "terminate"}}},
		{name: "capacity reservation interruption warning without a termination time: two minutes",
			body: envelope("EC2 Capacity Reservation Instance Interruption Warning", "aws.ec2", stateARN,
				`{"instance-id":"i-1","instance-action":"terminate"}`),
			kind: cloud.InterruptionCapacityReservation, events: []ev{{InstanceID: "i-1", Kind: cloud.InterruptionCapacityReservation,
				Time: at, Deadline: at.Add(2 * time.Minute), Detail: "terminate"}}},
		{name: "rebalance recommendation: no deadline",
			body: envelope("EC2 Instance Rebalance Recommendation", "aws.ec2", spotARN, `{"instance-id":"i-0b662ef9931388ba0"}`),
			kind: cloud.InterruptionRebalance, events: []ev{{InstanceID: "i-0b662ef9931388ba0", Kind: cloud.InterruptionRebalance, Time: at}}},
		{name: "state change to stopping",
			body: envelope("EC2 Instance State-change Notification", "aws.ec2", stateARN, `{"instance-id":"i-0b662ef9931388ba0","state":"stopping"}`),
			kind: cloud.InterruptionStopped, events: []ev{{InstanceID: "i-0b662ef9931388ba0", Kind: cloud.InterruptionStopped, Time: at,
				Deadline: at, Detail: "stopping"}}},
		{name: "state change to stopped",
			body: envelope("EC2 Instance State-change Notification", "aws.ec2", stateARN, `{"instance-id":"i-1","state":"stopped"}`),
			kind: cloud.InterruptionStopped, events: []ev{{InstanceID: "i-1", Kind: cloud.InterruptionStopped, Time: at, Deadline: at, Detail: "stopped"}}},
		{name: "state change to shutting-down",
			body: envelope("EC2 Instance State-change Notification", "aws.ec2", stateARN, `{"instance-id":"i-1","state":"shutting-down"}`),
			kind: cloud.InterruptionTerminated, events: []ev{{InstanceID: "i-1", Kind: cloud.InterruptionTerminated, Time: at, Deadline: at,
				Detail: "shutting-down"}}},
		{name: "state change to terminated",
			body: envelope("EC2 Instance State-change Notification", "aws.ec2", stateARN, `{"instance-id":"i-1","state":"terminated"}`),
			kind: cloud.InterruptionTerminated, events: []ev{{InstanceID: "i-1", Kind: cloud.InterruptionTerminated, Time: at, Deadline: at,
				Detail: "terminated"}}},
		{name: "state change to running is a no-op",
			body: envelope("EC2 Instance State-change Notification", "aws.ec2", stateARN, `{"instance-id":"i-1","state":"running"}`),
			kind: cloud.InterruptionNoOp},
		{name: "state change to pending is a no-op",
			body: envelope("EC2 Instance State-change Notification", "aws.ec2", stateARN, `{"instance-id":"i-1","state":"pending"}`),
			kind: cloud.InterruptionNoOp},
		{name: "scheduled change: every affected instance, from its start",
			body: health("EC2", "scheduledChange", `{"entityValue":"i-0aaa"},{"entityValue":"i-0bbb"}`),
			kind: cloud.InterruptionScheduledChange, events: []ev{
				{InstanceID: "i-0aaa", Kind: cloud.InterruptionScheduledChange, Time: at, Deadline: start, Detail: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"},
				{InstanceID: "i-0bbb", Kind: cloud.InterruptionScheduledChange, Time: at, Deadline: start, Detail: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"}}},
		{name: "health issue (not a scheduled change) is a no-op",
			body: health("EC2", "issue", `{"entityValue":"i-0aaa"}`), kind: cloud.InterruptionNoOp},
		{name: "health event of another service is a no-op",
			body: health("RDS", "scheduledChange", `{"entityValue":"db-1"}`), kind: cloud.InterruptionNoOp},
		{name: "another event type is a no-op",
			body: envelope("EC2 Fast Snapshot Restore State-change Notification", "aws.ec2", `""`, `{"state":"enabled"}`),
			kind: cloud.InterruptionNoOp},
		{name: "another envelope version is a no-op",
			body: strings.Replace(envelope("EC2 Spot Instance Interruption Warning", "aws.ec2", spotARN, `{"instance-id":"i-1"}`),
				`"version":"0"`, `"version":"1"`, 1),
			kind: cloud.InterruptionNoOp},
		{name: "empty body is a no-op", body: "", kind: cloud.InterruptionNoOp},
		{name: "a body that is not JSON", body: "hello", kind: cloud.InterruptionNoOp, err: "not an EventBridge event"},
		{name: "JSON that is not an event (Karpenter's unparsable fixture)", body: `{"field1":"value1","field2":"value2"}`,
			kind: cloud.InterruptionNoOp},
		// An event that names no instance is still of its type, with no
		// instance to act on (Karpenter counts it under its message type).
		{name: "spot warning without an instance",
			body: envelope("EC2 Spot Instance Interruption Warning", "aws.ec2", spotARN, `{"instance-action":"terminate"}`),
			kind: cloud.InterruptionSpot},
		{name: "spot warning without a detail",
			body: strings.Replace(envelope("EC2 Spot Instance Interruption Warning", "aws.ec2", spotARN, `null`), `,"detail":null`, ``, 1),
			kind: cloud.InterruptionSpot},
		{name: "rebalance recommendation without an instance",
			body: envelope("EC2 Instance Rebalance Recommendation", "aws.ec2", spotARN, `{}`), kind: cloud.InterruptionRebalance},
		{name: "capacity reservation warning without an instance",
			body: envelope("EC2 Capacity Reservation Instance Interruption Warning", "aws.ec2", stateARN, `{"instance-action":"terminate"}`),
			kind: cloud.InterruptionCapacityReservation},
		{name: "state change to stopping without an instance",
			body: envelope("EC2 Instance State-change Notification", "aws.ec2", stateARN, `{"state":"stopping"}`), kind: cloud.InterruptionStopped},
		{name: "state change to running without an instance is a no-op",
			body: envelope("EC2 Instance State-change Notification", "aws.ec2", stateARN, `{"state":"running"}`), kind: cloud.InterruptionNoOp},
		{name: "scheduled change naming no instance",
			body: health("EC2", "scheduledChange", ``), kind: cloud.InterruptionScheduledChange},
		{name: "scheduled change whose entities have no value",
			body: health("EC2", "scheduledChange", `{"entityValue":""}`), kind: cloud.InterruptionScheduledChange},
		{name: "a detail that is not an object",
			body: envelope("EC2 Spot Instance Interruption Warning", "aws.ec2", spotARN, `"i-1"`), kind: cloud.InterruptionNoOp, err: "detail"},
		{name: "a bad time", body: strings.Replace(envelope("EC2 Instance Rebalance Recommendation", "aws.ec2", spotARN,
			`{"instance-id":"i-1"}`), "2026-11-22T01:00:00Z", "yesterday", 1), kind: cloud.InterruptionNoOp, err: "yesterday"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseEvent(tc.body)
			if got.Kind != tc.kind {
				t.Errorf("kind %q, want %q", got.Kind, tc.kind)
			}
			switch {
			case tc.err == "" && got.Err != nil:
				t.Errorf("error %v, want none", got.Err)
			case tc.err != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tc.err)):
				t.Errorf("error %v, want one naming %q", got.Err, tc.err)
			}
			if len(got.Events) != len(tc.events) {
				t.Fatalf("events %+v, want %+v", got.Events, tc.events)
			}
			for i, e := range got.Events {
				w := tc.events[i]
				if e.InstanceID != w.InstanceID || e.Kind != w.Kind || !e.Time.Equal(w.Time) || !e.Deadline.Equal(w.Deadline) || e.Detail != w.Detail {
					t.Errorf("event %d = %+v, want %+v", i, e, w)
				}
			}
			if len(tc.events) > 0 && got.EventID != "7bf73129-1428-4cd3-a780-95db273d1602" {
				t.Errorf("event ID %q", got.EventID)
			}
		})
	}
}

func TestHealthTime(t *testing.T) {
	want := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	for in, w := range map[string]time.Time{
		"Sun, 06 Dec 2026 06:00:00 GMT":   want,
		"Sun, 06 Dec 2026 07:00:00 +0100": want,
		"2026-12-06T06:00:00Z":            want,
		"next week":                       {},
		"":                                {},
	} {
		if got := healthTime(in); !got.Equal(w) {
			t.Errorf("healthTime(%q) = %v, want %v", in, got, w)
		}
	}
}
