package view

import (
	"sync"

	"github.com/joiner-dev/joiner/cloud"
)

// Fleet is the cloud's last listing of the cluster's instances (subnet,
// security groups, image), published by the lifecycle's garbage
// collection; drift reads it to tell whether a node still sits where its
// class's selectors point. A Fleet that was never published knows nothing,
// and nothing is inferred from it.
type Fleet struct {
	mu   sync.RWMutex
	byID map[string]cloud.Instance
}

// NewFleet returns an empty Fleet.
func NewFleet() *Fleet { return &Fleet{} }

// Publish replaces the listing.
func (f *Fleet) Publish(insts []cloud.Instance) {
	byID := make(map[string]cloud.Instance, len(insts))
	for _, in := range insts {
		byID[in.ID] = in
	}
	f.mu.Lock()
	f.byID = byID
	f.mu.Unlock()
}

// Instance returns the listed instance id.
func (f *Fleet) Instance(id string) (cloud.Instance, bool) {
	if f == nil {
		return cloud.Instance{}, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	in, ok := f.byID[id]
	return in, ok
}
