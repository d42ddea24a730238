package karpmetrics

// StatusRemembered is how many objects the observer remembers.
func StatusRemembered(o *StatusObserver) int {
	n := 0
	for _, k := range o.kinds {
		n += len(k.seen)
	}
	return n
}
