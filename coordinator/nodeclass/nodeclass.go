// Package nodeclass is the leader loop that resolves EC2NodeClasses and
// keeps NodePool and EC2NodeClass status current. It is the only place
// that asks the cloud about a class (subnets, security groups, AMIs,
// instance profile, instance types): it resolves a class when the class
// changes and every Refresh, re-lists instance types every TypesRefresh or
// when woken (a capacity error), and publishes the results to the catalog
// the cluster view reads, so provisioning and disruption passes make no
// cloud calls of their own.
//
// Invalid objects (for example created before the CRD had a rule) get
// ValidationSucceeded=False and a Warning Event and are left out; the valid
// ones keep being served.
//
// Classes carry Karpenter's termination finalizer (karpenter.k8s.aws/
// termination): a deleted class waits until no NodeClaim uses it, then its
// instance profiles and launch templates are deleted (finalize.go).
// Instance profiles no class, NodeClaim or recent switch keeps are
// garbage-collected every ProfileGC, as Karpenter's (profilegc.go).
package nodeclass

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/coordinator/poolhealth"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/internal/defaults"
)

// Cache is the informer cache the loop reads (kube.Cache).
type Cache interface {
	NodePools() []*karpv1.NodePool
	NodeClasses() []*awsv1.EC2NodeClass
	NodeClass(name string) *awsv1.EC2NodeClass
	NodeClaims() []*karpv1.NodeClaim
	NodeByProviderID(id string) *corev1.Node
	Changes() (<-chan struct{}, func())
}

// Writer writes status and drift-hash annotations (kube.Clients).
type Writer interface {
	UpdateNodePoolStatus(ctx context.Context, np *karpv1.NodePool) (*karpv1.NodePool, error)
	UpdateEC2NodeClassStatus(ctx context.Context, nc *awsv1.EC2NodeClass) (*awsv1.EC2NodeClass, error)
	Annotate(ctx context.Context, gvr schema.GroupVersionResource, name string, annotations map[string]string) error
}

// Cloud resolves classes and lists their instance types (cloud.Provider).
type Cloud interface {
	Resolve(ctx context.Context, nc *awsv1.EC2NodeClass) (cloud.Resolved, error)
	InstanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error)
}

// Deps are the loop's collaborators.
type Deps struct {
	Cache   Cache
	Kube    Writer
	Cloud   Cloud
	Catalog *view.Catalog
	// Cluster (optional: cluster discovery) returns the Kubernetes
	// version classes resolve for, or why what new nodes join is not
	// known: then every class is not ready (ValidationSucceeded=False,
	// reason ClusterDiscoveryFailed, as Karpenter's
	// ClusterCIDRResolutionFailed). A new version re-resolves every class
	// at once (AMI aliases follow a cluster upgrade).
	Cluster func() (version string, err error)
	// Health, when set, is each pool's recent registrations (the lifecycle
	// records them) for its NodeRegistrationHealthy condition.
	Health *poolhealth.State
	// Recorder may be nil (no Events).
	Recorder record.EventRecorder
	Log      *zap.Logger
}

