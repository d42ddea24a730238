package sim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	iampolicy "github.com/joiner-dev/joiner/packaging/iam"
)

// Access is what the simulated account's callers may do. Every signed
// request (as the AWS SDKs send them) is authorized, as IAM authorizes it,
// against the identity-based policy of its caller (known by the access key
// ID of its SigV4 signature): an explicit Deny wins, else every resource
// the call touches needs an Allow. Unsigned requests (curl, the sim's own
// raw-protocol tests) are the operator's tooling and are not checked; AWS
// would refuse them outright. Refusals carry each service's error: EC2 UnauthorizedOperation
// (with an encoded authorization message), IAM AccessDenied, the JSON
// services AccessDeniedException.
//
// Policies are written with the placeholders of Joiner's shipped policy:
// REGION and ACCOUNT are the sim's, NODEROLE is NodeRole, CLUSTER is
// Cluster.
type Access struct {
	// Policy is every caller's policy document. Empty: the controller
	// policy Joiner ships (packaging/iam/controller-policy.json).
	Policy json.RawMessage `json:"policy,omitempty"`
	// Cluster replaces CLUSTER. Empty: the cluster each request is about,
	// the eks:eks-cluster-name (else kubernetes.io/cluster/<name>) among
	// the tags it sets or the tags of the resources it names, the EKS
	// cluster in its path or the SQS queue it names (the shipped policy's
	// interruption queue is named for the cluster); a request naming none
	// gets "".
	Cluster string `json:"cluster,omitempty"`
	// NodeRole replaces NODEROLE (default "*": any role).
	NodeRole string `json:"nodeRole,omitempty"`
	// Callers give callers (by access key ID) a policy of their own, e.g.
	// a test that plays another controller.
	Callers map[string]Caller `json:"callers,omitempty"`
	// Unrestricted turns authorization off.
	Unrestricted bool `json:"unrestricted,omitempty"`
}

// Caller is one caller's access.
type Caller struct {
	Policy       json.RawMessage `json:"policy,omitempty"`
	Unrestricted bool            `json:"unrestricted,omitempty"`
}

// SetAccess replaces what callers may do (a test switching policies).
func (s *Sim) SetAccess(a Access) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.IAM.Access = a
	clear(s.policies)
}

// principal is who signed a request and for which region.
type principal struct {
	accessKey, region string
	signed            bool
}

