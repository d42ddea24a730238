// Package sim is a simulated EC2 region for tests and the embedded default
// (`joiner sim`). It speaks the EC2 Query protocol for the actions Joiner's
// AWS provider calls, and SSM GetParameter for AMI aliases, so the real
// aws-sdk-go-v2 code path runs against it. Instances "boot" after a delay:
// with a Kubernetes client the sim registers a Node built from the
// instance's rendered user data and keeps it Ready; every instance gets
// AEMM-compatible IMDS paths under /imds/<instance-id>/.
//
// Routes (one http.Handler):
//
//	POST /                       EC2 Query API; IAM Query API (Version=2010-05-08); SSM, SQS and Pricing
//	                             JSON APIs (X-Amz-Target: AmazonSSM.*, AmazonSQS.*, AWSPriceListService.*)
//	/clusters/<name>             EKS REST API (DescribeCluster)
//	POST /control/capacity-errors           {"instanceType","zone","capacityType","code"}; code "" clears
//	POST /control/instances/<id>/interrupt  spot interruption notice, termination after the notice time
//	POST /control/instances/<id>/rebalance  rebalance recommendation (spot instances; EventBridge only)
//	POST /control/instances/<id>/scheduled-change  AWS Health scheduled change {"eventTypeCode","startTime"} (optional)
//	POST /control/instances/<id>/stop       stop the instance (stopping, then stopped)
//	POST /control/instances/<id>/reservation-interruption  reclaim its interruptible capacity reservation (EventBridge only; termination after the notice time)
//	GET  /control/instances                 instances as JSON
//	POST /control/instances/<id>/imds       serve the instance's IMDS on its own loopback port
//	/imds/<id>/latest/...                    IMDSv2 token and meta-data of one instance
//
// Every signed API request is authorized, as IAM would, against its
// caller's identity policy: by default the controller policy Joiner ships
// (packaging/iam), so every test through the SDK runs under it (Access,
// authz.go; the evaluator is policy.go).
package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/internal/defaults"
)

