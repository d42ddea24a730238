package interruption_test

import (
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/interruption"
	"github.com/joiner-dev/joiner/coordinator/kube"
)

// What the leader wires in satisfies the handler's interfaces.
var (
	_ interruption.Cache    = (*kube.Cache)(nil)
	_ interruption.Claims   = (*kube.Clients)(nil)
	_ interruption.State    = (*fsm.FSM)(nil)
	_ interruption.Proposer = cluster.RaftProposer{}
)
