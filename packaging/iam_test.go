package packaging_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const policyFile = "iam/controller-policy.json"

// policyPlaceholders are the words README tells the operator to replace.
var policyPlaceholders = []string{"ACCOUNT", "CLUSTER", "NODEROLE", "REGION"}

// stringOrList is an IAM policy element that is a string or a list.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

type policyStatement struct {
	Sid       string
	Effect    string
	Action    stringOrList
	Resource  stringOrList
	Condition map[string]map[string]stringOrList
}

type policyDocument struct {
	Version   string
	Statement []policyStatement
}

// loadPolicy parses the shipped policy strictly (no NotAction, NotResource
// or Principal: unknown fields fail).
func loadPolicy(t *testing.T) policyDocument {
	t.Helper()
	b, err := os.ReadFile(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p policyDocument
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s: %v", policyFile, err)
	}
	return p
}

// sdkServices are the AWS SDK service packages whose calls map to IAM
// actions of the same prefix (ec2.Client.CreateFleet -> ec2:CreateFleet).
var sdkServices = []string{"ec2", "eks", "iam", "pricing", "sqs", "ssm", "sts"}

// impliedActions are the IAM actions a call needs besides its own: EC2
// Fleet launches through RunInstances, tags on create (CreateTags with
// ec2:CreateAction) and passes the launch template's instance profile role
// (iam:PassRole); CreateLaunchTemplate tags on create; an instance profile
// created with tags needs iam:TagInstanceProfile, and adding a role to one
// passes the role.
var impliedActions = map[string][]string{
	"ec2:CreateFleet":              {"ec2:RunInstances", "ec2:CreateTags", "iam:PassRole"},
	"ec2:CreateLaunchTemplate":     {"ec2:CreateTags"},
	"iam:CreateInstanceProfile":    {"iam:TagInstanceProfile"},
	"iam:AddRoleToInstanceProfile": {"iam:PassRole"},
}

