// Package report delivers interruption notices from the node agent to the
// coordinators, reliably.
//
// The request and response bodies are api/agent/v1's.
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	agentv1 "github.com/joiner-dev/joiner/api/agent/v1"
	"github.com/joiner-dev/joiner/internal/backoff"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/logging"
)

// Observer is told about each delivery attempt (metrics). result is acked,
// rejected (a non-200 answer) or error (no answer).
type Observer interface {
	Attempt(result string)
}

// Options configure a Client.
type Options struct {
	// Endpoints are coordinator base URLs (http://host:port); any will do.
	Endpoints []string
	// Token is sent as a bearer token when set.
	Token string
	// TokenFile, when set, is read at each attempt and its content sent as
	// the bearer token (a projected ServiceAccount token the kubelet
	// rotates); it takes precedence over Token.
	TokenFile string
	// TokenSource, when set (and no TokenFile), is asked for the bearer
	// token at each attempt (a node's own credential, see the agent).
	TokenSource func() (string, error)
	// Timeout per attempt (default 5 s).
	Timeout time.Duration
	// RetryBase and RetryMax bound the back-off (defaults 200 ms and 5 s).
	RetryBase, RetryMax time.Duration
	// UserAgent (default joiner-agent).
	UserAgent  string
	HTTPClient *http.Client
	Observer   Observer
}

// Client sends reports to the coordinators.
type Client struct {
	opts Options
	log  *zap.Logger
	next atomic.Uint32 // endpoint rotation
}

// NewClient builds a Client.
func NewClient(log *zap.Logger, o Options) (*Client, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("report: no coordinator endpoints configured")
	}
	for i, e := range o.Endpoints {
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			return nil, fmt.Errorf("report endpoints[%d]: %q: must start with http:// or https://", i, e)
		}
		o.Endpoints[i] = strings.TrimRight(e, "/")
	}
	defaults.Positive(&o.Timeout, 5*time.Second)
	defaults.Positive(&o.RetryBase, 200*time.Millisecond)
	defaults.Positive(&o.RetryMax, 5*time.Second)
	if o.UserAgent == "" {
		o.UserAgent = "joiner-agent"
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	return &Client{opts: o, log: log}, nil
}

// StatusError is a non-200 answer.
type StatusError struct {
	Endpoint   string
	Code       int
	Message    string
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("coordinator %s answered %d: %s", e.Endpoint, e.Code, e.Message)
}

// Deliver sends r until a coordinator acknowledges it (200) or ctx ends.
func (c *Client) Deliver(ctx context.Context, r agentv1.Report) (agentv1.Ack, error) {
	if err := r.Validate(); err != nil {
		return agentv1.Ack{}, fmt.Errorf("report %s: %w", r.ID, err)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return agentv1.Ack{}, fmt.Errorf("encoding report %s: %w", r.ID, err)
	}
	log := c.log.With(zap.String(logging.KeyNotice, r.ID))
	retry := backoff.New(c.opts.RetryBase, c.opts.RetryMax)
	for attempt := 0; ; attempt++ {
		ep := c.opts.Endpoints[int(c.next.Load())%len(c.opts.Endpoints)]
		ack, err := c.send(ctx, ep, body)
		if err == nil {
			c.observe("acked")
			log.Info("interruption report acknowledged", zap.String("endpoint", ep), zap.Uint64("index", ack.Index),
				zap.Bool("duplicate", ack.Duplicate), zap.Int("attempts", attempt+1))
			return ack, nil
		}
		if ctx.Err() != nil {
			return agentv1.Ack{}, fmt.Errorf("delivering report %s: %w (last: %v)", r.ID, ctx.Err(), err)
		}
		c.next.Add(1) // try another replica next time
		wait := retry.Step()
		var se *StatusError
		if errors.As(err, &se) {
			c.observe("rejected")
			if se.RetryAfter > 0 {
				wait = min(se.RetryAfter, c.opts.RetryMax)
			}
			if se.Code >= 400 && se.Code < 500 && se.Code != http.StatusTooManyRequests && se.Code != http.StatusRequestTimeout &&
				se.Code != http.StatusUnauthorized { // a rotated token is read again next attempt
				log.Error("coordinator rejected interruption report; retrying", zap.Error(err), zap.Int("attempt", attempt+1))
			} else {
				log.Warn("interruption report not acknowledged; retrying", zap.Error(err), zap.Int("attempt", attempt+1), zap.Duration("retry-in", wait))
			}
		} else {
			c.observe("error")
			log.Warn("sending interruption report; retrying", zap.Error(err), zap.Int("attempt", attempt+1), zap.Duration("retry-in", wait))
		}
		if !backoff.Sleep(ctx, wait) {
			return agentv1.Ack{}, fmt.Errorf("delivering report %s: %w (last: %v)", r.ID, ctx.Err(), err)
		}
	}
}

func (c *Client) send(ctx context.Context, ep string, body []byte) (agentv1.Ack, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep+agentv1.Path, bytes.NewReader(body))
	if err != nil {
		return agentv1.Ack{}, fmt.Errorf("building request to %s: %w", ep, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", c.opts.UserAgent)
	token := c.opts.Token
	switch {
	case c.opts.TokenFile != "":
		b, err := os.ReadFile(c.opts.TokenFile)
		if err != nil {
			return agentv1.Ack{}, fmt.Errorf("reading the coordinator token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	case c.opts.TokenSource != nil:
		t, err := c.opts.TokenSource()
		if err != nil {
			return agentv1.Ack{}, fmt.Errorf("getting the coordinator token: %w", err)
		}
		token = t
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return agentv1.Ack{}, fmt.Errorf("posting to %s: %w", ep, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return agentv1.Ack{}, fmt.Errorf("reading answer from %s: %w", ep, err)
	}
	if resp.StatusCode != http.StatusOK {
		se := &StatusError{Endpoint: ep, Code: resp.StatusCode}
		var eb agentv1.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
			se.Message = eb.Error
		} else {
			se.Message = strings.TrimSpace(string(b))
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			se.RetryAfter = time.Duration(s) * time.Second
		}
		return agentv1.Ack{}, se
	}
	var ack agentv1.Ack
	if err := json.Unmarshal(b, &ack); err != nil {
		return agentv1.Ack{}, fmt.Errorf("decoding ack from %s: %w", ep, err)
	}
	return ack, nil
}

func (c *Client) observe(result string) {
	if c.opts.Observer != nil {
		c.opts.Observer.Attempt(result)
	}
}
