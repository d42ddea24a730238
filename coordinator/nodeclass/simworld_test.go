package nodeclass_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/nodeclass"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/test/fakeclock"
	"github.com/joiner-dev/joiner/test/simstack"
)

// This file is the rig of the ports of Karpenter's EC2NodeClass controller
// suites (pkg/controllers/nodeclass/... of the AWS provider, v1.14.1): the
// nodeclass loop on Joiner's AWS provider, through the real SDK, against
// the simulated region, over a fake informer cache that takes the loop's
// writes (status, annotations, finalizers) as the API server would. A pass
// of the loop is Karpenter's ExpectObjectReconciled.

// world is one rig.
type world struct {
	t        *testing.T
	sim      *sim.Sim
	faults   *faults
	clock    *fakeclock.Clock
	endpoint string
	provider *joineraws.Provider
	cache    *fake.Cache
	kube     *applier
	catalog  *view.Catalog
	rec      *record.FakeRecorder
	loop     *nodeclass.Loop
}

// worldSetup is what a test may change before the rig starts.
type worldSetup struct {
	cfg      sim.Config
	provider joineraws.Options // Cluster, IsolatedVPC, NoReservedCapacity, KubernetesVersion
	loop     nodeclass.Config
}

// newWorld starts a sim of sim.DefaultConfig (as changed by the setups),
// a provider for cluster "test" in us-east-1 on Kubernetes 1.32 and a
// loop, on a clock at 2026-01-01.
func newWorld(t *testing.T, setups ...func(*worldSetup)) *world {
	t.Helper()
	ws := worldSetup{cfg: sim.DefaultConfig()}
	for _, f := range setups {
		f(&ws)
	}
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := &world{t: t, clock: clock, cache: &fake.Cache{}, catalog: view.NewCatalog(), rec: record.NewFakeRecorder(1000)}
	w.sim = sim.New(sim.Options{Config: ws.cfg, Now: clock.Now})
	w.faults = &faults{next: w.sim.Handler(), rules: map[string]*fault{}}
	srv := httptest.NewServer(w.faults)
	t.Cleanup(srv.Close)
	w.endpoint = srv.URL
	// One attempt per call: an injected throttle is seen at once, not
	// retried with back-off.
	ac := joineraws.NewClients(aws.Config{Region: simstack.Region, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(simstack.AccessKeyID, "secret", "")}, srv.URL)
	opts := ws.provider
	opts.EC2, opts.SSM, opts.IAM, opts.Region, opts.Now = ac.EC2, ac.SSM, ac.IAM, simstack.Region, clock.Now
	if opts.Cluster == "" {
		opts.Cluster = "test"
	}
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = sim.DefaultKubernetesVersion
	}
	p, err := joineraws.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	w.provider = p
	w.kube = &applier{cache: w.cache}
	cfg := ws.loop
	cfg.Now = clock.Now
	w.loop = nodeclass.New(cfg, nodeclass.Deps{Cache: w.cache, Kube: w.kube, Cloud: fewTypes{p}, Catalog: w.catalog, Recorder: w.rec})
	return w
}

// fewTypes is the provider with a short list of instance types: these
// suites are about the class's status, not its offerings.
type fewTypes struct{ *joineraws.Provider }

func (f fewTypes) InstanceTypes(_ context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error) {
	return catalog.InstanceTypes(catalog.Options{NodeClass: nc})[:3], nil
}

// ec2NodeClass is the class most ports start from, as Karpenter's
// test.EC2NodeClass: every subnet and security group of the discovery
// tag, the al2023@latest alias, role KarpenterNodeRole-test.
func ec2NodeClass(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{sim.DiscoveryTag: "*"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{sim.DiscoveryTag: "*"}}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "KarpenterNodeRole-test",
		},
	}
}

