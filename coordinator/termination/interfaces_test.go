package termination_test

import (
	"github.com/joiner-dev/joiner/agent/drain"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/termination"
)

// What the leader wires in satisfies the controller's interfaces.
var (
	_ termination.Cache    = (*kube.Cache)(nil)
	_ termination.Claims   = (*kube.Clients)(nil)
	_ termination.State    = (*fsm.FSM)(nil)
	_ termination.Proposer = cluster.RaftProposer{}
	_ termination.Cloud    = (*joineraws.Provider)(nil)
	_ termination.Drainer  = (*drain.Drainer)(nil)
)
