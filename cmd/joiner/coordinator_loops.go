package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/record"

	"github.com/joiner-dev/joiner/coordinator/cluster"
	disruptionctl "github.com/joiner-dev/joiner/coordinator/disruption/controller"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/interruption"
	"github.com/joiner-dev/joiner/coordinator/lifecycle"
	"github.com/joiner-dev/joiner/coordinator/provisioner"
	"github.com/joiner-dev/joiner/coordinator/termination"
)

// leaderWiring is what the lifecycle, termination, interruption and
// disruption loops are built from.
type leaderWiring struct {
	flags       *coordinatorFlags
	deps        *leaderDeps
	state       *fsm.FSM
	proposer    cluster.RaftProposer
	provisioner *provisioner.Provisioner
	recorder    record.EventRecorder
	reg         prometheus.Registerer
	log         *zap.Logger
}

// moreLeaderLoops builds the NodeClaim lifecycle, termination,
// interruption and disruption loops.
func moreLeaderLoops(w leaderWiring) ([]namedLoop, error) {
	var loops []namedLoop
	lc, err := lifecycle.New(lifecycle.Config{RemoveStartupTaints: w.flags.leader.simulated}, w.deps.cache, w.deps.clients,
		w.deps.clients.Kube, w.state, w.proposer, w.deps.provider, w.reg, w.recorder, w.log)
	if err != nil {
		return nil, err
	}
	loops = append(loops, namedLoop{"lifecycle", lc.Run})

	term, err := termination.New(termination.Config{Replacements: w.provisioner}, w.deps.cache, w.deps.clients, w.deps.clients.Kube, w.state, w.proposer,
		w.deps.provider, w.reg, w.recorder, w.log)
	if err != nil {
		return nil, err
	}
	loops = append(loops, namedLoop{"termination", term.Run})

	intr, err := interruption.New(interruption.Config{}, w.deps.cache, w.deps.clients, w.state, w.proposer, w.reg, w.recorder, w.log)
	if err != nil {
		return nil, err
	}
	loops = append(loops, namedLoop{"interruption", intr.Run})

	dis, err := disruptionctl.New(disruptionctl.Config{}, w.provisioner, w.deps.cache, w.state, w.proposer, w.deps.clients,
		disruptionctl.NodeClient(w.deps.clients.Kube), w.reg, w.recorder, w.log)
	if err != nil {
		return nil, err
	}
	loops = append(loops, namedLoop{"disruption", dis.Run})
	return loops, nil
}
