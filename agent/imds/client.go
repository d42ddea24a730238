package imds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	sdkimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/joiner-dev/joiner/internal/defaults"
)

// Metadata paths (relative to /latest/meta-data/).
const (
	PathSpotInstanceAction = "spot/instance-action"
	PathRebalance          = "events/recommendations/rebalance"
	PathScheduledEvents    = "events/maintenance/scheduled"
	PathLifecycleState     = "autoscaling/target-lifecycle-state"
	PathInstanceID         = "instance-id"
)

// ClientOptions configure the IMDS client.
type ClientOptions struct {
	// Endpoint, e.g. http://127.0.0.1:1338 (default: the EC2 link-local address).
	Endpoint string
	// AllowIMDSv1 lets the client fall back to IMDSv1 when no token can be
	// had. Default false: a failing token PUT is an error (it usually means
	// the hop limit is too low for where the agent runs).
	AllowIMDSv1 bool
	// TokenTTL is the lifetime requested for each IMDSv2 token (default 6h,
	// the IMDS maximum). The client refreshes a token a quarter of its TTL
	// (at most 60 s) before it expires.
	TokenTTL time.Duration
	// Timeout bounds one metadata read including retries (default 2 s).
	Timeout time.Duration
	// HTTPClient overrides the transport (tests).
	HTTPClient *http.Client
}

// Client reads instance metadata over IMDSv2.
type Client struct {
	sdk     *sdkimds.Client
	timeout time.Duration
}

// NewClient builds a Client.
func NewClient(o ClientOptions) (*Client, error) {
	if o.TokenTTL == 0 {
		o.TokenTTL = 6 * time.Hour
	}
	if o.TokenTTL < time.Second || o.TokenTTL > 6*time.Hour {
		return nil, fmt.Errorf("imds token TTL %s: must be between 1s and 6h", o.TokenTTL)
	}
	defaults.Positive(&o.Timeout, 2*time.Second)
	base := http.DefaultTransport
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		base = o.HTTPClient.Transport
	}
	hc := &http.Client{Transport: &tokenTTLTransport{base: base, ttl: o.TokenTTL}}
	fallback := aws.FalseTernary
	if o.AllowIMDSv1 {
		fallback = aws.TrueTernary
	}
	sdk := sdkimds.New(sdkimds.Options{
		Endpoint:          o.Endpoint,
		HTTPClient:        hc,
		EnableFallback:    fallback,
		ClientEnableState: sdkimds.ClientEnabled,
		// Two quick attempts: the watcher polls again within a second anyway.
		Retryer: retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 2
			so.MaxBackoff = 200 * time.Millisecond
		}),
	})
	return &Client{sdk: sdk, timeout: o.Timeout}, nil
}

// ErrNotFound is returned by Get when IMDS answers 404 (nothing there).
var ErrNotFound = errors.New("imds: not found")

// Get reads one metadata path. A 404 is ErrNotFound.
func (c *Client) Get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	out, err := c.sdk.GetMetadata(ctx, &sdkimds.GetMetadataInput{Path: path})
	if err != nil {
		var se interface{ HTTPStatusCode() int }
		if errors.As(err, &se) && se.HTTPStatusCode() == http.StatusNotFound {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("reading imds %s: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading imds %s body: %w", path, err)
	}
	return b, nil
}

// tokenTTLTransport sets the TTL asked for on token PUTs and makes the SDK
// believe the token lives a little shorter than it does, so it is refreshed
// before IMDS expires it (the SDK otherwise refreshes only after expiry and
// relies on a 401 round trip).
type tokenTTLTransport struct {
	base http.RoundTripper
	ttl  time.Duration
}

const ttlHeader = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"

func (t *tokenTTLTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut || req.URL.Path != "/latest/api/token" {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	secs := int64(t.ttl / time.Second)
	req.Header.Set(ttlHeader, strconv.FormatInt(secs, 10))
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	granted := secs
	if v, perr := strconv.ParseInt(resp.Header.Get(ttlHeader), 10, 64); perr == nil && v > 0 {
		granted = v
	}
	resp.Header.Set(ttlHeader, strconv.FormatInt(refreshAfter(granted), 10))
	return resp, nil
}

// refreshAfter is how long (seconds) a token granted for ttl seconds is used.
func refreshAfter(ttl int64) int64 {
	margin := min(ttl/4, 60)
	return max(ttl-margin, 1)
}
