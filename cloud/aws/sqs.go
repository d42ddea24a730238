package aws

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/joiner-dev/joiner/cloud"
)

// SQSAPI is the part of SQS the interruption queue calls (*sqs.Client
// implements it).
type SQSAPI interface {
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Receive parameters, Karpenter's: up to 10 messages a call, each hidden
// from other receivers for 20 s, waiting up to 20 s (SQS's longest long
// poll) for the first.
const (
	receiveMax        = 10
	receiveVisibility = 20
	receiveWait       = 20
)

// queueName is what SQS accepts as a queue name: 1 to 80 letters, digits,
// hyphens and underscores (a FIFO queue's ends in .fifo).
var queueName = regexp.MustCompile(`^([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$`)

// Queue is the interruption queue (Karpenter's settings.interruptionQueue):
// the SQS queue EventBridge rules send EC2 and AWS Health events to.
// Receive parses what it gets; Delete removes a message once acted on.
type Queue struct {
	sqs  SQSAPI
	name string

	mu  sync.Mutex
	url string // resolved on first use, forgotten when the queue is gone
}

// NewQueue returns the queue called name, reached through api.
func NewQueue(api SQSAPI, name string) (*Queue, error) {
	if api == nil {
		return nil, errors.New("interruption queue: SQS client is required")
	}
	if !queueName.MatchString(name) {
		return nil, fmt.Errorf("interruption queue name %q: want 1 to 80 letters, digits, hyphens or underscores", name)
	}
	return &Queue{sqs: api, name: name}, nil
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// queueURL returns the queue's URL, asking SQS the first time.
func (q *Queue) queueURL(ctx context.Context) (string, error) {
	q.mu.Lock()
	url := q.url
	q.mu.Unlock()
	if url != "" {
		return url, nil
	}
	out, err := q.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)})
	if err != nil {
		return "", fmt.Errorf("getting the URL of interruption queue %s: %w", q.name, classifySQS(err))
	}
	url = aws.ToString(out.QueueUrl)
	q.mu.Lock()
	q.url = url
	q.mu.Unlock()
	return url, nil
}

// forget drops the cached URL after SQS said the queue does not exist (it
// may be recreated).
func (q *Queue) forget(err error) error {
	if errors.Is(err, cloud.ErrNotFound) {
		q.mu.Lock()
		q.url = ""
		q.mu.Unlock()
	}
	return err
}

// Receive long-polls the queue (up to 20 s, less when ctx ends first) and
// returns the messages it got, parsed; a message that does not parse
// comes back as a no-op with Err set. Errors wrap cloud.ErrNotFound (the
// queue does not exist) or cloud.ErrRetryable (throttling, server,
// network).
func (q *Queue) Receive(ctx context.Context) ([]cloud.InterruptionMessage, error) {
	url, err := q.queueURL(ctx)
	if err != nil {
		return nil, err
	}
	out, err := q.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: receiveMax, VisibilityTimeout: receiveVisibility, WaitTimeSeconds: receiveWait,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return nil, q.forget(fmt.Errorf("receiving from interruption queue %s: %w", q.name, classifySQS(err)))
	}
	msgs := make([]cloud.InterruptionMessage, 0, len(out.Messages))
	for _, m := range out.Messages {
		pm := parseEvent(aws.ToString(m.Body))
		pm.ID, pm.Receipt = aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle)
		if pm.Time.IsZero() {
			pm.Time = sentTime(m.Attributes)
		}
		msgs = append(msgs, pm)
	}
	return msgs, nil
}

// Delete deletes a received message by its receipt handle.
func (q *Queue) Delete(ctx context.Context, receipt string) error {
	url, err := q.queueURL(ctx)
	if err != nil {
		return err
	}
	if _, err := q.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(receipt)}); err != nil {
		return q.forget(fmt.Errorf("deleting a message from interruption queue %s: %w", q.name, classifySQS(err)))
	}
	return nil
}

// sentTime reads the SentTimestamp attribute (epoch milliseconds).
func sentTime(attrs map[string]string) time.Time {
	ms, err := strconv.ParseInt(attrs[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// classifySQS is classify for SQS: a queue that does not exist (the JSON
// protocol's QueueDoesNotExist, the query-compatible
// AWS.SimpleQueueService.NonExistentQueue) is cloud.ErrNotFound. An
// invalid receipt handle (ReceiptHandleIsInvalid) stays a plain API error:
// not retryable.
func classifySQS(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if code := ae.ErrorCode(); code == "QueueDoesNotExist" || code == "AWS.SimpleQueueService.NonExistentQueue" {
			return fmt.Errorf("%w: %w", cloud.ErrNotFound, err)
		}
	}
	return classify(err)
}