// apply creates the class in the cache, or replaces its spec (a new
// generation when the spec changed), as kubectl apply would.
func (w *world) apply(nc *awsv1.EC2NodeClass) {
	nc = nc.DeepCopy()
	for i, cur := range w.cache.ClassList {
		if cur.Name == nc.Name {
			next := cur.DeepCopy()
			if !equality.Semantic.DeepEqual(next.Spec, nc.Spec) {
				next.Generation++
			}
			next.Spec = nc.Spec
			if nc.Annotations != nil {
				next.Annotations = nc.Annotations
			}
			w.cache.ClassList = slices.Clone(w.cache.ClassList)
			w.cache.ClassList[i] = next
			return
		}
	}
	w.cache.ClassList = append(slices.Clone(w.cache.ClassList), nc)
}

// class is the cached class name (nil when it is gone).
func (w *world) class(name string) *awsv1.EC2NodeClass { return fake.Find(w.cache.ClassList, name) }

// delete marks the class deleted (a deletionTimestamp); it goes once its
// finalizers are removed.
func (w *world) delete(name string) {
	w.t.Helper()
	nc := w.class(name)
	if nc == nil {
		w.t.Fatalf("no class %s to delete", name)
	}
	if len(nc.Finalizers) == 0 {
		w.cache.ClassList = slices.DeleteFunc(slices.Clone(w.cache.ClassList), func(c *awsv1.EC2NodeClass) bool { return c.Name == name })
		return
	}
	now := metav1.NewTime(w.clock.Now())
	nc.DeletionTimestamp = &now
}

// reconcile runs one pass of the loop.
func (w *world) reconcile() { w.loop.Reconcile(context.Background()) }

// step moves the clock by d and runs a pass.
func (w *world) step(d time.Duration) {
	w.clock.Add(d)
	w.reconcile()
}

// condition is the cached class's condition typ (zero when it has none).
func (w *world) condition(name, typ string) metav1.Condition {
	if nc := w.class(name); nc != nil {
		if c := meta.FindStatusCondition(nc.Status.Conditions, typ); c != nil {
			return *c
		}
	}
	return metav1.Condition{}
}

// isTrue reports whether the class's condition typ is True.
func (w *world) isTrue(name, typ string) bool {
	return w.condition(name, typ).Status == metav1.ConditionTrue
}

// published reports whether the class is in the catalogue provisioning
// reads.
func (w *world) published(name string) bool { return w.catalog.Classes()[name] != nil }

// admin reaches the sim as an unrestricted caller (the test's own set-up
// and inspection: launch templates, profiles).
func (w *world) admin() joineraws.Clients {
	w.sim.SetAccess(sim.Access{Callers: map[string]sim.Caller{"admin": {Unrestricted: true}}})
	return simstack.Clients(w.endpoint, "admin")
}

// applier is the API server behind the fake cache: it applies the loop's
// writes to the cached objects (new objects, so what the loop read before
// is unchanged) and counts them.
type applier struct {
	mu           sync.Mutex
	cache        *fake.Cache
	statusWrites int
	annotated    []string // "resource/name key=value,..."
	finalizers   int
	// holdStatus: status writes succeed but the cache does not show them
	// yet (an informer behind the API server).
	holdStatus bool
}

func (a *applier) UpdateNodePoolStatus(_ context.Context, np *karpv1.NodePool) (*karpv1.NodePool, error) {
	return np, nil
}

func (a *applier) UpdateEC2NodeClassStatus(_ context.Context, nc *awsv1.EC2NodeClass) (*awsv1.EC2NodeClass, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.statusWrites++
	if a.holdStatus {
		return nc, nil
	}
	a.replaceClass(nc.Name, func(c *awsv1.EC2NodeClass) { c.Status = *nc.Status.DeepCopy() })
	return nc, nil
}

func (a *applier) Annotate(_ context.Context, gvr schema.GroupVersionResource, name string, ann map[string]string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(ann))
	for k, v := range ann {
		keys = append(keys, k+"="+v)
	}
	slices.Sort(keys)
	a.annotated = append(a.annotated, fmt.Sprintf("%s/%s %v", gvr.Resource, name, keys))
	set := func(m map[string]string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		for k, v := range ann {
			m[k] = v
		}
		return m
	}
	switch gvr {
	case kube.EC2NodeClassesGVR:
		a.replaceClass(name, func(c *awsv1.EC2NodeClass) { c.Annotations = set(c.Annotations) })
	case kube.NodeClaimsGVR:
		for i, c := range a.cache.ClaimList {
			if c.Name == name {
				next := c.DeepCopy()
				next.Annotations = set(next.Annotations)
				a.cache.ClaimList = slices.Clone(a.cache.ClaimList)
				a.cache.ClaimList[i] = next
			}
		}
	}
	return nil
}

