package sim

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	agentimds "github.com/joiner-dev/joiner/agent/imds"
)

// TestAgentIMDSClient runs the agent's IMDSv2 client (aws-sdk-go-v2
// feature/ec2/imds) against one instance's IMDS path.
func TestAgentIMDSClient(t *testing.T) {
	s := New(Options{Config: DefaultConfig()})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	launchWith(t, s, "lt", "m5.large", nil, url.Values{"TargetCapacitySpecification.DefaultTargetCapacityType": {"spot"}})
	id := s.Instances()[0].ID
	ictx, cancel := context.WithCancel(context.Background())
	defer cancel()
	endpoint, err := s.ServeIMDS(ictx, id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentimds.NewClient(agentimds.ClientOptions{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := c.Get(ctx, agentimds.PathInstanceID)
	if err != nil || string(got) != id {
		t.Fatalf("instance-id = %q, %v", got, err)
	}
	if _, err := c.Get(ctx, agentimds.PathSpotInstanceAction); !errors.Is(err, agentimds.ErrNotFound) {
		t.Fatalf("instance-action before the interruption: %v", err)
	}
	if _, err := s.Interrupt(id); err != nil {
		t.Fatal(err)
	}
	got, err = c.Get(ctx, agentimds.PathSpotInstanceAction)
	if err != nil || !strings.Contains(string(got), `"action":"terminate"`) {
		t.Fatalf("instance-action = %q, %v", got, err)
	}
	if _, err := agentimds.ParseInstanceAction(got); err != nil {
		t.Errorf("the agent cannot parse the notice: %v", err)
	}
}
