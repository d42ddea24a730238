package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// ProfileCollector lists and deletes the instance profiles made for the
// cluster's classes (cloud/aws.Provider). A Cloud without it collects
// none.
type ProfileCollector interface {
	// ClusterInstanceProfiles lists them (none in an isolated VPC).
	ClusterInstanceProfiles(ctx context.Context) ([]cloud.InstanceProfile, error)
	DeleteInstanceProfile(ctx context.Context, name string) error
}

// protectSwitchedProfile keeps a class's previous and new instance profile
// from collection for ProfileProtection after the class switched from one
// to the other (a new role, or spec.instanceProfile instead of spec.role),
// as Karpenter protects them: a NodeClaim launched with the previous one
// may not be in the cache yet.
func (l *Loop) protectSwitchedProfile(prev, cur string, now time.Time) {
	if prev == "" || prev == cur {
		return
	}
	until := now.Add(l.cfg.ProfileProtection)
	l.protected[prev] = until
	if cur != "" {
		l.protected[cur] = until
	}
}

// collectProfiles deletes, every ProfileGC (Retry after a failure and
// after the leader started), the
// instance profiles made for the cluster's classes that Karpenter's
// instance profile garbage collection deletes: neither a class's current
// one (its status, or what this leader resolved), nor one a NodeClaim
// launched with (karpenter.k8s.aws/instance-profile-name), nor protected.
// A NodeClaim that does not name its profile (launched before Joiner
// recorded it) keeps every profile of its class.
func (l *Loop) collectProfiles(ctx context.Context, claims []*karpv1.NodeClaim, now time.Time) {
	pc, ok := l.d.Cloud.(ProfileCollector)
	if !ok || ctx.Err() != nil {
		return
	}
	if l.profileGCAt.IsZero() {
		// A new leader collects once it has run for Retry: the NodeClaims
		// of launches committed before it took over are created by then.
		l.profileGCAt = now.Add(l.cfg.Retry)
	}
	if now.Before(l.profileGCAt) {
		return
	}
	if err := l.collect(ctx, pc, claims, now); err != nil {
		l.profileGCAt = now.Add(l.cfg.Retry)
		if ctx.Err() == nil && l.changed("instance-profile-gc", err.Error()) {
			l.log.Warn("collecting unused instance profiles", zap.Error(err))
		}
		return
	}
	delete(l.said, "instance-profile-gc")
	l.profileGCAt = now.Add(l.cfg.ProfileGC)
}

func (l *Loop) collect(ctx context.Context, pc ProfileCollector, claims []*karpv1.NodeClaim, now time.Time) error {
	profiles, err := pc.ClusterInstanceProfiles(ctx)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, nc := range l.d.Cache.NodeClasses() {
		keep[nc.Status.InstanceProfile] = true
	}
	for _, r := range l.resolved {
		keep[r.profile] = true
	}
	classInUse := map[string]bool{} // class UIDs
	for _, c := range claims {
		if name, ok := c.Annotations[karpv1.AnnotationInstanceProfile]; ok {
			keep[name] = true
			continue
		}
		if ref := c.Spec.NodeClassRef; ref != nil {
			if nc := l.d.Cache.NodeClass(ref.Name); nc != nil {
				classInUse[string(nc.UID)] = true
			}
		}
	}
	for name, until := range l.protected {
		if now.Before(until) {
			keep[name] = true
		} else {
			delete(l.protected, name)
		}
	}
	var errs []error
	for _, p := range profiles {
		if keep[p.Name] || classInUse[p.ClassUID()] {
			continue
		}
		if err := pc.DeleteInstanceProfile(ctx, p.Name); err != nil {
			// The others are still collected; this one is tried again.
			errs = append(errs, fmt.Errorf("deleting unused instance profile %s: %w", p.Name, err))
			continue
		}
		l.log.Info("deleted unused instance profile", zap.String("instance-profile", p.Name))
	}
	return errors.Join(errs...)
}
