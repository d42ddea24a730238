package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// The sim's EventBridge: the rules Karpenter's getting-started stack
// creates send EC2 spot interruption warnings, capacity reservation
// instance interruption warnings, rebalance recommendations and instance
// state-change notifications (all states) and AWS Health events to the
// interruption queue. The sim puts the same events, shaped
// as AWS documents them, into Config.InterruptionQueue (none configured:
// they go nowhere).
const (
	detailSpotInterruption = "EC2 Spot Instance Interruption Warning"
	detailRebalance        = "EC2 Instance Rebalance Recommendation"
	// detailReservationInterruption: the owner of an interruptible
	// capacity reservation reclaims it.
	detailReservationInterruption = "EC2 Capacity Reservation Instance Interruption Warning"
	detailStateChange             = "EC2 Instance State-change Notification"
	detailHealth                  = "AWS Health Event"

	// DefaultScheduledChange is the AWS Health event type a scheduled
	// change is of when the caller names none.
	DefaultScheduledChange = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
	// scheduledChangeLead is how far ahead a scheduled change starts when
	// the caller gives no start (AWS announces maintenance about two weeks
	// ahead).
	scheduledChangeLead = 14 * 24 * time.Hour
)

// ebEvent is an EventBridge event, its fields in AWS's order.
type ebEvent struct {
	Version    string   `json:"version"`
	ID         string   `json:"id"`
	DetailType string   `json:"detail-type"`
	Source     string   `json:"source"`
	Account    string   `json:"account"`
	Time       string   `json:"time"`
	Region     string   `json:"region"`
	Resources  []string `json:"resources"`
	Detail     any      `json:"detail"`
}

type spotDetail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
}

type reservationDetail struct {
	InstanceID      string `json:"instance-id"`
	InstanceAction  string `json:"instance-action"`
	TerminationTime string `json:"instance-termination-time"`
	AZID            string `json:"azId"`
}

type rebalanceDetail struct {
	InstanceID string `json:"instance-id"`
}

type stateDetail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
}

type healthDetail struct {
	EventARN          string              `json:"eventArn"`
	Service           string              `json:"service"`
	EventTypeCode     string              `json:"eventTypeCode"`
	EventTypeCategory string              `json:"eventTypeCategory"`
	EventScopeCode    string              `json:"eventScopeCode"`
	StartTime         string              `json:"startTime"`
	EndTime           string              `json:"endTime"`
	LastUpdatedTime   string              `json:"lastUpdatedTime"`
	StatusCode        string              `json:"statusCode"`
	EventRegion       string              `json:"eventRegion"`
	EventDescription  []healthDescription `json:"eventDescription"`
	AffectedEntities  []healthEntity      `json:"affectedEntities"`
}

type healthDescription struct {
	Language          string `json:"language"`
	LatestDescription string `json:"latestDescription"`
}

type healthEntity struct {
	EntityValue string `json:"entityValue"`
}

