package events

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// DefaultDedupeTimeout is how long Karpenter's recorder drops an Event
// like one it recorded when the Event names no timeout of its own.
const DefaultDedupeTimeout = 2 * time.Minute

// Dedupe is Karpenter's recorder deduplication (pkg/events/recorder.go):
// an Event with dedupe values is recorded only when no Event with the same
// reason and values was recorded within its timeout. Loops that record an
// Event every pass while a condition holds (a NodePool with no instance
// type, a Node whose grace period is expiring) keep one. Safe for
// concurrent use.
type Dedupe struct {
	now   func() time.Time
	mu    sync.Mutex
	until map[string]time.Time
}

// NewDedupe returns an empty Dedupe on the clock now (time.Now when nil).
func NewDedupe(now func() time.Time) *Dedupe {
	if now == nil {
		now = time.Now
	}
	return &Dedupe{now: now, until: map[string]time.Time{}}
}

// Allow reports whether an Event with reason and values may be recorded
// now and, when it may, holds the key for timeout (DefaultDedupeTimeout
// when zero).
func (d *Dedupe) Allow(timeout time.Duration, reason string, values ...string) bool {
	if timeout <= 0 {
		timeout = DefaultDedupeTimeout
	}
	key := strings.ToLower(reason) + "-" + strings.Join(values, "-")
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, until := range d.until {
		if !now.Before(until) {
			delete(d.until, k)
		}
	}
	if _, held := d.until[key]; held {
		return false
	}
	d.until[key] = now.Add(timeout)
	return true
}

// ObjectKey is what Karpenter dedupes an object's Events by: its UID, or
// its type, namespace and name before the API server gave it one; "" for
// no object.
func ObjectKey(o runtime.Object) string {
	if o == nil || reflect.ValueOf(o).Kind() == reflect.Pointer && reflect.ValueOf(o).IsNil() {
		return ""
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return ""
	}
	if uid := m.GetUID(); uid != "" {
		return string(uid)
	}
	if ns := m.GetNamespace(); ns != "" {
		return fmt.Sprintf("%T/%s/%s", o, ns, m.GetName())
	}
	return fmt.Sprintf("%T/%s", o, m.GetName())
}