// Options configure a Sim.
type Options struct {
	Config Config
	// Kube registers Nodes for booted instances; nil runs the sim as a cloud
	// only.
	Kube   kubernetes.Interface
	Logger *zap.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Sim is a simulated EC2 region. Its state is in memory.
type Sim struct {
	cfg  Config
	kube kubernetes.Interface
	log  *zap.Logger
	now  func() time.Time

	mu        sync.Mutex
	seq       int
	instances map[string]*instance
	order     []string
	templates map[string]*launchTemplate // by name
	fleets    map[string]fleetResult     // by client token
	capErrors map[offeringKey]string
	types     map[string]catalog.Entry
	calls     map[string]int
	last      map[string]Request
	tokens    map[string]time.Time // IMDSv2 tokens -> expiry
	runCtx    context.Context      // set while Run runs; owns IMDS listeners
	releases  int                  // image releases published (ReleaseImages)
	queue     *sqsQueue            // the interruption queue (Config.InterruptionQueue)
	profiles  map[string]*profile  // IAM instance profiles by name
	policies  map[string]*Policy   // parsed caller policies by access key and cluster
	denied    map[string]int       // refused authorizations by IAM action

	// onDemand are the Pricing API's prices set by SetOnDemandPrices, by
	// region.
	onDemand map[string]*catalog.PriceTable
}

type offeringKey struct{ instanceType, zone, capacityType string }

type instance struct {
	ID, Type, Zone, SubnetID, ImageID, Lifecycle, State, ClientToken, PrivateIP, Arch string
	LaunchTime                                                                        time.Time
	BootAt                                                                            time.Time
	Tags                                                                              map[string]string
	SGs                                                                               []string
	UserData                                                                          []byte
	// PublicIP is set when the primary interface asked for one.
	PublicIP string
	// NIs are the launch template's network interfaces (none: EC2's one
	// default interface).
	NIs []netIface
	// PlacementGroup (id), PlacementGroupName and Partition are where the
	// instance was placed.
	PlacementGroup, PlacementGroupName string
	Partition                          int
	NestedVirt                         string
	// FleetContext is the CreateFleet Context it was launched with.
	FleetContext string
	Interrupted  *time.Time // spot instance-action time
	// Reclaimed: its interruptible capacity reservation is reclaimed; it
	// terminates then.
	Reclaimed  *time.Time
	NodeName   string
	Registered bool
	LastBeat   time.Time

	// ReservationID is the capacity reservation it runs in ("" for none);
	// CapResPreference its launch template's reservation preference.
	ReservationID, CapResPreference string
}

type launchTemplate struct {
	ID, Name string
	Created  time.Time
	Tags     map[string]string
	ImageID  string
	UserData []byte
	SGs      []string
	Data     Request
	Extra    ltExtra
}

type fleetResult struct {
	paramsHash string
	body       createFleetResponse
}

// New returns a sim for opts.
func New(opts Options) *Sim {
	defaults.Clock(&opts.Now)
	defaults.Zero(&opts.Logger, zap.NewNop())
	s := &Sim{
		cfg: opts.Config, kube: opts.Kube, log: opts.Logger.Named("sim"), now: opts.Now,
		instances: map[string]*instance{}, templates: map[string]*launchTemplate{},
		fleets: map[string]fleetResult{}, capErrors: map[offeringKey]string{},
		types: map[string]catalog.Entry{}, calls: map[string]int{}, last: map[string]Request{}, tokens: map[string]time.Time{},
		profiles: iamConfigProfiles(opts.Config.IAM, opts.Now()), policies: map[string]*Policy{}, denied: map[string]int{},
	}
	if s.cfg.Region == "" {
		s.cfg.Region = catalog.PriceRegion
	}
	if len(s.cfg.Zones) == 0 {
		s.cfg.Zones = catalog.DefaultZones(s.cfg.Region)
	}
	for _, e := range catalog.Entries() {
		if e.HasPrice {
			s.types[e.Name] = e
		}
	}
	return s
}

// Configure changes the region's configuration in place (subnets,
// security groups, images, parameters, placement groups, reservations):
// what a test's world turns into between two resolutions. Instances,
// launch templates and IAM state are kept.
func (s *Sim) Configure(change func(*Config)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	change(&s.cfg)
}

// Calls returns how often each action was called.
func (s *Sim) Calls(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[action]
}

// LastRequest returns the last request of an action.
func (s *Sim) LastRequest(action string) (Request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.last[action]
	return r, ok
}

// LaunchTemplateNames returns the names of the launch templates that exist.
func (s *Sim) LaunchTemplateNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.templates))
}

// InjectCapacityError makes launches of (instance type, zone, capacity type)
// fail with code (e.g. InsufficientInstanceCapacity); code "" clears it.
func (s *Sim) InjectCapacityError(instanceType, zone, capacityType, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := offeringKey{instanceType, zone, capacityType}
	if code == "" {
		delete(s.capErrors, k)
		return
	}
	s.capErrors[k] = code
}

// Interrupt issues a spot interruption notice for an instance: IMDS shows
// spot/instance-action and the instance terminates after the notice time.
func (s *Sim) Interrupt(id string) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok || in.State == "terminated" {
		return time.Time{}, fmt.Errorf("instance %s: not found", id)
	}
	t := s.now().Add(s.cfg.InterruptionNotice.Duration).UTC().Truncate(time.Second)
	in.Interrupted = &t
	s.emitSpotInterruption(in)
	return t, nil
}

// Handler serves the EC2/SSM APIs, the control API and IMDS.
func (s *Sim) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serveAPI)
	mux.HandleFunc("/clusters/", s.withEKSAuth(s.serveEKS))
	mux.HandleFunc("/control/", s.serveControl)
	mux.HandleFunc("/imds/", s.serveIMDS)
	return mux
}

