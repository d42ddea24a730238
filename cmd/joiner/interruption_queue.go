package main

import (
	"fmt"

	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/coordinator/interruption"
)

// interruptionQueue is the queue --interruption-queue names (nil when it
// is unset: agents' IMDS reports only).
func (f *leaderFlags) interruptionQueue(api joineraws.SQSAPI) (interruption.Queue, error) {
	if f.queueName == "" {
		return nil, nil
	}
	q, err := joineraws.NewQueue(api, f.queueName)
	if err != nil {
		return nil, fmt.Errorf("--interruption-queue: %w", err)
	}
	return q, nil
}