// principalOf reads the access key ID and region of a SigV4 Authorization
// header (Credential=AKID/date/region/service/aws4_request).
func principalOf(r *http.Request) principal {
	var p principal
	_, cred, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if !ok {
		return p
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	p.accessKey, p.signed = parts[0], true
	if len(parts) >= 3 {
		p.region = parts[2]
	}
	return p
}

// arn is the principal's ARN in authorization messages.
func (p principal) arn() string {
	session := p.accessKey
	if session == "" {
		session = "anonymous"
	}
	return "arn:aws:sts::" + ownerID + ":assumed-role/joiner-sim/" + session
}

// ValidateAccess parses every policy of a config (with placeholders
// filled) so that a bad document fails at start, naming itself.
func ValidateAccess(a Access, region string) error {
	docs := map[string]json.RawMessage{"iam.policy": a.Policy}
	for k, c := range a.Callers {
		docs["iam.callers["+k+"].policy"] = c.Policy
	}
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		if len(docs[name]) == 0 {
			continue
		}
		if _, err := ParsePolicy(fillPolicy(docs[name], region, a.NodeRole, "c")); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func fillPolicy(doc []byte, region, nodeRole, cluster string) []byte {
	if nodeRole == "" {
		nodeRole = "*"
	}
	return iampolicy.Fill(doc, iampolicy.Values{Region: region, Account: ownerID, Cluster: cluster, NodeRole: nodeRole})
}

// policyFor returns the caller's policy for cluster (nil: unrestricted).
// The caller holds s.mu.
func (s *Sim) policyFor(p principal, cluster string) (*Policy, error) {
	a := s.cfg.IAM.Access
	doc := []byte(a.Policy)
	if c, ok := a.Callers[p.accessKey]; ok {
		if c.Unrestricted {
			return nil, nil
		}
		doc = c.Policy
	} else if a.Unrestricted {
		return nil, nil
	}
	if len(doc) == 0 {
		doc = iampolicy.ControllerPolicy()
	}
	if a.Cluster != "" {
		cluster = a.Cluster
	}
	key := p.accessKey + "\x00" + cluster
	if pol, ok := s.policies[key]; ok {
		return pol, nil
	}
	pol, err := ParsePolicy(fillPolicy(doc, s.cfg.Region, a.NodeRole, cluster))
	if err != nil {
		return nil, err
	}
	s.policies[key] = pol
	return pol, nil
}

// denial is a refused request: the authorization that failed.
type denial struct {
	who      principal
	req      AuthRequest
	explicit bool
	internal error // the policy could not be read
}

// authorize decides reqs for the caller; nil when every one is allowed.
// The caller holds s.mu.
func (s *Sim) authorize(p principal, reqs []AuthRequest) *denial {
	if len(reqs) == 0 || !p.signed {
		return nil
	}
	for i := range reqs {
		if reqs[i].Context == nil {
			reqs[i].Context = map[string][]string{}
		}
		region := p.region
		if region == "" {
			region = s.cfg.Region
		}
		reqs[i].Context["aws:RequestedRegion"] = []string{region}
	}
	pol, err := s.policyFor(p, clusterOf(reqs))
	if err != nil {
		return &denial{who: p, req: reqs[0], internal: err}
	}
	if pol == nil {
		return nil
	}
	d, i := pol.Decide(reqs)
	if d == Allowed {
		return nil
	}
	s.denied[reqs[i].Action]++
	return &denial{who: p, req: reqs[i], explicit: d == ExplicitDeny}
}

// Denied returns how many requests the policy refused for an IAM action
// ("ec2:CreateFleet").
func (s *Sim) Denied(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denied[action]
}

// clusterOf is the cluster a request is about (see Access.Cluster).
func clusterOf(reqs []AuthRequest) string {
	for _, prefix := range []string{"aws:RequestTag/", "aws:ResourceTag/"} {
		for _, r := range reqs {
			if v := r.Context[prefix+tagEKSClusterName]; len(v) > 0 {
				return v[0]
			}
		}
		for _, r := range reqs {
			for _, k := range slices.Sorted(maps.Keys(r.Context)) {
				if name, ok := strings.CutPrefix(k, prefix+tagClusterPrefix); ok {
					return name
				}
			}
		}
	}
	for _, r := range reqs {
		switch {
		case strings.HasPrefix(r.Resource, "arn:aws:eks:"):
			if _, name, ok := strings.Cut(r.Resource, ":cluster/"); ok {
				return name
			}
		case strings.HasPrefix(r.Resource, "arn:aws:sqs:"): // the interruption queue is named for the cluster
			return r.Resource[strings.LastIndexByte(r.Resource, ':')+1:]
		}
	}
	return ""
}

// The tag keys clusterOf reads (AWS's and Kubernetes' spelling).
const (
	tagEKSClusterName = "eks:eks-cluster-name"
	tagClusterPrefix  = "kubernetes.io/cluster/"
)

// message is IAM's explanation of a refusal.
func (d *denial) message() string {
	why := "because no identity-based policy allows the " + d.req.Action + " action"
	if d.explicit {
		why = "with an explicit deny in an identity-based policy"
	}
	return fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s %s", d.who.arn(), d.req.Action, d.req.Resource, why)
}

// encoded is the encoded authorization failure message EC2 appends (the
// sim's is base64 JSON of the decision and its context, the shape
// sts:DecodeAuthorizationMessage returns).
func (d *denial) encoded() string {
	conds := []map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(d.req.Context)) {
		conds = append(conds, map[string]any{"key": k, "values": d.req.Context[k]})
	}
	b, _ := json.Marshal(map[string]any{"allowed": false, "explicitDeny": d.explicit, "context": map[string]any{
		"principal": map[string]string{"arn": d.who.arn()}, "action": d.req.Action, "resource": d.req.Resource, "conditions": conds}})
	return base64.RawURLEncoding.EncodeToString(b)
}

// ec2Error is EC2's refusal.
func (d *denial) ec2Error() *apiError {
	if d == nil {
		return nil
	}
	if d.internal != nil {
		return &apiError{status: http.StatusInternalServerError, code: "InternalError", msg: "reading the caller's policy: " + d.internal.Error()}
	}
	return &apiError{status: http.StatusForbidden, code: "UnauthorizedOperation",
		msg: "You are not authorized to perform this operation. " + d.message() + ". Encoded authorization failure message: " + d.encoded()}
}

// iamError is IAM's refusal.
func (d *denial) iamError() *apiError {
	if d == nil {
		return nil
	}
	if d.internal != nil {
		return &apiError{status: http.StatusInternalServerError, code: "ServiceFailure", msg: "reading the caller's policy: " + d.internal.Error()}
	}
	return &apiError{status: http.StatusForbidden, code: "AccessDenied", msg: d.message()}
}

// writeJSON writes the refusal of the JSON and REST-JSON services
// (AccessDeniedException; EKS answers 403, the others 400).
func (d *denial) writeJSON(w http.ResponseWriter, status int) {
	if d.internal != nil {
		writeJSONError(w, http.StatusInternalServerError, "InternalServerException", "reading the caller's policy: "+d.internal.Error())
		return
	}
	writeJSONError(w, status, "AccessDeniedException", d.message())
}

// --- request contexts ---

// tagContext is the context of tags a request sets (aws:RequestTag/<k>,
// aws:TagKeys) or a resource carries (aws:ResourceTag/<k>, and EC2's
// ec2:ResourceTag/<k> for EC2 resources).
func tagContext(ctx map[string][]string, request, resource map[string]string, ec2 bool) map[string][]string {
	if ctx == nil {
		ctx = map[string][]string{}
	}
	if len(request) > 0 {
		ctx["aws:TagKeys"] = slices.Sorted(maps.Keys(request))
	}
	for k, v := range request {
		ctx["aws:RequestTag/"+k] = []string{v}
	}
	for k, v := range resource {
		ctx["aws:ResourceTag/"+k] = []string{v}
		if ec2 {
			ctx["ec2:ResourceTag/"+k] = []string{v}
		}
	}
	return ctx
}

func (s *Sim) ec2ARN(kind, id string) string {
	return "arn:aws:ec2:" + s.cfg.Region + ":" + ownerID + ":" + kind + "/" + id
}

// ec2AuthRequests are the authorizations of an EC2 call at the API layer:
// one per resource it names, with the tags it sets and those the
// resources carry. CreateFleet's launches are authorized per offering
// (launchAuth); resources that do not exist are left to the action's own
// NotFound error. The caller holds s.mu.
func (s *Sim) ec2AuthRequests(r Request) []AuthRequest {
	action := "ec2:" + r.Action
	one := func(resource string, ctx map[string][]string) AuthRequest {
		return AuthRequest{Action: action, Resource: resource, Context: ctx}
	}
	switch r.Action {
	case "CreateLaunchTemplate":
		tags := r.TagSpecs("TagSpecification")["launch-template"]
		return append([]AuthRequest{one(s.ec2ARN("launch-template", "*"), tagContext(nil, tags, nil, true))},
			s.tagOnCreate("CreateLaunchTemplate", "launch-template", tags)...)
	case "DeleteLaunchTemplate":
		if lt := s.templateByNameOrID(r.Get("LaunchTemplateName"), r.Get("LaunchTemplateId")); lt != nil {
			return []AuthRequest{one(s.ec2ARN("launch-template", lt.ID), tagContext(nil, nil, lt.Tags, true))}
		}
		return nil
	case "TerminateInstances":
		var out []AuthRequest
		for _, id := range r.Strings("InstanceId") {
			if in := s.instances[id]; in != nil {
				out = append(out, one(s.ec2ARN("instance", id), tagContext(nil, nil, in.Tags, true)))
			}
		}
		return out
	case "CreateTags":
		var out []AuthRequest
		tags := r.Tags("Tag")
		for _, id := range r.Strings("ResourceId") {
			if in := s.instances[id]; in != nil {
				out = append(out, one(s.ec2ARN("instance", id), tagContext(nil, tags, in.Tags, true)))
			} else if lt := s.templateByNameOrID("", id); lt != nil {
				out = append(out, one(s.ec2ARN("launch-template", id), tagContext(nil, tags, lt.Tags, true)))
			}
		}
		return out
	case "CreateFleet":
		tags := r.TagSpecs("TagSpecification")["fleet"]
		out := append([]AuthRequest{one(s.ec2ARN("fleet", "*"), tagContext(nil, tags, nil, true))}, s.tagOnCreate("CreateFleet", "fleet", tags)...)
		for _, c := range r.Sub("LaunchTemplateConfigs") {
			spec := c.Struct("LaunchTemplateSpecification")
			if lt := s.templateByNameOrID(spec.Get("LaunchTemplateName"), spec.Get("LaunchTemplateId")); lt != nil {
				out = append(out, one(s.ec2ARN("launch-template", lt.ID), tagContext(nil, nil, lt.Tags, true)))
			}
		}
		return out
	}
	// Describe* have no resource-level permissions.
	return []AuthRequest{one("*", nil)}
}

// tagOnCreate is the ec2:CreateTags authorization of tags set by a create
// action (none without tags).
func (s *Sim) tagOnCreate(createAction, kind string, tags map[string]string) []AuthRequest {
	if len(tags) == 0 {
		return nil
	}
	ctx := tagContext(map[string][]string{"ec2:CreateAction": {createAction}}, tags, nil, true)
	return []AuthRequest{{Action: "ec2:CreateTags", Resource: s.ec2ARN(kind, "*"), Context: ctx}}
}

func (s *Sim) templateByNameOrID(name, id string) *launchTemplate {
	if lt, ok := s.templates[name]; ok && name != "" {
		return lt
	}
	for _, lt := range s.templates {
		if id != "" && lt.ID == id {
			return lt
		}
	}
	return nil
}

// codeUnauthorized is EC2's error code for a refused authorization.
const codeUnauthorized = "UnauthorizedOperation"

// launchAuth authorizes the launch of one CreateFleet offering as EC2
// does for the RunInstances it makes: ec2:RunInstances and ec2:CreateFleet
// on the new instance, volumes, network interfaces and (spot) request with
// the tags they get, on the subnet, security groups, image and its
// snapshot, placement group, capacity reservation and launch template;
// ec2:CreateTags for the
// tags created; iam:PassRole on the instance profile's role (profiles the
// sim does not know are taken as made elsewhere and not checked). A
// refusal is the offering's fleet error. Tags for a spot request on an
// on-demand launch are refused as EC2 refuses them. The caller holds s.mu.
func (s *Sim) launchAuth(r Request, fo fleetOverride, capType string) (code, msg string) {
	lt := fo.lt
	fleetTags, dataTags := r.TagSpecs("TagSpecification"), lt.Data.TagSpecs("TagSpecification")
	if capType != "spot" && len(dataTags["spot-instances-request"]) > 0 {
		return "InvalidParameterValue", "You cannot specify tags for Spot instances requests if there are no Spot instances requests being created by the request."
	}
	type res struct {
		arn  string
		ctx  map[string][]string
		kind string // a created resource's type, for tag-on-create
		tags map[string]string
	}
	created := func(kind string, tags map[string]string) res {
		return res{arn: s.ec2ARN(kind, "*"), ctx: tagContext(nil, tags, nil, true), kind: kind, tags: tags}
	}
	existing := func(arn string, tags map[string]string) res {
		return res{arn: arn, ctx: tagContext(nil, nil, tags, true)}
	}
	all := []res{created("instance", fleetTags["instance"]), created("volume", fleetTags["volume"]),
		created("network-interface", dataTags["network-interface"])}
	if capType == "spot" {
		all = append(all, created("spot-instances-request", dataTags["spot-instances-request"]))
	}
	if sn, ok := s.subnet(fo.subnet); ok {
		all = append(all, existing(s.ec2ARN("subnet", sn.ID), sn.Tags))
	}
	groups := slices.Clone(lt.SGs)
	for _, ni := range lt.Extra.NIs {
		groups = append(groups, ni.SGs...)
	}
	slices.Sort(groups)
	for _, g := range slices.Compact(groups) {
		all = append(all, existing(s.ec2ARN("security-group", g), s.securityGroupTags(g)))
	}
	im, _ := s.image(fo.image)
	regional := "arn:aws:ec2:" + s.cfg.Region + "::"
	all = append(all, existing(regional+"image/"+fo.image, im.Tags), existing(regional+"snapshot/snap-"+strings.TrimPrefix(fo.image, "ami-"), nil))
	if pg := lt.Extra.Placement; pg.GroupID != "" || pg.GroupName != "" {
		if g, ok := s.placementGroup(pg.GroupID, pg.GroupName); ok {
			all = append(all, existing(s.ec2ARN("placement-group", g.Name), g.Tags))
		}
	}
	if cr := lt.Data.Get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"); cr != "" {
		all = append(all, existing(s.ec2ARN("capacity-reservation", cr), nil))
	}
	all = append(all, existing(s.ec2ARN("launch-template", lt.ID), lt.Tags))
	var reqs []AuthRequest
	for _, x := range all {
		for _, action := range []string{"ec2:RunInstances", "ec2:CreateFleet"} {
			reqs = append(reqs, AuthRequest{Action: action, Resource: x.arn, Context: maps.Clone(x.ctx)})
		}
		if x.kind != "" {
			reqs = append(reqs, s.tagOnCreate("RunInstances", x.kind, x.tags)...)
		}
	}
	if name := lt.Data.Get("IamInstanceProfile.Name"); name != "" {
		if p := s.profiles[name]; p != nil && p.Role != "" {
			reqs = append(reqs, AuthRequest{Action: "iam:PassRole", Resource: s.roleARN(p.Role),
				Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}})
		}
	}
	if d := s.authorize(r.principal, reqs); d != nil {
		e := d.ec2Error()
		return e.code, e.msg
	}
	return "", ""
}

