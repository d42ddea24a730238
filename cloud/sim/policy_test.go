package sim

import (
	"strings"
	"testing"
)

const evalPolicy = `{
  "Version": "2012-10-17",
  "Statement": [
    {"Sid": "Reads", "Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*",
     "Condition": {"StringEquals": {"aws:RequestedRegion": ["us-east-1", "us-west-2"]}}},
    {"Sid": "Launch", "Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
     "Resource": "arn:aws:ec2:us-east-1:*:instance/*",
     "Condition": {"StringEquals": {"aws:RequestTag/kubernetes.io/cluster/c": "owned"},
                   "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
    {"Sid": "TagOnlySome", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "arn:aws:ec2:*:*:instance/i-?bc*",
     "Condition": {"ForAllValues:StringEquals": {"aws:TagKeys": ["Name", "karpenter.sh/nodeclaim"]},
                   "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": "c"}}},
    {"Sid": "AnyTeamTag", "Effect": "Allow", "Action": "ec2:DeleteTags", "Resource": "*",
     "Condition": {"ForAnyValue:StringLike": {"aws:TagKeys": "team/*"}}},
    {"Sid": "NeedsTag", "Effect": "Allow", "Action": "ec2:StopInstances", "Resource": "*",
     "Condition": {"Null": {"aws:ResourceTag/owner": "false"}, "Bool": {"aws:SecureTransport": "true"}}},
    {"Sid": "NotThat", "Effect": "Allow", "NotAction": ["iam:*", "ec2:Describe*", "ec2:RunInstances", "ec2:CreateFleet",
     "ec2:CreateTags", "ec2:DeleteTags", "ec2:StopInstances"], "NotResource": "arn:aws:s3:::secret*"},
    {"Sid": "NoProd", "Effect": "Deny", "Action": "*", "Resource": "*",
     "Condition": {"StringNotEqualsIgnoreCase": {"aws:ResourceTag/env": ["dev", "test"]}, "Null": {"aws:ResourceTag/env": "false"}}}
  ]
}`

