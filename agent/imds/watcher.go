package imds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/joiner-dev/joiner/internal/backoff"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/logging"
)

// Getter reads one metadata path; *Client implements it. A 404 is ErrNotFound.
type Getter interface {
	Get(ctx context.Context, path string) ([]byte, error)
}

// Observer receives watcher events (metrics). Nil methods are not called.
type Observer interface {
	// PollError is called for each failed read of path.
	PollError(path string)
	// PollOK is called after each round in which IMDS answered at least one
	// path (the service is reachable and tokens work).
	PollOK()
}

// WatcherOptions configure a Watcher.
type WatcherOptions struct {
	// Interval between polls (default 1 s).
	Interval time.Duration
	// Kinds to watch (default all).
	Kinds []Kind
	// InstanceID; when empty the watcher reads it from IMDS first.
	InstanceID string
	Deadlines  Deadlines
	// MaxBackoff caps the per-path back-off after errors (default 30 s)
	// of the paths whose notices warn hours or days ahead (rebalance
	// recommendations, scheduled events) and of the instance ID.
	MaxBackoff time.Duration
	// UrgentMaxBackoff caps it for the spot instance-action and ASG
	// target-lifecycle paths (default 2 intervals): their notices give two
	// minutes, so a notice must not wait out a long back-off (NTH polls
	// every 2 s without one).
	UrgentMaxBackoff time.Duration
	Observer         Observer
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Watcher polls IMDS and reports each new notice once, and the end of
// each scheduled event it reported (see Notice.Ended).
type Watcher struct {
	get  Getter
	log  *zap.Logger
	opts WatcherOptions
	// seen maps a notice's dedupe key to the first notice seen with it.
	seen  map[string]Notice
	paths []*pathState
	// mu guards live, which Expect writes from another goroutine.
	mu sync.Mutex
	// live maps the dedupe key of each scheduled event reported (or
	// expected) and not yet ended to its notice.
	live map[string]Notice
}

type pathState struct {
	path       string
	kind       Kind
	maxBackoff time.Duration
	failures   int
	backoff    wait.Backoff
	nextTry    time.Time
	lastError  string
}

// NewWatcher builds a Watcher.
func NewWatcher(get Getter, log *zap.Logger, o WatcherOptions) *Watcher {
	defaults.Positive(&o.Interval, time.Second)
	if len(o.Kinds) == 0 {
		o.Kinds = Kinds
	}
	defaults.Positive(&o.MaxBackoff, 30*time.Second)
	defaults.Positive(&o.UrgentMaxBackoff, 2*o.Interval)
	defaults.Clock(&o.Now)
	o.Deadlines = o.Deadlines.withDefaults()
	w := &Watcher{get: get, log: log, opts: o, seen: map[string]Notice{}, live: map[string]Notice{}}
	for _, k := range o.Kinds {
		p := &pathState{path: pathOf(k), kind: k, maxBackoff: o.MaxBackoff}
		if k == KindSpotInterruption || k == KindASGLifecycle {
			p.maxBackoff = min(o.UrgentMaxBackoff, o.MaxBackoff)
		}
		w.paths = append(w.paths, p)
	}
	return w
}

// Expect tells the watcher of notices an earlier agent process acted on
// (read back from the node): a scheduled event among them that the next
// read of IMDS does not show active is reported ended, although this
// watcher never reported it. One that is active is reported as new as
// usual. Other kinds never end and are ignored. Safe to call while Run
// polls.
func (w *Watcher) Expect(ns ...Notice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range ns {
		if n.Kind != KindScheduledEvent {
			continue
		}
		if _, ok := w.live[dedupeKey(n)]; !ok {
			w.live[dedupeKey(n)] = n
		}
	}
}

func pathOf(k Kind) string {
	switch k {
	case KindSpotInterruption:
		return PathSpotInstanceAction
	case KindRebalance:
		return PathRebalance
	case KindScheduledEvent:
		return PathScheduledEvents
	case KindASGLifecycle:
		return PathLifecycleState
	}
	return ""
}

// InstanceID returns the instance ID (after Run has resolved it).
func (w *Watcher) InstanceID() string { return w.opts.InstanceID }

// ResolveInstanceID reads the instance ID, retrying with back-off until ctx ends.
func (w *Watcher) ResolveInstanceID(ctx context.Context) (string, error) {
	if w.opts.InstanceID != "" {
		return w.opts.InstanceID, nil
	}
	retry := backoff.New(w.opts.Interval, w.opts.MaxBackoff)
	for attempt := 0; ; attempt++ {
		b, err := w.get.Get(ctx, PathInstanceID)
		if err == nil && len(b) > 0 {
			w.opts.InstanceID = string(b)
			return w.opts.InstanceID, nil
		}
		if err == nil {
			err = errors.New("empty instance-id")
		}
		w.observeError(PathInstanceID)
		w.log.Warn("reading instance id from imds", zap.Error(err), zap.Int("attempt", attempt+1))
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("reading instance id: %w", ctx.Err())
		case <-time.After(retry.Step()):
		}
	}
}