// Config configures a Loop. Zero values take the defaults.
type Config struct {
	// Refresh re-resolves a ready class this often (default 5 min): new
	// AMIs behind an alias, subnets and security groups that come and go.
	Refresh time.Duration
	// Retry re-resolves a class whose resolution failed this often
	// (default 30 s).
	Retry time.Duration
	// TypesRefresh re-lists instance types this often (default 1 min):
	// prices, and offerings whose capacity-error mark expired.
	TypesRefresh time.Duration
	// MinInterval spaces passes triggered by cache events (default 1 s).
	MinInterval time.Duration
	// ProfileGC is how often the instance profiles no class and no
	// NodeClaim uses are deleted (default 30 min, Karpenter's instance
	// profile garbage collection; Retry after a failure).
	ProfileGC time.Duration
	// ProfileProtection keeps a class's previous and new instance profile
	// from garbage collection this long after the class switched (default
	// 1 h, Karpenter's protected-profile TTL): NodeClaims launched with the
	// previous one may not be in the cache yet.
	ProfileProtection time.Duration
	// CABundle is the cluster CA bundle new nodes are given (base64 PEM):
	// part of the EC2NodeClass drift hash, as in Karpenter.
	CABundle string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// resolution is what the loop remembers of a class's last resolution.
type resolution struct {
	uid     types.UID
	spec    string // the spec it resolved, as JSON
	version string // the cluster's Kubernetes version it resolved for
	at      time.Time
	err     error
	// partial: some parts could not be resolved and were kept from the
	// resolution before (retried as soon as a failed one).
	partial bool
	// invalid: the class resolved but failed validation (its tags), so it
	// is not published.
	invalid *notValid
	// profile is the instance profile the resolution found or made (also
	// when another part failed): garbage collection keeps it.
	profile string
	class   *view.Class
	typesAt time.Time
}

// Loop is the nodeclass leader loop.
type Loop struct {
	cfg  Config
	d    Deps
	log  *zap.Logger
	wake loop.Waker

	// Leader memory, rebuilt by every new leader: last resolutions and the
	// last thing said about each object (so Events are not repeated).
	resolved map[string]*resolution
	said     map[string]string
	// typesStale is set by Wake: re-list every class's instance types.
	typesStale bool
	// profileGCAt is when instance profiles are next collected; protected
	// are the profiles kept from collection until a time.
	profileGCAt time.Time
	protected   map[string]time.Time
}

// New builds a Loop.
func New(cfg Config, d Deps) *Loop {
	defaults.Positive(&cfg.Refresh, 5*time.Minute)
	defaults.Positive(&cfg.Retry, 30*time.Second)
	defaults.Positive(&cfg.TypesRefresh, time.Minute)
	defaults.Positive(&cfg.MinInterval, time.Second)
	defaults.Positive(&cfg.ProfileGC, 30*time.Minute)
	defaults.Positive(&cfg.ProfileProtection, time.Hour)
	loop.Defaults(&cfg.Now, &d.Recorder, &d.Log)
	return &Loop{cfg: cfg, d: d, log: d.Log.Named("nodeclass"), wake: loop.NewWaker(),
		resolved: map[string]*resolution{}, said: map[string]string{}, protected: map[string]time.Time{}}
}

// Wake asks for a pass that re-lists every class's instance types (after a
// capacity error marked offerings unavailable, or a launch into a capacity
// reservation took one of its instances). It never blocks.
func (l *Loop) Wake() { l.wake.Wake() }

// Run reconciles until ctx ends: at start, after cache events (at most one
// pass per MinInterval), when woken, and every TypesRefresh (or Retry,
// when sooner).
func (l *Loop) Run(ctx context.Context) error {
	changes, stop := l.d.Cache.Changes()
	defer stop()
	return loop.Run(ctx, loop.Spec{Name: "nodeclass", Log: l.log,
		Pass:  func(ctx context.Context) error { l.Reconcile(ctx); return nil },
		Every: min(l.cfg.TypesRefresh, l.cfg.Retry), Changes: changes, MinInterval: l.cfg.MinInterval,
		Wake: l.wake, OnWake: func() { l.typesStale = true }})
}

// Reconcile validates every NodePool and EC2NodeClass, resolves the
// classes that need it, writes status where it changed and publishes the
// ready classes.
func (l *Loop) Reconcile(ctx context.Context) {
	now := l.cfg.Now()
	claims := l.d.Cache.NodeClaims()
	for _, np := range l.d.Cache.NodePools() {
		if np.DeletionTimestamp == nil {
			l.reportPool(ctx, np, claims, now)
			l.stampPool(ctx, np, claims)
		}
	}
	ready := map[string]*view.Class{}
	seen := map[string]bool{}
	for _, cached := range l.d.Cache.NodeClasses() {
		if cached.DeletionTimestamp != nil {
			l.finalize(ctx, cached, claims)
			continue
		}
		l.ensureFinalizer(ctx, cached)
		seen[cached.Name] = true
		if c := l.class(ctx, cached, now); c != nil {
			ready[cached.Name] = c
			l.stampClass(ctx, cached, c.Hash, claims)
		}
		if ctx.Err() != nil {
			return // leadership lost: publish nothing half done
		}
	}
	for name := range l.resolved {
		if !seen[name] {
			delete(l.resolved, name)
		}
	}
	l.typesStale = false
	l.d.Catalog.Publish(ready)
	l.collectProfiles(ctx, claims, now)
}

// class validates, resolves (when needed) and lists the instance types of
// one class; nil when it is not ready.
func (l *Loop) class(ctx context.Context, cached *awsv1.EC2NodeClass, now time.Time) *view.Class {
	nc := cached.DeepCopy()
	nc.SetDefaults()
	var invalid *notValid
	if err := nc.Validate(); err != nil {
		if invalid = tagsNotValid(nc); invalid == nil {
			delete(l.resolved, nc.Name)
			l.reportInvalidClass(ctx, cached, err, now)
			return nil
		}
		// Only its tags are refused: the class resolves as Karpenter's
		// does, and its validation fails (TagValidationFailed).
		if l.changed("ec2nodeclass-tags/"+cached.Name, err.Error()) {
			l.log.Warn("ignoring ec2nodeclass with restricted tags", zap.String("ec2nodeclass", cached.Name), zap.Error(err))
			l.d.Recorder.Eventf(cached, corev1.EventTypeWarning, "InvalidEC2NodeClass", "EC2NodeClass %s is invalid and is not used: %v", cached.Name, err)
		}
	} else {
		delete(l.said, "ec2nodeclass-tags/"+cached.Name)
	}
	var version string
	if l.d.Cluster != nil {
		var err error
		if version, err = l.d.Cluster(); err != nil {
			delete(l.resolved, nc.Name)
			if l.changed("ec2nodeclass/"+cached.Name, err.Error()) {
				l.log.Warn("ec2nodeclass not ready: the cluster is not known", zap.String("ec2nodeclass", cached.Name), zap.Error(err))
				l.d.Recorder.Eventf(cached, corev1.EventTypeWarning, "ClusterDiscoveryFailed", "%v", err)
			}
			l.reportNotValid(ctx, cached, "ClusterDiscoveryFailed", err, now)
			return nil
		}
	}
	r := l.resolved[nc.Name]
	spec := specKey(nc)
	due := r == nil || r.uid != nc.UID || r.spec != spec || r.version != version || now.Sub(r.at) >= l.cfg.Refresh ||
		((r.err != nil || r.partial) && now.Sub(r.at) >= l.cfg.Retry)
	if due {
		res, err := l.d.Cloud.Resolve(ctx, nc)
		if ctx.Err() != nil {
			return nil
		}
		var kept []string
		if r != nil && r.class != nil && r.uid == nc.UID && r.spec == spec {
			// A part EC2, SSM or IAM could not be asked for keeps its last
			// answer, status and condition (Karpenter's reconcilers return
			// the error and leave the status alone): a throttled call does
			// not take the class out of service.
			failed := err
			if res, kept, err = cloud.KeepOnFailure(r.class.Resolved, res, err); len(kept) > 0 {
				l.log.Warn("ec2nodeclass partly not resolved; keeping the last resolution of those parts", zap.String("ec2nodeclass", nc.Name),
					zap.Strings("kept", kept), zap.Error(failed))
			}
		}
		r = &resolution{uid: nc.UID, spec: spec, version: version, at: now, err: err, partial: len(kept) > 0, invalid: invalid,
			profile: res.InstanceProfile}
		l.resolved[nc.Name] = r
		l.protectSwitchedProfile(cached.Status.InstanceProfile, res.InstanceProfile, now)
		l.updateClassStatus(ctx, cached, res, err, invalid, now)
		if err != nil {
			l.log.Warn("ec2nodeclass not ready", zap.String("ec2nodeclass", nc.Name), zap.Error(err))
			return nil
		}
		cloud.ApplyStatus(nc, res, nil, metav1.NewTime(now))
		r.class = &view.Class{NodeClass: nc, Resolved: res, Hash: nc.Hash(l.cfg.CABundle)}
	}
	if r.err != nil || r.invalid != nil {
		return nil
	}
	if r.class.InstanceTypes == nil || l.typesStale || now.Sub(r.typesAt) >= l.cfg.TypesRefresh {
		its, err := l.d.Cloud.InstanceTypes(ctx, r.class.NodeClass)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("listing instance types", zap.String("ec2nodeclass", nc.Name), zap.Error(err))
			}
			if r.class.InstanceTypes == nil {
				return nil
			}
		} else {
			// A new value, never a change to the published one.
			c := *r.class
			c.InstanceTypes = its
			r.class, r.typesAt = &c, now
		}
	}
	return r.class
}

