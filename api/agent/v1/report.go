// Package v1 is the wire contract between the node agent and the
// coordinators: the interruption report and its answers.
//
// # HTTP contract (the coordinator implements the server side)
//
// Request:
//
//	POST /v1/interruptions
//	Content-Type: application/json
//	Authorization: Bearer <token>        (sent when the agent has a token; the
//	                                       coordinator answers 401 when it wants one)
//	User-Agent: joiner-agent/<version>
//
//	{
//	  "id":         "i-0abc/spot-interruption/2026-11-21T12:02:00Z",  // notice ID, unique, stable
//	  "kind":       "spot-interruption",  // or rebalance-recommendation, scheduled-event, asg-lifecycle
//	  "instanceID": "i-0abc",
//	  "node":       "ip-10-0-0-1.ec2.internal",
//	  "nodeClaim":  "default-x7k2p",      // may be empty
//	  "action":     "terminate",          // spot action, event code or ASG state
//	  "eventID":    "instance-event-...", // scheduled events only
//	  "noticeTime": "2026-11-21T12:02:00Z",
//	  "deadline":   "2026-11-21T12:02:00Z",
//	  "observedAt": "2026-11-21T12:00:01.123Z"  // when the agent first saw it
//	}
//
// Any coordinator replica may receive it; a follower forwards it to the
// leader. The leader commits an InterruptionReport (upsert keyed by id) to
// raft and only then answers.
//
// Responses:
//
//	200 {"id": "...", "index": 1234, "duplicate": false}
//	    Committed at raft index `index` (duplicate=true: it was already
//	    committed; index is the original commit's). The agent stops sending.
//	400 {"error": "..."}  The body is invalid (field path and value named).
//	401 / 403             Missing or wrong token.
//	429 / 503             Not now (no leader, overloaded); Retry-After (seconds) may be set.
//	anything else, or no answer: unknown, retry.
//
// The agent retries every non-200 answer with jittered exponential back-off
// (capped, honouring Retry-After), rotating through the configured
// endpoints, until it gets a 200 or its context ends (the agent keeps sending
// while the notice is in IMDS). Because the id makes a repeat a no-op, a
// request that was committed but whose answer was lost is simply sent again.
package v1

import (
	"errors"
	"fmt"
	"time"
)

// Path is the coordinator's interruption report endpoint.
const Path = "/v1/interruptions"

// Report is the request body.
type Report struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"`
	InstanceID string    `json:"instanceID"`
	Node       string    `json:"node"`
	NodeClaim  string    `json:"nodeClaim,omitempty"`
	Action     string    `json:"action,omitempty"`
	EventID    string    `json:"eventID,omitempty"`
	NoticeTime time.Time `json:"noticeTime"`
	Deadline   time.Time `json:"deadline"`
	ObservedAt time.Time `json:"observedAt"`
}

// Validate checks the fields the coordinator relies on.
func (r Report) Validate() error {
	var errs []error
	for _, f := range []struct{ name, val string }{{"id", r.ID}, {"kind", r.Kind}, {"instanceID", r.InstanceID}, {"node", r.Node}} {
		if f.val == "" {
			errs = append(errs, fmt.Errorf("%s: must be set", f.name))
		}
	}
	if r.Deadline.IsZero() {
		errs = append(errs, errors.New("deadline: must be set"))
	}
	return errors.Join(errs...)
}

// Ack is the 200 response body.
type Ack struct {
	ID        string `json:"id"`
	Index     uint64 `json:"index"`
	Duplicate bool   `json:"duplicate"`
}

// ErrorBody is the body of a non-200 answer.
type ErrorBody struct {
	Error string `json:"error"`
}
