// Package defaults fills configuration fields the caller left unset, so a
// constructor lists each default on one line.
package defaults

import "time"

// Number is what Positive accepts: counts and durations.
type Number interface {
	~int | ~int32 | ~int64 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Positive sets *p to def unless *p is already above zero.
func Positive[T Number](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

// Zero sets *p to def when *p holds its type's zero value (an empty
// string, a nil pointer or interface).
func Zero[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Clock sets *now to time.Now when it is nil.
func Clock(now *func() time.Time) {
	if *now == nil {
		*now = time.Now
	}
}