// changed records msg for key and reports whether it differs from the last.
func (l *Loop) changed(key, msg string) bool {
	if l.said[key] == msg {
		return false
	}
	l.said[key] = msg
	return true
}

// reportInvalidClass marks an EC2NodeClass that fails validation not ready.
func (l *Loop) reportInvalidClass(ctx context.Context, cached *awsv1.EC2NodeClass, err error, now time.Time) {
	if l.changed("ec2nodeclass/"+cached.Name, err.Error()) {
		l.log.Warn("ignoring invalid ec2nodeclass", zap.String("ec2nodeclass", cached.Name), zap.Error(err))
		l.d.Recorder.Eventf(cached, corev1.EventTypeWarning, "InvalidEC2NodeClass", "EC2NodeClass %s is invalid and is not used: %v", cached.Name, err)
	}
	l.reportNotValid(ctx, cached, "ValidationFailed", err, now)
}

// reportNotValid writes ValidationSucceeded False, with reason and err's
// message, and Ready from it (False, UnhealthyDependents, as operatorpkg
// derives it).
func (l *Loop) reportNotValid(ctx context.Context, cached *awsv1.EC2NodeClass, reason string, err error, now time.Time) {
	nc := cached.DeepCopy()
	cloud.MarkNotValid(nc, reason, err.Error(), metav1.NewTime(now))
	l.writeClassStatus(ctx, cached, nc)
}