// Run polls until ctx ends, calling onNotice (from the Run goroutine) once
// for each new notice, and once more, with Ended set, when a scheduled
// event it reported (or was told to Expect) is no longer active. It
// returns ctx's error.
func (w *Watcher) Run(ctx context.Context, onNotice func(Notice)) error {
	if _, err := w.ResolveInstanceID(ctx); err != nil {
		return err
	}
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		for _, n := range w.Poll(ctx) {
			onNotice(n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Poll reads every path that is not backing off once and returns the new
// notices (each notice ID is returned once per Watcher) and the ended
// scheduled events (Ended set).
func (w *Watcher) Poll(ctx context.Context) []Notice {
	now := w.opts.Now()
	var out []Notice
	anyOK := false
	for _, p := range w.paths {
		if now.Before(p.nextTry) {
			continue
		}
		ns, err := w.pollPath(ctx, p, now)
		if err != nil {
			if ctx.Err() != nil {
				return out
			}
			w.observeError(p.path)
			if p.failures == 0 {
				p.backoff = backoff.New(w.opts.Interval, p.maxBackoff)
			}
			wait := p.backoff.Step()
			p.failures++
			p.nextTry = now.Add(wait)
			// Log the first failure, a changed error, and then every 10th.
			if msg := err.Error(); p.failures == 1 || msg != p.lastError || p.failures%10 == 0 {
				w.log.Warn("polling imds", zap.String("path", p.path), zap.Error(err),
					zap.Int("failures", p.failures), zap.Duration("retry-in", wait))
				p.lastError = msg
			}
			continue
		}
		if p.failures > 0 {
			w.log.Info("imds path recovered", zap.String("path", p.path), zap.Int("failures", p.failures))
		}
		p.failures, p.nextTry, p.lastError = 0, time.Time{}, ""
		anyOK = true
		if p.kind == KindScheduledEvent {
			out = append(out, w.ended(ns)...)
		}
		for _, n := range ns {
			key := dedupeKey(n)
			if first, ok := w.seen[key]; ok {
				if first.ID != n.ID {
					w.log.Debug("notice seen again with another time; keeping the first",
						zap.String(logging.KeyNotice, first.ID), zap.String("again", n.ID))
				}
				continue
			}
			w.seen[key] = n
			if n.Kind == KindScheduledEvent {
				w.mu.Lock()
				w.live[key] = n
				w.mu.Unlock()
			}
			w.log.Info("interruption notice", zap.String(logging.KeyNotice, n.ID), zap.String("kind", string(n.Kind)),
				zap.String("action", n.Action), zap.Time("deadline", n.Deadline))
			out = append(out, n)
		}
	}
	if anyOK && w.opts.Observer != nil {
		w.opts.Observer.PollOK()
	}
	return out
}

// ended returns, marked Ended, the live scheduled events that active (a
// successful read's active events) no longer holds: canceled, completed
// or gone from IMDS. Each ends once.
func (w *Watcher) ended(active []Notice) []Notice {
	still := map[string]bool{}
	for _, n := range active {
		still[dedupeKey(n)] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Notice
	for key, n := range w.live {
		if still[key] {
			continue
		}
		delete(w.live, key)
		n.Ended = true
		w.log.Info("scheduled event no longer active (canceled, completed or gone)",
			zap.String(logging.KeyNotice, n.ID), zap.String("event", n.EventID))
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Notice) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// dedupeKey identifies "the same notice" across polls. A spot notice's time
// is fixed in real IMDS, but emulators (AEMM) recompute it on every read, and
// an instance is interrupted at most once per boot: the kind and action are
// enough, and the first sighting's ID and deadline stick. Scheduled events
// have their own IDs.
func dedupeKey(n Notice) string {
	switch n.Kind {
	case KindSpotInterruption:
		return string(n.Kind) + "/" + n.Action
	case KindRebalance:
		return string(n.Kind)
	case KindScheduledEvent:
		if n.EventID != "" {
			return string(n.Kind) + "/" + n.EventID
		}
	}
	return n.ID
}

func (w *Watcher) observeError(path string) {
	if w.opts.Observer != nil {
		w.opts.Observer.PollError(path)
	}
}

func (w *Watcher) pollPath(ctx context.Context, p *pathState, now time.Time) ([]Notice, error) {
	b, err := w.get.Get(ctx, p.path)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	id := w.opts.InstanceID
	// notice is the one notice of this path, raw the text its ID keeps.
	notice := func(raw string, at, deadline time.Time, action string) Notice {
		return Notice{ID: NoticeID(id, p.kind, raw), Kind: p.kind, InstanceID: id, NoticeTime: at, Deadline: deadline, Action: action}
	}
	switch p.kind {
	case KindSpotInterruption:
		a, err := ParseInstanceAction(b)
		if err != nil {
			return nil, err
		}
		return []Notice{notice(a.RawTime, a.Time, a.Time, a.Action)}, nil
	case KindRebalance:
		r, err := ParseRebalance(b)
		if err != nil {
			return nil, err
		}
		return []Notice{notice(r.RawTime, r.NoticeTime, r.NoticeTime.Add(w.opts.Deadlines.Rebalance), "rebalance")}, nil
	case KindScheduledEvent:
		evs, err := ParseScheduledEvents(b)
		if err != nil {
			return nil, err
		}
		var out []Notice
		for _, e := range evs {
			if !e.Active() {
				continue
			}
			n := notice(e.NotBefore.Format(time.RFC3339), e.NotBefore, e.NotBefore, e.Code)
			n.EventID, n.Description = e.EventID, e.Description
			out = append(out, n)
		}
		return out, nil
	case KindASGLifecycle:
		s, err := ParseLifecycleState(b)
		if err != nil {
			return nil, err
		}
		if s != "Terminated" {
			return nil, nil
		}
		return []Notice{notice(s, now, now.Add(w.opts.Deadlines.ASGTerminate), s)}, nil
	}
	return nil, fmt.Errorf("unknown notice kind %q", p.kind)
}