func (s *Sim) serveAPI(w http.ResponseWriter, r *http.Request) {
	reqID := s.requestID()
	if r.Method != http.MethodPost {
		writeError(w, http.StatusBadRequest, reqID, "InvalidAction", "only POST is supported")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, reqID, "MalformedQueryString", err.Error())
		return
	}
	who := principalOf(r)
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		if !s.authorizeJSON(w, who, target, body) {
			return
		}
		service, _, _ := strings.Cut(target, ".")
		switch service {
		case "AmazonSSM":
			s.serveSSM(w, target, body)
		case "AmazonSQS":
			s.serveSQS(w, r, target, body)
		case "AWSPriceListService":
			s.servePricing(w, target, body)
		default:
			writeJSONError(w, http.StatusBadRequest, "UnknownOperationException", fmt.Sprintf("operation %s is not simulated", target))
		}
		return
	}
	req, err := ParseQuery(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, reqID, "MalformedQueryString", err.Error())
		return
	}
	req.principal = who
	if req.Get("Version") == iamVersion {
		s.serveIAM(w, reqID, req)
		return
	}
	h, ok := ec2Actions[req.Action]
	if !ok {
		writeError(w, http.StatusBadRequest, reqID, "InvalidAction", fmt.Sprintf("the action %s is not valid for this web service", req.Action))
		return
	}
	s.mu.Lock()
	s.calls[req.Action]++
	s.last[req.Action] = req
	var out response
	aerr := s.authorize(who, s.ec2AuthRequests(req)).ec2Error()
	if aerr == nil {
		out, aerr = h(s, req)
	}
	s.mu.Unlock()
	if aerr != nil {
		writeError(w, aerr.status, reqID, aerr.code, aerr.msg)
		return
	}
	out.setRequestID(reqID)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	var b strings.Builder
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	start := xml.StartElement{
		Name: xml.Name{Local: req.Action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2NS}},
	}
	if err := enc.EncodeElement(out, start); err != nil {
		writeError(w, http.StatusInternalServerError, reqID, "InternalError", err.Error())
		return
	}
	_, _ = io.WriteString(w, b.String())
}

func writeError(w http.ResponseWriter, status int, reqID, code, msg string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	b, _ := xml.Marshal(xErrorResponse{Code: code, Message: msg, RequestID: reqID})
	_, _ = io.WriteString(w, xml.Header)
	_, _ = w.Write(b)
}

type apiError struct {
	status    int
	code, msg string
}

func badParam(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, msg: fmt.Sprintf(format, args...)}
}

type response interface{ setRequestID(string) }

type meta struct {
	RequestID string `xml:"requestId"`
}

func (m *meta) setRequestID(id string) { m.RequestID = id }

func (s *Sim) requestID() string {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
}

// nextID returns prefix-<17 hex> unique in this sim.
func (s *Sim) nextID(prefix string) string {
	s.seq++
	sum := sha256.Sum256([]byte(prefix + strconv.Itoa(s.seq)))
	return prefix + "-0" + hex.EncodeToString(sum[:])[:16]
}

// matchFilters reports whether a resource passes every filter; fields are
// the resource's values by filter name (tag:K, tag-key handled here; a
// filter on another name matches nothing).
func matchFilters(filters []Filter, tags, fields map[string]string) bool {
	for _, f := range filters {
		var have []string
		switch {
		case strings.HasPrefix(f.Name, "tag:"):
			if v, ok := tags[f.Name[4:]]; ok {
				have = []string{v}
			}
		case f.Name == "tag-key":
			have = slices.Sorted(maps.Keys(tags))
		default:
			if v, ok := fields[f.Name]; ok {
				have = []string{v}
			}
		}
		if !anyMatch(f.Values, have) {
			return false
		}
	}
	return true
}

func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if filterMatch(p, v) {
				return true
			}
		}
	}
	return false
}