// uuid is a random-looking, version-4-shaped ID unique in this sim; call
// with s.mu held.
func (s *Sim) uuid() string {
	s.seq++
	sum := sha256.Sum256([]byte("uuid" + strconv.Itoa(s.seq)))
	h := hex.EncodeToString(sum[:16])
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// emitEvent sends an event to the interruption queue; call with s.mu
// held.
func (s *Sim) emitEvent(detailType, source string, resources []string, detail any) {
	q := s.interruptionQueue()
	if q == nil {
		return
	}
	ev := ebEvent{Version: "0", ID: s.uuid(), DetailType: detailType, Source: source, Account: ownerID,
		Time: s.now().UTC().Format(time.RFC3339), Region: s.cfg.Region, Resources: resources, Detail: detail}
	b, err := json.Marshal(ev)
	if err != nil {
		s.log.Error("encoding an EventBridge event", zap.String("detail-type", detailType), zap.Error(err))
		return
	}
	q.send(s, string(b), 0)
}

// zonalARN is the instance ARN spot events carry (with the zone, as AWS's
// examples show).
func (s *Sim) zonalARN(in *instance) string { return "arn:aws:ec2:" + in.Zone + ":instance/" + in.ID }

// setState moves an instance to state and sends its state-change
// notification; call with s.mu held.
func (s *Sim) setState(in *instance, state string) {
	if in.State == state {
		return
	}
	in.State = state
	s.emitStateChange(in)
}

// emitStateChange sends an instance's state-change notification (its
// current state); call with s.mu held.
func (s *Sim) emitStateChange(in *instance) {
	s.emitEvent(detailStateChange, "aws.ec2", []string{fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", s.cfg.Region, ownerID, in.ID)},
		stateDetail{InstanceID: in.ID, State: in.State})
}

// emitSpotInterruption sends a spot instance's interruption warning; call
// with s.mu held.
func (s *Sim) emitSpotInterruption(in *instance) {
	if in.Lifecycle == "spot" {
		s.emitEvent(detailSpotInterruption, "aws.ec2", []string{s.zonalARN(in)}, spotDetail{InstanceID: in.ID, InstanceAction: "terminate"})
	}
}

// errNoInstance: the instance is unknown or gone.
var errNoInstance = errors.New("not found")

// liveInstance is a known instance that is not terminated; call with s.mu
// held.
func (s *Sim) liveInstance(id string) (*instance, error) {
	in, ok := s.instances[id]
	if !ok || in.State == "terminated" || in.State == "shutting-down" {
		return nil, fmt.Errorf("instance %s: %w", id, errNoInstance)
	}
	return in, nil
}

// onLiveInstance runs f on a live instance, with s.mu held.
func (s *Sim) onLiveInstance(id string, f func(in *instance) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.liveInstance(id)
	if err != nil {
		return err
	}
	return f(in)
}

// Rebalance sends a rebalance recommendation for a spot instance (EC2
// sends them for spot instances only).
func (s *Sim) Rebalance(id string) error {
	return s.onLiveInstance(id, func(in *instance) error {
		if in.Lifecycle != "spot" {
			return fmt.Errorf("instance %s is not a spot instance: EC2 recommends rebalancing spot instances only", id)
		}
		s.emitEvent(detailRebalance, "aws.ec2", []string{s.zonalARN(in)}, rebalanceDetail{InstanceID: in.ID})
		return nil
	})
}

// ReclaimReservation is the owner of the interruptible capacity
// reservation an instance runs in taking the capacity back: EC2 sends the
// instance's interruption warning (EventBridge only) and terminates it
// after the interruption notice time, which it returns.
func (s *Sim) ReclaimReservation(id string) (time.Time, error) {
	var t time.Time
	err := s.onLiveInstance(id, func(in *instance) error {
		if cr := s.reservation(in.ReservationID); cr == nil || !cr.Interruptible {
			return fmt.Errorf("instance %s does not run in an interruptible capacity reservation", id)
		}
		t = s.now().Add(s.cfg.InterruptionNotice.Duration).UTC().Truncate(time.Second)
		in.Reclaimed = &t
		s.emitEvent(detailReservationInterruption, "aws.ec2", []string{fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", s.cfg.Region, ownerID, in.ID)},
			reservationDetail{InstanceID: in.ID, InstanceAction: "terminate", TerminationTime: t.Format(time.RFC3339), AZID: zoneID(in.Zone)})
		return nil
	})
	return t, err
}

// ScheduleChange sends an AWS Health scheduledChange event of EC2 for an
// instance: code is the event type (DefaultScheduledChange when ""), start
// when the change begins (two weeks ahead when zero); it lasts an hour.
func (s *Sim) ScheduleChange(id, code string, start time.Time) error {
	return s.onLiveInstance(id, func(in *instance) error {
		s.emitScheduledChange(in, code, start)
		return nil
	})
}

// emitScheduledChange sends the AWS Health event of ScheduleChange; call
// with s.mu held.
func (s *Sim) emitScheduledChange(in *instance, code string, start time.Time) {
	if code == "" {
		code = DefaultScheduledChange
	}
	now := s.now().UTC()
	if start.IsZero() {
		start = now.Add(scheduledChangeLead)
	}
	start = start.UTC()
	s.emitEvent(detailHealth, "aws.health", []string{in.ID}, healthDetail{
		EventARN: fmt.Sprintf("arn:aws:health:%s::event/EC2/%s/%s_%s", s.cfg.Region, code, code, strings.ToUpper(s.uuid()[:13])),
		Service:  "EC2", EventTypeCode: code, EventTypeCategory: "scheduledChange", EventScopeCode: "ACCOUNT_SPECIFIC",
		StartTime: start.Format(http.TimeFormat), EndTime: start.Add(time.Hour).Format(http.TimeFormat),
		LastUpdatedTime: now.Format(http.TimeFormat), StatusCode: "upcoming", EventRegion: s.cfg.Region,
		EventDescription: []healthDescription{{Language: "en_US",
			LatestDescription: fmt.Sprintf("EC2 has scheduled %s for instance %s.", code, in.ID)}},
		AffectedEntities: []healthEntity{{EntityValue: in.ID}},
	})
}

// Stop stops an instance as a user would (StopInstances): it is stopping
// now and stopped on the next step; each transition sends its state-change
// notification.
func (s *Sim) Stop(id string) error {
	return s.onLiveInstance(id, func(in *instance) error {
		if in.State == "pending" || in.State == "running" {
			s.setState(in, "stopping")
		}
		return nil
	})
}

// instanceEvent is the body of POST /control/instances/<id>/scheduled-change
// (both fields optional).
type instanceEvent struct {
	EventTypeCode string    `json:"eventTypeCode"`
	StartTime     time.Time `json:"startTime"`
}

// instanceEventPath is the control path of the instance events:
// instances/<id>/<action>.
var instanceEventPath = regexp.MustCompile(`^instances/([^/]+)/(rebalance|scheduled-change|stop|reservation-interruption)$`)

// serveInstanceEvent answers POST /control/instances/<id>/<action>:
// rebalance, scheduled-change or stop.
func (s *Sim) serveInstanceEvent(w http.ResponseWriter, r *http.Request, id, action string) {
	var err error
	switch action {
	case "rebalance":
		err = s.Rebalance(id)
	case "stop":
		err = s.Stop(id)
	case "reservation-interruption":
		_, err = s.ReclaimReservation(id)
	case "scheduled-change":
		var ev instanceEvent
		if r.ContentLength != 0 {
			if derr := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&ev); derr != nil {
				http.Error(w, `{"error":"bad JSON body: want {\"eventTypeCode\",\"startTime\"} (both optional)"}`, http.StatusBadRequest)
				return
			}
		}
		err = s.ScheduleChange(id, ev.EventTypeCode, ev.StartTime)
	}
	if err != nil {
		status := http.StatusConflict
		if errors.Is(err, errNoInstance) {
			status = http.StatusNotFound
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"instanceId": id, "action": action})
}