func (s *Sim) securityGroupTags(id string) map[string]string {
	g, _ := s.securityGroup(id)
	return g.Tags
}

// iamAuthRequests are the authorizations of an IAM call: the action on the
// instance profile (its path and tags when it exists; the requested path
// and tags when it is created, with iam:TagInstanceProfile for tags set on
// create), iam:PassRole for a role added to a profile. The caller holds
// s.mu.
func (s *Sim) iamAuthRequests(r Request) []AuthRequest {
	action := "iam:" + r.Action
	name := r.Get("InstanceProfileName")
	switch r.Action {
	case "ListInstanceProfiles":
		prefix := r.Get("PathPrefix")
		if prefix == "" {
			prefix = "/"
		}
		return []AuthRequest{{Action: action, Resource: s.profileARN(prefix, "")}}
	case "GetRole":
		return []AuthRequest{{Action: action, Resource: s.roleARN(r.Get("RoleName"))}}
	case "CreateInstanceProfile":
		path := r.Get("Path")
		if path == "" {
			path = "/"
		}
		tags := r.Tags("Tags.member")
		arn := s.profileARN(path, name)
		out := []AuthRequest{{Action: action, Resource: arn, Context: tagContext(nil, tags, nil, false)}}
		if len(tags) > 0 { // the profile is born with them
			out = append(out, AuthRequest{Action: "iam:TagInstanceProfile", Resource: arn, Context: tagContext(nil, tags, tags, false)})
		}
		return out
	}
	path, tags := "/", map[string]string(nil)
	if p := s.profiles[name]; p != nil {
		path, tags = p.Path, p.Tags
	}
	arn := s.profileARN(path, name)
	var request map[string]string
	if r.Action == "TagInstanceProfile" {
		request = r.Tags("Tags.member")
	}
	out := []AuthRequest{{Action: action, Resource: arn, Context: tagContext(nil, request, tags, false)}}
	if r.Action == "AddRoleToInstanceProfile" {
		out = append(out, AuthRequest{Action: "iam:PassRole", Resource: s.roleARN(r.Get("RoleName")),
			Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}})
	}
	return out
}

