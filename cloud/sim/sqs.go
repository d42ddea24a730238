package sim

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The simulated interruption queue: the SQS queue Config.InterruptionQueue
// names, which the sim's EventBridge rules fill (see eventbridge.go). It
// speaks SQS's JSON protocol (X-Amz-Target: AmazonSQS.<operation>) for
// the calls a consumer makes, GetQueueUrl, ReceiveMessage and
// DeleteMessage, and SendMessage for tests. Its attributes are those of
// the queue Karpenter's getting-started stack creates: messages kept 300 s,
// a 30 s visibility timeout (SQS's default), no delay, short polls unless
// the request asks for a wait.
const (
	queueRetention  = 300 * time.Second
	queueVisibility = 30 * time.Second
	// maxMessageBody is SQS's limit on a message body (256 KiB).
	maxMessageBody = 262144
	maxReceive     = 10
	maxWaitSeconds = 20
	maxVisibility  = 43200
	maxDelay       = 900
	// receiptPrefix starts every receipt handle this sim issues.
	receiptPrefix = "AQEB"
)

// sqsQueue is the queue's state; the Sim's mutex guards it.
type sqsQueue struct {
	name string
	msgs []*sqsMessage // in send order
	// changed is closed (and replaced) when a message is sent, waking
	// long polls.
	changed chan struct{}
}

type sqsMessage struct {
	id, body, md5 string
	sent          time.Time
	// visibleAt: the message is received again from then on (after its
	// delay, or after the visibility timeout of its last receive).
	visibleAt    time.Time
	firstReceive time.Time
	receives     int
	receipt      string // the latest receive's handle
}

// sqsError is an SQS error: its HTTP status, the JSON protocol's error
// type (com.amazonaws.sqs#<type>) and the query-compatible code SDKs
// report (header x-amzn-query-error).
type sqsError struct {
	status          int
	typ, query, msg string
}

func sqsErr(status int, typ, query, format string, args ...any) *sqsError {
	return &sqsError{status: status, typ: typ, query: query, msg: fmt.Sprintf(format, args...)}
}

func invalidValue(format string, args ...any) *sqsError {
	return sqsErr(http.StatusBadRequest, "InvalidParameterValue", "InvalidParameterValue", format, args...)
}

func missingParam(name string) *sqsError {
	return sqsErr(http.StatusBadRequest, "MissingParameter", "MissingParameter", "The request must contain the parameter %s.", name)
}

var errNoQueue = sqsErr(http.StatusBadRequest, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
	"The specified queue does not exist.")

// sqsActions are the simulated SQS operations.
var sqsActions = map[string]func(s *Sim, ctx context.Context, body []byte) (any, *sqsError){
	"GetQueueUrl":    (*Sim).sqsGetQueueURL,
	"ReceiveMessage": (*Sim).sqsReceive,
	"DeleteMessage":  (*Sim).sqsDelete,
	"SendMessage":    (*Sim).sqsSend,
}

