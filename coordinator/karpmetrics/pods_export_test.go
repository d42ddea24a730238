package karpmetrics

import "time"

// SetPodsClock sets the pod observer's clock.
func SetPodsClock(p *Pods, now func() time.Time) { p.now = now }