// jsonServices maps X-Amz-Target prefixes to IAM service prefixes.
var jsonServices = map[string]string{"AmazonSSM": "ssm", "AmazonSQS": "sqs", "AWSPriceListService": "pricing"}

// jsonAuthRequests are the authorizations of a JSON-protocol call: the
// action on the SSM parameters, SQS queue or (Pricing) "*" it names.
func (s *Sim) jsonAuthRequests(target string, body []byte) []AuthRequest {
	svcName, op, _ := strings.Cut(target, ".")
	svc, ok := jsonServices[svcName]
	if !ok {
		return nil
	}
	action := svc + ":" + op
	var in struct {
		Name      string
		Names     []string
		Path      string
		QueueURL  string `json:"QueueUrl"`
		QueueName string
	}
	_ = json.Unmarshal(body, &in) // the handler reports a bad body
	var resources []string
	switch svc {
	case "ssm":
		for _, n := range append([]string{in.Name, in.Path}, in.Names...) {
			if n != "" {
				resources = append(resources, s.parameterARN(n))
			}
		}
	case "sqs":
		queue := in.QueueName
		if in.QueueURL != "" {
			queue = in.QueueURL[strings.LastIndexByte(in.QueueURL, '/')+1:]
		}
		if queue != "" {
			resources = append(resources, "arn:aws:sqs:"+s.cfg.Region+":"+ownerID+":"+queue)
		}
	}
	if len(resources) == 0 {
		resources = []string{"*"}
	}
	out := make([]AuthRequest, 0, len(resources))
	for _, res := range resources {
		out = append(out, AuthRequest{Action: action, Resource: res})
	}
	return out
}