// serveSQS answers the SQS JSON API.
func (s *Sim) serveSQS(w http.ResponseWriter, r *http.Request, target string, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	op := strings.TrimPrefix(target, "AmazonSQS.")
	h, ok := sqsActions[op]
	if !ok {
		writeJSONError(w, http.StatusBadRequest, "UnsupportedOperation", fmt.Sprintf("operation %s is not simulated", target))
		return
	}
	s.mu.Lock()
	s.calls[op]++
	s.mu.Unlock()
	out, serr := h(s, r.Context(), body)
	if serr != nil {
		if serr.query != "" {
			w.Header().Set("X-Amzn-Query-Error", serr.query+";Sender")
		}
		writeJSONError(w, serr.status, "com.amazonaws.sqs#"+serr.typ, serr.msg)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// decodeSQS reads a request body into in.
func decodeSQS(body []byte, in any) *sqsError {
	if err := json.Unmarshal(body, in); err != nil {
		return sqsErr(http.StatusBadRequest, "SerializationException", "", "the request body is not valid JSON: %v", err)
	}
	return nil
}

// queueURL is the queue's URL, as SQS writes it.
func (s *Sim) queueURL(name string) string {
	return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", s.cfg.Region, ownerID, name)
}

// interruptionQueue is the configured queue (nil when none is); call with
// s.mu held.
func (s *Sim) interruptionQueue() *sqsQueue {
	if s.cfg.InterruptionQueue == "" {
		return nil
	}
	if s.queue == nil || s.queue.name != s.cfg.InterruptionQueue {
		s.queue = &sqsQueue{name: s.cfg.InterruptionQueue, changed: make(chan struct{})}
	}
	return s.queue
}

// queueByURL is the queue a request's QueueUrl names (its last path
// segment, under this sim's account); call with s.mu held.
func (s *Sim) queueByURL(url *string) (*sqsQueue, *sqsError) {
	u, serr := required("QueueUrl", url)
	if serr != nil {
		return nil, serr
	}
	parts := strings.Split(strings.TrimSuffix(u, "/"), "/")
	q := s.interruptionQueue()
	if len(parts) < 2 || q == nil || parts[len(parts)-1] != q.name || parts[len(parts)-2] != ownerID {
		return nil, errNoQueue
	}
	return q, nil
}

// required is a request's string parameter that must be set.
func required(name string, v *string) (string, *sqsError) {
	if v == nil || *v == "" {
		return "", missingParam(name)
	}
	return *v, nil
}

// queueRef is the QueueUrl of a request about one queue.
type queueRef struct {
	QueueURL *string `json:"QueueUrl"`
}

func (r *queueRef) url() *string { return r.QueueURL }

// lockedQueue decodes body into in and returns the queue its QueueUrl
// names and the value of in's required parameter name (field points to
// it), with s.mu held (released when it fails).
func (s *Sim) lockedQueue(body []byte, in interface{ url() *string }, name string, field **string) (*sqsQueue, string, *sqsError) {
	if err := decodeSQS(body, in); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	q, serr := s.queueByURL(in.url())
	if serr != nil {
		s.mu.Unlock()
		return nil, "", serr
	}
	v, serr := required(name, *field)
	if serr != nil {
		s.mu.Unlock()
		return nil, "", serr
	}
	return q, v, nil
}

func (s *Sim) sqsGetQueueURL(_ context.Context, body []byte) (any, *sqsError) {
	var in struct {
		QueueName              *string `json:"QueueName"`
		QueueOwnerAWSAccountID *string `json:"QueueOwnerAWSAccountId"`
	}
	if err := decodeSQS(body, &in); err != nil {
		return nil, err
	}
	name, serr := required("QueueName", in.QueueName)
	if serr != nil {
		return nil, serr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.interruptionQueue()
	if q == nil || q.name != name || (in.QueueOwnerAWSAccountID != nil && *in.QueueOwnerAWSAccountID != ownerID) {
		return nil, errNoQueue
	}
	return map[string]string{"QueueUrl": s.queueURL(q.name)}, nil
}

// receiveIn is a ReceiveMessage request.
type receiveIn struct {
	queueRef
	MaxNumberOfMessages         *int32   `json:"MaxNumberOfMessages"`
	VisibilityTimeout           *int32   `json:"VisibilityTimeout"`
	WaitTimeSeconds             *int32   `json:"WaitTimeSeconds"`
	AttributeNames              []string `json:"AttributeNames"`
	MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
}

// sqsMessageOut is a received message.
type sqsMessageOut struct {
	MessageID     string            `json:"MessageId"`
	ReceiptHandle string            `json:"ReceiptHandle"`
	MD5OfBody     string            `json:"MD5OfBody"`
	Body          string            `json:"Body"`
	Attributes    map[string]string `json:"Attributes,omitempty"`
}

// check validates the request's numbers as SQS does and returns how many
// messages to return, their visibility timeout and the long-poll wait.
func (in receiveIn) check() (n int, vis, wait time.Duration, err *sqsError) {
	n, vis = 1, queueVisibility
	if v := in.MaxNumberOfMessages; v != nil {
		if *v < 1 || *v > maxReceive {
			return 0, 0, 0, invalidValue("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and %d, if provided.", *v, maxReceive)
		}
		n = int(*v)
	}
	if v := in.VisibilityTimeout; v != nil {
		if *v < 0 || *v > maxVisibility {
			return 0, 0, 0, invalidValue("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= %d, if provided.", *v, maxVisibility)
		}
		vis = time.Duration(*v) * time.Second
	}
	if v := in.WaitTimeSeconds; v != nil {
		if *v < 0 || *v > maxWaitSeconds {
			return 0, 0, 0, invalidValue("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= %d, if provided.", *v, maxWaitSeconds)
		}
		wait = time.Duration(*v) * time.Second
	}
	return n, vis, wait, nil
}

// sqsReceive returns the visible messages (at most MaxNumberOfMessages),
// hiding each for the visibility timeout. With WaitTimeSeconds it long
// polls: it returns as soon as a message is visible, when the wait ends,
// or when the request or the sim ends.
func (s *Sim) sqsReceive(ctx context.Context, body []byte) (any, *sqsError) {
	var in receiveIn
	if err := decodeSQS(body, &in); err != nil {
		return nil, err
	}
	n, vis, wait, serr := in.check()
	if serr != nil {
		return nil, serr
	}
	attrs := append(append([]string{}, in.AttributeNames...), in.MessageSystemAttributeNames...)
	var stop <-chan struct{}
	s.mu.Lock()
	if s.runCtx != nil {
		stop = s.runCtx.Done()
	}
	s.mu.Unlock()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		q, serr := s.queueByURL(in.QueueURL)
		if serr != nil {
			s.mu.Unlock()
			return nil, serr
		}
		now := s.now()
		got := q.receive(s, now, n, vis, attrs)
		changed := q.changed
		next, pending := q.nextVisible(now)
		s.mu.Unlock()
		if len(got) > 0 || wait == 0 {
			return received(got), nil
		}
		if !waitForMessage(ctx, stop, deadline.C, changed, next, pending) {
			return received(nil), nil
		}
	}
}

// waitForMessage waits until a message may be visible: one was sent, or
// a hidden one's time came (after, when pending). False when the wait,
// the request or the sim ended first.
func waitForMessage(ctx context.Context, stop <-chan struct{}, deadline <-chan time.Time, changed <-chan struct{},
	after time.Duration, pending bool) bool {
	var visible <-chan time.Time
	if pending {
		t := time.NewTimer(after)
		defer t.Stop()
		visible = t.C
	}
	select {
	case <-changed:
	case <-visible:
	case <-deadline:
		return false
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
	return true
}

// received is a ReceiveMessage response: {} when there is no message, as
// SQS answers.
func received(msgs []sqsMessageOut) map[string][]sqsMessageOut {
	if len(msgs) == 0 {
		return map[string][]sqsMessageOut{}
	}
	return map[string][]sqsMessageOut{"Messages": msgs}
}

// receive drops messages past the retention period, then receives up to
// n visible messages.
func (q *sqsQueue) receive(s *Sim, now time.Time, n int, vis time.Duration, attrs []string) []sqsMessageOut {
	kept := q.msgs[:0]
	for _, m := range q.msgs {
		if now.Sub(m.sent) < queueRetention {
			kept = append(kept, m)
		}
	}
	q.msgs = kept
	var out []sqsMessageOut
	for _, m := range q.msgs {
		if len(out) == n {
			break
		}
		if now.Before(m.visibleAt) {
			continue
		}
		m.receives++
		if m.firstReceive.IsZero() {
			m.firstReceive = now
		}
		s.seq++
		m.receipt = receiptPrefix + base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s/%s/%d", q.name, m.id, s.seq))
		m.visibleAt = now.Add(vis)
		out = append(out, sqsMessageOut{MessageID: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5, Body: m.body,
			Attributes: m.attributes(attrs)})
	}
	return out
}

// attributes are the system attributes a receive asked for.
func (m *sqsMessage) attributes(names []string) map[string]string {
	all := map[string]string{
		"SentTimestamp":                    strconv.FormatInt(m.sent.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.receives),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
		"SenderId":                         ownerID,
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			return all
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// nextVisible is how long until the next hidden message becomes visible
// (ok false: none is hidden).
func (q *sqsQueue) nextVisible(now time.Time) (after time.Duration, ok bool) {
	for _, m := range q.msgs {
		if d := m.visibleAt.Sub(now); d > 0 && (!ok || d < after) {
			after, ok = d, true
		}
	}
	return after, ok
}

func (s *Sim) sqsDelete(_ context.Context, body []byte) (any, *sqsError) {
	var in struct {
		queueRef
		ReceiptHandle *string `json:"ReceiptHandle"`
	}
	q, handle, serr := s.lockedQueue(body, &in, "ReceiptHandle", &in.ReceiptHandle)
	if serr != nil {
		return nil, serr
	}
	defer s.mu.Unlock()
	name, id, ok := parseReceipt(handle)
	if !ok || name != q.name {
		return nil, sqsErr(http.StatusNotFound, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid",
			"The input receipt handle \"%s\" is not a valid receipt handle.", handle)
	}
	// A handle of an earlier receive, or of a message already deleted,
	// succeeds without deleting anything (as SQS documents).
	for i, m := range q.msgs {
		if m.id == id && m.receipt == handle {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			break
		}
	}
	return struct{}{}, nil
}

// parseReceipt reads a receipt handle this sim issued.
func parseReceipt(h string) (queue, id string, ok bool) {
	rest, found := strings.CutPrefix(h, receiptPrefix)
	if !found {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return "", "", false
	}
	parts := strings.Split(string(b), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

func (s *Sim) sqsSend(_ context.Context, body []byte) (any, *sqsError) {
	var in struct {
		queueRef
		MessageBody  *string `json:"MessageBody"`
		DelaySeconds *int32  `json:"DelaySeconds"`
	}
	q, msg, serr := s.lockedQueue(body, &in, "MessageBody", &in.MessageBody)
	if serr != nil {
		return nil, serr
	}
	defer s.mu.Unlock()
	if err := checkMessageBody(msg); err != nil {
		return nil, err
	}
	var delay time.Duration
	if d := in.DelaySeconds; d != nil {
		if *d < 0 || *d > maxDelay {
			return nil, invalidValue("Value %d for parameter DelaySeconds is invalid. Reason: Must be >= 0 and <= %d, if provided.", *d, maxDelay)
		}
		delay = time.Duration(*d) * time.Second
	}
	m := q.send(s, msg, delay)
	return map[string]string{"MessageId": m.id, "MD5OfMessageBody": m.md5}, nil
}

// checkMessageBody applies SQS's limits: at most 256 KiB of the Unicode
// characters XML allows.
func checkMessageBody(b string) *sqsError {
	if len(b) > maxMessageBody {
		return invalidValue("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", maxMessageBody)
	}
	valid := utf8.ValidString(b)
	for _, r := range b {
		if !valid || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || (r >= 0xD800 && r <= 0xDFFF) || r == 0xFFFE || r == 0xFFFF {
			return sqsErr(http.StatusBadRequest, "InvalidMessageContents", "InvalidMessageContents",
				"Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
		}
	}
	return nil
}

// send appends a message, visible after delay, and wakes long polls; call
// with s.mu held.
func (q *sqsQueue) send(s *Sim, body string, delay time.Duration) *sqsMessage {
	sum := md5.Sum([]byte(body))
	now := s.now()
	m := &sqsMessage{id: s.uuid(), body: body, md5: hex.EncodeToString(sum[:]), sent: now, visibleAt: now.Add(delay)}
	q.msgs = append(q.msgs, m)
	close(q.changed)
	q.changed = make(chan struct{})
	return m
}

// QueueMessages counts the interruption queue's messages: visible ones and
// those received but neither deleted nor visible again (in flight or
// delayed).
func (s *Sim) QueueMessages() (visible, hidden int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.interruptionQueue()
	if q == nil {
		return 0, 0
	}
	now := s.now()
	for _, m := range q.msgs {
		switch {
		case now.Sub(m.sent) >= queueRetention:
		case now.Before(m.visibleAt):
			hidden++
		default:
			visible++
		}
	}
	return visible, hidden
}