func TestPolicyEvaluate(t *testing.T) {
	p, err := ParsePolicy([]byte(evalPolicy))
	if err != nil {
		t.Fatal(err)
	}
	region := func(r string) map[string][]string { return map[string][]string{"aws:RequestedRegion": {r}} }
	tags := func(kv ...string) map[string][]string {
		ctx := map[string][]string{}
		var keys []string
		for i := 0; i+1 < len(kv); i += 2 {
			ctx["aws:RequestTag/"+kv[i]] = []string{kv[i+1]}
			keys = append(keys, kv[i])
		}
		ctx["aws:TagKeys"] = keys
		return ctx
	}
	const inst = "arn:aws:ec2:us-east-1:123456789012:instance/i-abc123"
	for _, c := range []struct {
		name   string
		req    AuthRequest
		want   Decision
		reason string
	}{
		{"action wildcard, region allowed", AuthRequest{"ec2:DescribeSubnets", "*", region("us-west-2")}, Allowed, ""},
		{"action names ignore case", AuthRequest{"EC2:describesubnets", "*", region("us-east-1")}, Allowed, ""},
		{"region not listed", AuthRequest{"ec2:DescribeSubnets", "*", region("eu-west-1")}, ImplicitDeny, ""},
		{"condition key missing", AuthRequest{"ec2:DescribeSubnets", "*", nil}, ImplicitDeny, ""},
		{"condition keys ignore case", AuthRequest{"ec2:DescribeSubnets", "*", map[string][]string{"AWS:REQUESTEDREGION": {"us-east-1"}}}, Allowed, ""},
		{"request tags present", AuthRequest{"ec2:RunInstances", inst, tags("kubernetes.io/cluster/c", "owned", "karpenter.sh/nodepool", "")}, Allowed,
			"StringLike * matches the empty value"},
		{"request tag value differs", AuthRequest{"ec2:RunInstances", inst, tags("kubernetes.io/cluster/c", "shared", "karpenter.sh/nodepool", "a")}, ImplicitDeny, ""},
		{"request tag missing", AuthRequest{"ec2:RunInstances", inst, tags("kubernetes.io/cluster/c", "owned")}, ImplicitDeny, ""},
		{"resource ARN region differs", AuthRequest{"ec2:RunInstances", "arn:aws:ec2:eu-west-1:1:instance/i-1",
			tags("kubernetes.io/cluster/c", "owned", "karpenter.sh/nodepool", "a")}, ImplicitDeny, ""},
		{"resource ? and * wildcards", AuthRequest{"ec2:CreateTags", inst, tags("Name", "n")}, Allowed, ""},
		{"resource ? needs one character", AuthRequest{"ec2:CreateTags", "arn:aws:ec2:us-east-1:1:instance/i-bc1", tags("Name", "n")}, ImplicitDeny, ""},
		{"ForAllValues: a key outside the set", AuthRequest{"ec2:CreateTags", inst, tags("Name", "n", "team", "a")}, ImplicitDeny, ""},
		{"ForAllValues: no keys at all", AuthRequest{"ec2:CreateTags", inst, nil}, Allowed, "vacuously true, IfExists absent key true"},
		{"IfExists: present and equal", AuthRequest{"ec2:CreateTags", inst, tags("Name", "n", "eks:eks-cluster-name", "c")}, ImplicitDeny,
			"eks:eks-cluster-name is not in the ForAllValues set"},
		{"ForAnyValue: one key matches", AuthRequest{"ec2:DeleteTags", inst, tags("x", "1", "team/a", "2")}, Allowed, ""},
		{"ForAnyValue: key missing", AuthRequest{"ec2:DeleteTags", inst, nil}, ImplicitDeny, ""},
		{"Null false and Bool", AuthRequest{"ec2:StopInstances", inst, map[string][]string{"aws:ResourceTag/owner": {"me"}, "aws:SecureTransport": {"TRUE"}}}, Allowed, ""},
		{"Null false with the key missing", AuthRequest{"ec2:StopInstances", inst, map[string][]string{"aws:SecureTransport": {"true"}}}, ImplicitDeny, ""},
		{"Bool false", AuthRequest{"ec2:StopInstances", inst, map[string][]string{"aws:ResourceTag/owner": {"me"}, "aws:SecureTransport": {"false"}}}, ImplicitDeny, ""},
		{"NotAction and NotResource allow", AuthRequest{"s3:GetObject", "arn:aws:s3:::public/x", nil}, Allowed, ""},
		{"NotResource excludes", AuthRequest{"s3:GetObject", "arn:aws:s3:::secret-bucket/x", nil}, ImplicitDeny, ""},
		{"NotAction excludes", AuthRequest{"iam:PassRole", "arn:aws:iam::1:role/r", nil}, ImplicitDeny, ""},
		{"explicit deny wins over allow", AuthRequest{"ec2:DescribeSubnets", "*",
			map[string][]string{"aws:RequestedRegion": {"us-east-1"}, "aws:ResourceTag/env": {"prod"}}}, ExplicitDeny, ""},
		{"negated operator, value listed (any case)", AuthRequest{"ec2:DescribeSubnets", "*",
			map[string][]string{"aws:RequestedRegion": {"us-east-1"}, "aws:ResourceTag/env": {"DEV"}}}, Allowed, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := p.Evaluate(c.req); got != c.want {
				t.Errorf("Evaluate(%+v) = %v, want %v %s", c.req, got, c.want, c.reason)
			}
		})
	}
	if d, i := p.Decide([]AuthRequest{{"ec2:DescribeSubnets", "*", region("us-east-1")}, {"iam:GetRole", "*", nil},
		{"ec2:DescribeSubnets", "*", region("eu-west-1")}}); d != ImplicitDeny || i != 1 {
		t.Errorf("Decide = %v at %d, want implicit deny at 1", d, i)
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"version":            `{"Version":"2008-10-17","Statement":[]}`,
		"principal":          `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"*","Resource":"*"}]}`,
		"effect":             `{"Version":"2012-10-17","Statement":[{"Effect":"allow","Action":"*","Resource":"*"}]}`,
		"action and not":     `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","NotAction":"a:b","Resource":"*"}]}`,
		"no resource":        `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*"}]}`,
		"unknown operator":   `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"DateLessThan":{"a":"b"}}}]}`,
		"object as a value":  `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":{"a":1},"Resource":"*"}]}`,
		"unknown field":      `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*","Extra":1}]}`,
		"not a JSON object":  `[]`,
		"statement not list": `{"Version":"2012-10-17","Statement":"x"}`,
	} {
		if _, err := ParsePolicy([]byte(doc)); err == nil {
			t.Errorf("%s: parsed %s", name, doc)
		}
	}
	// One statement as an object, and a Bool written as JSON true.
	p, err := ParsePolicy([]byte(`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"a:b","Resource":"*","Condition":{"Bool":{"aws:SecureTransport":true}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Evaluate(AuthRequest{"a:b", "x", map[string][]string{"aws:SecureTransport": {"true"}}}); got != Allowed {
		t.Errorf("single statement object: %v", got)
	}
}

func TestWildcardMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true}, {"*", "a:b/c", true}, {"a*c", "abbbc", true}, {"a*c", "abbb", false},
		{"a?c", "abc", true}, {"a?c", "ac", false}, {"arn:*:x/*", "arn:aws:ec2:r:1:x/y", true},
		{"**a", "bba", true}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "axxcyyb", false}, {"", "", true}, {"", "a", false},
	} {
		if got := wildcardMatch(c.pattern, c.s); got != c.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
	if !strings.Contains(ExplicitDeny.String(), "deny") {
		t.Error(ExplicitDeny.String())
	}
}