// parameterARN is an SSM parameter's ARN; AWS's public parameters
// (/aws/service/...) have no account.
func (s *Sim) parameterARN(name string) string {
	account := ownerID
	if strings.HasPrefix(name, "/aws/service/") {
		account = ""
	}
	return "arn:aws:ssm:" + s.cfg.Region + ":" + account + ":parameter/" + strings.TrimPrefix(name, "/")
}

// authorizeJSON authorizes a JSON-protocol call; false when it wrote the
// refusal.
func (s *Sim) authorizeJSON(w http.ResponseWriter, p principal, target string, body []byte) bool {
	s.mu.Lock()
	d := s.authorize(p, s.jsonAuthRequests(target, body))
	s.mu.Unlock()
	if d != nil {
		d.writeJSON(w, http.StatusBadRequest)
		return false
	}
	return true
}

// withEKSAuth authorizes DescribeCluster (GET /clusters/<name>) before
// next serves it; other paths go to next, which refuses what it does not
// simulate.
func (s *Sim) withEKSAuth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/clusters/")
		if r.Method == http.MethodGet && name != "" && !strings.Contains(name, "/") {
			s.mu.Lock()
			d := s.authorize(principalOf(r), []AuthRequest{{Action: "eks:DescribeCluster",
				Resource: "arn:aws:eks:" + s.cfg.Region + ":" + ownerID + ":cluster/" + name}})
			s.mu.Unlock()
			if d != nil {
				d.writeJSON(w, http.StatusForbidden)
				return
			}
		}
		next(w, r)
	}
}