// notValid is why a class that resolves fails validation.
type notValid struct{ reason, message string }

// ReasonTagValidationFailed is Karpenter's ValidationSucceeded reason for
// a class whose spec.tags has a restricted key.
const ReasonTagValidationFailed = "TagValidationFailed"

// tagsNotValid returns, when the class fails validation only for
// restricted keys in spec.tags, Karpenter's TagValidationFailed with its
// message naming them; nil otherwise.
func tagsNotValid(nc *awsv1.EC2NodeClass) *notValid {
	var bad []string
	kept := map[string]string{}
	for k, v := range nc.Spec.Tags {
		if awsv1.RestrictedTag(k) != "" {
			bad = append(bad, strconv.Quote(k))
		} else {
			kept[k] = v
		}
	}
	if len(bad) == 0 {
		return nil
	}
	stripped := nc.DeepCopy()
	stripped.Spec.Tags = kept
	if stripped.Validate() != nil {
		return nil
	}
	slices.Sort(bad)
	return &notValid{reason: ReasonTagValidationFailed,
		message: fmt.Sprintf("tags failed validation requirements (tags=%s)", strings.Join(bad, ", "))}
}

// updateClassStatus writes the resolved subnets, security groups, AMIs and
// conditions when they changed. ValidationSucceeded follows the parts, as
// Karpenter's: False (DependenciesNotReady) while one of them is False
// (cloud.ApplyStatus), or False for invalid's reason.
func (l *Loop) updateClassStatus(ctx context.Context, cached *awsv1.EC2NodeClass, r cloud.Resolved, err error, invalid *notValid, now time.Time) {
	nc := cached.DeepCopy()
	cloud.ApplyStatus(nc, r, err, metav1.NewTime(now))
	if invalid != nil && meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionValidationSucceeded) {
		cloud.MarkNotValid(nc, invalid.reason, invalid.message, metav1.NewTime(now))
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if l.changed("ec2nodeclass/"+cached.Name, msg) && err != nil {
		l.d.Recorder.Eventf(cached, corev1.EventTypeWarning, "EC2NodeClassNotReady", "%v", err)
	}
	l.writeClassStatus(ctx, cached, nc)
}

func (l *Loop) writeClassStatus(ctx context.Context, cached, nc *awsv1.EC2NodeClass) {
	if equality.Semantic.DeepEqual(nc.Status, cached.Status) {
		return
	}
	if _, err := l.d.Kube.UpdateEC2NodeClassStatus(ctx, nc); err != nil && ctx.Err() == nil {
		l.log.Warn("updating ec2nodeclass status", zap.String("ec2nodeclass", nc.Name), zap.Error(err))
	}
}

// specKey identifies what a class's resolution depends on: its whole spec
// (selector terms included, unlike the drift hash).
func specKey(nc *awsv1.EC2NodeClass) string {
	b, err := json.Marshal(nc.Spec)
	if err != nil { // a spec of plain data always marshals
		return ""
	}
	return string(b)
}