// SetFinalizers sets a class's finalizers; a deleted class without any is
// gone.
func (a *applier) SetFinalizers(_ context.Context, gvr schema.GroupVersionResource, name, _ string, fins []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gvr != kube.EC2NodeClassesGVR {
		return fmt.Errorf("finalizers of %s", gvr.Resource)
	}
	a.finalizers++
	a.replaceClass(name, func(c *awsv1.EC2NodeClass) { c.Finalizers = slices.Clone(fins) })
	a.cache.ClassList = slices.DeleteFunc(slices.Clone(a.cache.ClassList), func(c *awsv1.EC2NodeClass) bool {
		return c.Name == name && c.DeletionTimestamp != nil && len(c.Finalizers) == 0
	})
	return nil
}

func (a *applier) replaceClass(name string, change func(*awsv1.EC2NodeClass)) {
	for i, c := range a.cache.ClassList {
		if c.Name == name {
			next := c.DeepCopy()
			change(next)
			a.cache.ClassList = slices.Clone(a.cache.ClassList)
			a.cache.ClassList[i] = next
		}
	}
}

// faults answers chosen API actions with an error instead of the sim: the
// rig's way to make EC2, IAM or SSM fail a call.
type faults struct {
	next  http.Handler
	mu    sync.Mutex
	rules map[string]*fault // by action (EC2 and IAM Query actions, SSM's GetParameter)
}

type fault struct {
	status        int
	code, message string
	times         int // how many calls fail; 0: every call
}

// fail makes action fail with EC2's or IAM's error code (HTTP status 400,
// or 503 for RequestLimitExceeded and Throttling) the next times calls
// (0: until cleared).
func (f *faults) fail(action, code string, times int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	status := http.StatusBadRequest
	if code == "RequestLimitExceeded" || code == "Throttling" {
		status = http.StatusServiceUnavailable
	}
	f.rules[action] = &fault{status: status, code: code, message: "injected by the test", times: times}
}

// clear lets action through again.
func (f *faults) clear(action string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rules, action)
}

func (f *faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	action, iam := "", false
	if target := r.Header.Get("X-Amz-Target"); target == "AmazonSSM.GetParameter" {
		action = "GetParameter"
	} else if q, err := url.ParseQuery(string(body)); err == nil {
		action, iam = q.Get("Action"), q.Get("Version") == "2010-05-08"
	}
	f.mu.Lock()
	rule := f.rules[action]
	if rule != nil && rule.times > 0 {
		if rule.times--; rule.times == 0 {
			delete(f.rules, action)
		}
	}
	f.mu.Unlock()
	if rule == nil {
		f.next.ServeHTTP(w, r)
		return
	}
	switch {
	case action == "GetParameter":
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(rule.status)
		_, _ = fmt.Fprintf(w, `{"__type":%q,"message":%q}`, rule.code, rule.message)
	case iam:
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(rule.status)
		type iamError struct {
			XMLName   xml.Name `xml:"ErrorResponse"`
			Type      string   `xml:"Error>Type"`
			Code      string   `xml:"Error>Code"`
			Message   string   `xml:"Error>Message"`
			RequestID string   `xml:"RequestId"`
		}
		_ = xml.NewEncoder(w).Encode(iamError{Type: "Sender", Code: rule.code, Message: rule.message, RequestID: "injected"})
	default:
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(rule.status)
		type ec2Error struct {
			XMLName   xml.Name `xml:"Response"`
			Code      string   `xml:"Errors>Error>Code"`
			Message   string   `xml:"Errors>Error>Message"`
			RequestID string   `xml:"RequestID"`
		}
		_ = xml.NewEncoder(w).Encode(ec2Error{Code: rule.code, Message: rule.message, RequestID: "injected"})
	}
}