// calledAWSActions reads cloud/aws (not its tests) and returns the IAM
// actions of every SDK call: p.ec2.X(...), ec2.NewXPaginator(...) and
// api.X(...) or d.api.X(...) where api is a parameter or field of a client
// interface type (EKSAPI), and the methods of the client interfaces
// (EC2API, SSMAPI, ...) it declares.
func calledAWSActions(t *testing.T) (called, declared map[string]bool) {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "cloud", "aws")
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	called, declared = map[string]bool{}, map[string]bool{}
	paginator := regexp.MustCompile(`^New(\w+)Paginator$`)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, f := range paths {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	// clientService is the service of a client interface type name
	// (EKSAPI -> eks), "" for other names.
	clientService := func(e ast.Expr) string {
		id, ok := e.(*ast.Ident)
		svc := ""
		if ok && strings.HasSuffix(id.Name, "API") {
			svc = strings.ToLower(strings.TrimSuffix(id.Name, "API"))
		}
		if !slices.Contains(sdkServices, svc) {
			return ""
		}
		return svc
	}
	// The client interfaces' methods, and parameters and fields of a
	// client interface type by name (a name may serve several services).
	clients := map[string][]string{}
	for _, file := range files {
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				if svc := clientService(n.Type); svc != "" {
					for _, name := range n.Names {
						clients[name.Name] = append(clients[name.Name], svc)
					}
				}
			case *ast.TypeSpec:
				it, ok := n.Type.(*ast.InterfaceType)
				svc := clientService(n.Name)
				if !ok || svc == "" {
					return true
				}
				for _, m := range it.Methods.List {
					for _, name := range m.Names {
						declared[svc+":"+name.Name] = true
					}
				}
			}
			return true
		})
	}
	// viaClient records a call of method on a client variable name.
	viaClient := func(name, method string) {
		for _, svc := range clients[name] {
			if declared[svc+":"+method] {
				called[svc+":"+method] = true
			}
		}
	}
	for _, file := range files {
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch x := sel.X.(type) {
				case *ast.SelectorExpr: // p.ec2.DescribeImages(...), d.api.DescribeCluster(...)
					if slices.Contains(sdkServices, x.Sel.Name) {
						called[x.Sel.Name+":"+sel.Sel.Name] = true
					} else {
						viaClient(x.Sel.Name, sel.Sel.Name)
					}
				case *ast.Ident: // ec2.NewDescribeSubnetsPaginator(p.ec2, ...), api.DescribeCluster(...)
					if slices.Contains(sdkServices, x.Name) { // a package
						if m := paginator.FindStringSubmatch(sel.Sel.Name); m != nil {
							called[x.Name+":"+m[1]] = true
						}
					} else {
						viaClient(x.Name, sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
	return called, declared
}

// TestAWSClientsOnlyInCloudAWS: every AWS SDK service client lives in
// cloud/aws, so the calls read there are all the calls Joiner makes.
func TestAWSClientsOnlyInCloudAWS(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// test/ is the test kit, not Joiner: test/karpenterstate plays
			// Karpenter and launches through EC2 as Karpenter does.
			if rel == "tools" || rel == "bin" || rel == "test" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(rel) == filepath.Join("cloud", "aws") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/aws/aws-sdk-go-v2/service/") && !strings.HasSuffix(p, "/types") {
				t.Errorf("%s imports %s: AWS clients belong in cloud/aws (the IAM policy test reads the calls there)", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestClientInterfacesMatchCalls: the client interfaces beside the AWS
// client list exactly the calls the provider makes.
func TestClientInterfacesMatchCalls(t *testing.T) {
	called, declared := calledAWSActions(t)
	if len(called) < 10 {
		t.Fatalf("found only %d SDK calls in cloud/aws: %v (the scan is broken)", len(called), slices.Sorted(maps.Keys(called)))
	}
	for _, a := range slices.Sorted(maps.Keys(called)) {
		if !declared[a] {
			t.Errorf("cloud/aws calls %s but no client interface declares it", a)
		}
	}
	for _, a := range slices.Sorted(maps.Keys(declared)) {
		if !called[a] {
			t.Errorf("a cloud/aws client interface declares %s but nothing calls it: remove it (and its IAM grant)", a)
		}
	}
}

// TestIAMPolicyGrantsExactlyWhatTheCodeCalls: every action the code calls
// (or that a call needs) is allowed, nothing else is, and no action is a
// wildcard.
func TestIAMPolicyGrantsExactlyWhatTheCodeCalls(t *testing.T) {
	p := loadPolicy(t)
	called, _ := calledAWSActions(t)
	need := maps.Clone(called)
	for a := range called {
		for _, x := range impliedActions[a] {
			need[x] = true
		}
	}
	granted := map[string]bool{}
	for _, s := range p.Statement {
		if s.Effect != "Allow" {
			t.Errorf("statement %s: effect %q; the policy only allows", s.Sid, s.Effect)
		}
		for _, a := range s.Action {
			if strings.ContainsAny(a, "*?") {
				t.Errorf("statement %s grants a wildcard action %q", s.Sid, a)
			}
			granted[a] = true
		}
	}
	for _, a := range slices.Sorted(maps.Keys(need)) {
		if !granted[a] {
			t.Errorf("the code needs %s but %s does not allow it", a, policyFile)
		}
	}
	for _, a := range slices.Sorted(maps.Keys(granted)) {
		if !need[a] {
			t.Errorf("%s allows %s, which the code never calls", policyFile, a)
		}
	}
}

// resourceType is the resource type of an ARN ("instance" for
// arn:aws:ec2:REGION:ACCOUNT:instance/*), or the ARN itself.
func resourceType(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 {
		return arn
	}
	typ, _, _ := strings.Cut(parts[5], "/")
	return typ
}

// conditionKeyRE: the global and service condition keys the policy may use,
// spelled as AWS documents them.
var conditionKeyRE = regexp.MustCompile(`^(aws:RequestTag/.+|aws:ResourceTag/.+|aws:RequestedRegion|ec2:CreateAction|iam:PassedToService)$`)

func TestIAMPolicyScoping(t *testing.T) {
	p := loadPolicy(t)
	if p.Version != "2012-10-17" {
		t.Errorf("Version = %q, want 2012-10-17", p.Version)
	}
	sids := map[string]bool{}
	for _, s := range p.Statement {
		if s.Sid == "" || sids[s.Sid] {
			t.Errorf("statement Sid %q is empty or repeated", s.Sid)
		}
		sids[s.Sid] = true
		for op, conds := range s.Condition {
			if op != "StringEquals" && op != "StringLike" {
				t.Errorf("statement %s: condition operator %s (want StringEquals or StringLike)", s.Sid, op)
			}
			for k := range conds {
				if !conditionKeyRE.MatchString(k) {
					t.Errorf("statement %s: condition key %q is not one the policy should use", s.Sid, k)
				}
			}
		}
		// Only actions without resource-level permissions (EC2 Describe*,
		// Pricing's GetProducts) may be granted on "*"; EC2's only in the
		// cluster's region (Pricing answers from a few regions only).
		if slices.Contains(s.Resource, "*") {
			for _, a := range s.Action {
				if !strings.HasPrefix(a, "ec2:Describe") && a != "pricing:GetProducts" {
					t.Errorf("statement %s grants %s on every resource", s.Sid, a)
				}
			}
			if got := s.Condition["StringEquals"]["aws:RequestedRegion"]; strings.HasPrefix(s.Action[0], "ec2:") && !slices.Equal(got, []string{"REGION"}) {
				t.Errorf("statement %s on * is not limited to the region: %v", s.Sid, got)
			}
		}
	}

	// What Karpenter's v1 policy requires of what a launch creates, and of
	// the instance profiles it makes (plus joiner.io/cluster on Joiner's
	// launch templates).
	clusterOwned := map[string]stringOrList{"aws:RequestTag/kubernetes.io/cluster/CLUSTER": {"owned"}, "aws:RequestTag/eks:eks-cluster-name": {"CLUSTER"}}
	poolAndClass := map[string]stringOrList{"aws:RequestTag/karpenter.sh/nodepool": {"*"}, "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": {"*"}}
	resourceOwned := map[string]stringOrList{"aws:ResourceTag/kubernetes.io/cluster/CLUSTER": {"owned"}}
	joinerTemplate := map[string]stringOrList{"aws:ResourceTag/kubernetes.io/cluster/CLUSTER": {"owned"}, "aws:ResourceTag/joiner.io/cluster": {"CLUSTER"}}
	profileArn := "arn:aws:iam::ACCOUNT:instance-profile/karpenter/REGION/CLUSTER/*"
	// The profiles Karpenter made before v1.7 (CLUSTER_<hash> at /) may lose
	// their role and be deleted with their class, under the same tags.
	legacyProfileArn := "arn:aws:iam::ACCOUNT:instance-profile/CLUSTER_*"
	alsoArn := map[string]string{"iam:RemoveRoleFromInstanceProfile": legacyProfileArn, "iam:DeleteInstanceProfile": legacyProfileArn}
	profileTags := map[string]stringOrList{"aws:RequestTag/kubernetes.io/cluster/CLUSTER": {"owned"}, "aws:RequestTag/eks:eks-cluster-name": {"CLUSTER"},
		"aws:RequestTag/topology.kubernetes.io/region": {"REGION"}}
	profileOwned := map[string]stringOrList{"aws:ResourceTag/kubernetes.io/cluster/CLUSTER": {"owned"}, "aws:ResourceTag/topology.kubernetes.io/region": {"REGION"}}
	profileClass := map[string]stringOrList{"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": {"*"}}
	for _, c := range []struct {
		name     string
		action   string
		resource string // resource type; every statement granting action on it must have...
		equals   map[string]stringOrList
		like     map[string]stringOrList
		arn      string // ...and, when set, exactly this resource (or alsoArn's)
	}{
		{"instances are launched tagged for the cluster", "ec2:RunInstances", "instance", clusterOwned, poolAndClass, ""},
		{"fleets are created tagged for the cluster", "ec2:CreateFleet", "fleet", clusterOwned, poolAndClass, ""},
		{"fleet instances are tagged for the cluster", "ec2:CreateFleet", "instance", clusterOwned, poolAndClass, ""},
		{"volumes are tagged for the cluster", "ec2:CreateFleet", "volume", clusterOwned, poolAndClass, ""},
		{"network interfaces are tagged for the cluster", "ec2:RunInstances", "network-interface", clusterOwned, poolAndClass, ""},
		{"spot requests are tagged for the cluster", "ec2:CreateFleet", "spot-instances-request", clusterOwned, poolAndClass, ""},
		{"only Joiner's launch templates of this cluster launch", "ec2:CreateFleet", "launch-template", joinerTemplate,
			map[string]stringOrList{"aws:ResourceTag/karpenter.sh/nodepool": {"*"}}, ""},
		{"launch templates are created tagged for the cluster", "ec2:CreateLaunchTemplate", "launch-template",
			map[string]stringOrList{"aws:RequestTag/kubernetes.io/cluster/CLUSTER": {"owned"}, "aws:RequestTag/eks:eks-cluster-name": {"CLUSTER"},
				"aws:RequestTag/joiner.io/cluster": {"CLUSTER"}}, poolAndClass, ""},
		{"tags only on create", "ec2:CreateTags", "instance",
			map[string]stringOrList{"ec2:CreateAction": {"CreateFleet", "CreateLaunchTemplate", "RunInstances"}, "aws:RequestTag/kubernetes.io/cluster/CLUSTER": {"owned"}}, nil, ""},
		{"tags only on create (launch templates)", "ec2:CreateTags", "launch-template",
			map[string]stringOrList{"ec2:CreateAction": {"CreateFleet", "CreateLaunchTemplate", "RunInstances"}}, nil, ""},
		{"only the cluster's NodePool instances terminate", "ec2:TerminateInstances", "instance", resourceOwned,
			map[string]stringOrList{"aws:ResourceTag/karpenter.sh/nodepool": {"*"}}, ""},
		{"only Joiner's launch templates of this cluster are deleted", "ec2:DeleteLaunchTemplate", "launch-template", joinerTemplate, nil, ""},
		{"the node role passes to EC2 only", "iam:PassRole", "role",
			map[string]stringOrList{"iam:PassedToService": {"ec2.amazonaws.com"}}, nil, "arn:aws:iam::ACCOUNT:role/NODEROLE"},
		{"SSM reads only the public AMI parameters", "ssm:GetParameter", "parameter", nil, nil, "arn:aws:ssm:REGION::parameter/aws/service/*"},
		{"instance profiles are created tagged, at the cluster's path", "iam:CreateInstanceProfile", "instance-profile", profileTags,
			map[string]stringOrList{"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": {"*"}}, profileArn},
		{"only the cluster's instance profiles are tagged", "iam:TagInstanceProfile", "instance-profile", profileOwned, profileClass, profileArn},
		{"only the cluster's instance profiles get a role", "iam:AddRoleToInstanceProfile", "instance-profile", profileOwned, profileClass, profileArn},
		{"only the cluster's instance profiles lose a role", "iam:RemoveRoleFromInstanceProfile", "instance-profile", profileOwned, profileClass, profileArn},
		{"only the cluster's instance profiles are deleted", "iam:DeleteInstanceProfile", "instance-profile", profileOwned, profileClass, profileArn},
		{"EKS: only the cluster is described", "eks:DescribeCluster", "cluster", nil, nil, "arn:aws:eks:REGION:ACCOUNT:cluster/CLUSTER"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			for _, s := range p.Statement {
				if !slices.Contains(s.Action, c.action) {
					continue
				}
				for _, r := range s.Resource {
					if r == "*" || resourceType(r) != c.resource {
						continue
					}
					n++
					if c.arn != "" && r != c.arn && r != alsoArn[c.action] {
						t.Errorf("statement %s: %s on %s, want only %s", s.Sid, c.action, r, c.arn)
					}
					for k, v := range c.equals {
						if got := s.Condition["StringEquals"][k]; !slices.Equal(got, v) {
							t.Errorf("statement %s: %s on %s: StringEquals %s = %v, want %v", s.Sid, c.action, r, k, got, v)
						}
					}
					for k, v := range c.like {
						if got := s.Condition["StringLike"][k]; !slices.Equal(got, v) {
							t.Errorf("statement %s: %s on %s: StringLike %s = %v, want %v", s.Sid, c.action, r, k, got, v)
						}
					}
				}
			}
			if n == 0 {
				t.Errorf("no statement grants %s on %s resources", c.action, c.resource)
			}
		})
	}
}

// TestIAMPolicyTemplate: the placeholders are the ones README names, and
// the document is valid JSON once they are replaced.
func TestIAMPolicyTemplate(t *testing.T) {
	b, err := os.ReadFile(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{}
	for _, w := range regexp.MustCompile(`\b[A-Z]{4,}\b`).FindAllString(string(b), -1) {
		words[w] = true
	}
	if got := slices.Sorted(maps.Keys(words)); !slices.Equal(got, policyPlaceholders) {
		t.Errorf("placeholders in %s: %v, want %v", policyFile, got, policyPlaceholders)
	}
	filled := strings.NewReplacer("REGION", "eu-west-1", "ACCOUNT", "111122223333", "CLUSTER", "prod").Replace(string(b))
	if !json.Valid([]byte(filled)) {
		t.Errorf("%s is not valid JSON with the placeholders replaced", policyFile)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("packaging/"+policyFile)) {
		t.Errorf("README does not point at packaging/%s", policyFile)
	}
	if bytes.Contains(readme, []byte(`"2012-10-17"`)) {
		t.Error("README still carries an inline IAM policy; it should refer to the shipped file")
	}
	for _, w := range policyPlaceholders {
		if !bytes.Contains(readme, []byte("`"+w+"`")) {
			t.Errorf("README does not tell the operator to replace `%s`", w)
		}
	}
}