// filterMatch matches v against an EC2 filter value: * is any run of
// characters ("/" included: "*" matches the key karpenter.sh/discovery),
// ? any one character, and a backslash takes the next character
// literally.
func filterMatch(pattern, v string) bool {
	p, s := []rune(pattern), []rune(v)
	// star and mark: where the last * was and how much of s it took.
	star, mark := -1, 0
	i, j := 0, 0
	for j < len(s) {
		switch {
		case i < len(p) && p[i] == '*':
			star, mark = i, j
			i++
			continue
		case i < len(p) && p[i] == '\\' && i+1 < len(p) && p[i+1] == s[j]:
			i, j = i+2, j+1
			continue
		case i < len(p) && p[i] != '\\' && (p[i] == '?' || p[i] == s[j]):
			i, j = i+1, j+1
			continue
		case star >= 0:
			i, mark = star+1, mark+1
			j = mark
			continue
		}
		return false
	}
	for i < len(p) && p[i] == '*' {
		i++
	}
	return i == len(p)
}

func inOrAll(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }

// Run drives time in the sim until ctx ends: boots pending instances after
// the boot delay (registering their Nodes), renews Node heartbeats,
// terminates interrupted spot instances at their action time, and deletes
// the Nodes of terminated instances.
func (s *Sim) Run(ctx context.Context) error {
	s.mu.Lock()
	s.runCtx = ctx
	s.mu.Unlock()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			s.step(ctx)
		}
	}
}

// heartbeatEvery is how often a booted instance renews its Node's Ready
// condition and lease.
const heartbeatEvery = 10 * time.Second

// registerRetry is how often a failed Node registration is retried.
const registerRetry = 5 * time.Second

// step advances the sim once.
func (s *Sim) step(ctx context.Context) {
	now := s.now()
	var boot, beat, gone []*instance
	s.mu.Lock()
	for _, id := range s.order {
		in := s.instances[id]
		switch {
		case in.State == "pending" && !now.Before(in.BootAt):
			s.setState(in, "running")
			in.LastBeat = now
			boot = append(boot, in)
		case in.State == "running" && ((in.Interrupted != nil && !now.Before(*in.Interrupted)) || (in.Reclaimed != nil && !now.Before(*in.Reclaimed))):
			s.setState(in, "shutting-down")
			s.setState(in, "terminated")
			gone = append(gone, in)
		case s.kube != nil && in.State == "running" && !in.Registered && in.Interrupted == nil && now.Sub(in.LastBeat) >= registerRetry:
			// A registration that failed is retried.
			in.LastBeat = now
			boot = append(boot, in)
		case in.State == "running" && in.Registered && now.Sub(in.LastBeat) >= heartbeatEvery:
			in.LastBeat = now
			beat = append(beat, in)
		case in.State == "shutting-down":
			s.setState(in, "terminated")
			gone = append(gone, in)
		case in.State == "stopping":
			s.setState(in, "stopped")
		}
	}
	snapshot := func(in *instance) instance {
		c := *in
		c.Tags = maps.Clone(in.Tags)
		return c
	}
	var bootC, beatC, goneC []instance
	for _, in := range boot {
		bootC = append(bootC, snapshot(in))
	}
	for _, in := range beat {
		beatC = append(beatC, snapshot(in))
	}
	for _, in := range gone {
		goneC = append(goneC, snapshot(in))
	}
	s.mu.Unlock()
	if s.kube == nil {
		return
	}
	for _, in := range bootC {
		if err := s.registerNode(ctx, in); err != nil {
			s.log.Warn("registering node", zap.String("instance-id", in.ID), zap.Error(err))
			continue
		}
		s.mu.Lock()
		if cur := s.instances[in.ID]; cur != nil {
			cur.Registered = true
			cur.LastBeat = now
		}
		s.mu.Unlock()
	}
	for _, in := range beatC {
		if err := s.heartbeat(ctx, in); err != nil {
			s.log.Warn("node heartbeat", zap.String("instance-id", in.ID), zap.Error(err))
		}
	}
	for _, in := range goneC {
		if err := s.deleteNode(ctx, in); err != nil {
			s.log.Warn("deleting node", zap.String("instance-id", in.ID), zap.Error(err))
		}
	}
}

// Step advances the sim once, as Run does on each tick (for tests that
// drive time themselves).
func (s *Sim) Step(ctx context.Context) { s.step(ctx) }
