package crds

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// apiServer validates objects against a CRD the way kube-apiserver does on
// create: defaults, OpenAPI schema, then CEL rules.
type apiServer struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func newAPIServer(t *testing.T, file string) *apiServer {
	t.Helper()
	crd := load(t, file)
	scheme := runtime.NewScheme()
	apiextensionsinstall.Install(scheme)
	scheme.Default(crd)
	var internal apiextensions.CustomResourceDefinition
	if err := scheme.Convert(crd, &internal, nil); err != nil {
		t.Fatal(err)
	}
	var props *apiextensions.JSONSchemaProps
	if internal.Spec.Validation != nil { // one version: the schema is hoisted
		props = internal.Spec.Validation.OpenAPIV3Schema
	} else {
		props = internal.Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	s, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatal(err)
	}
	sv, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	return &apiServer{structural: s, schema: sv, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
}

func (a *apiServer) validate(t *testing.T, doc string) field.ErrorList {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(j, &obj); err != nil { // integers stay int64, as in the API server
		t.Fatal(err)
	}
	structuraldefaulting.Default(obj, a.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, obj, a.schema)
	celErrs, _ := a.cel.Validate(context.Background(), nil, a.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// goValidate decodes doc into the Go type, applies the Go defaults and
// validates it.
func goValidate(t *testing.T, kind, doc string) error {
	t.Helper()
	v := goType(kind)
	if err := yaml.Unmarshal([]byte(doc), v); err != nil {
		return err
	}
	v.SetDefaults()
	return v.Validate()
}

var examples = map[string]struct{ crd, file string }{
	"NodePool":     {"karpenter.sh_nodepools.yaml", "../../api/core/v1/testdata/nodepool.yaml"},
	"NodeClaim":    {"karpenter.sh_nodeclaims.yaml", "../../api/core/v1/testdata/nodeclaim.yaml"},
	"EC2NodeClass": {"karpenter.k8s.aws_ec2nodeclasses.yaml", "../../api/aws/v1/testdata/ec2nodeclass.yaml"},
}

func readExample(t *testing.T, kind string) string {
	t.Helper()
	b, err := os.ReadFile(examples[kind].file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExamplesPassTheCRDs(t *testing.T) {
	for kind, ex := range examples {
		a := newAPIServer(t, ex.crd)
		if errs := a.validate(t, readExample(t, kind)); len(errs) > 0 {
			t.Errorf("%s example rejected by the CRD: %v", kind, errs.ToAggregate())
		}
	}
	minimal := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: d}\nspec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: []}}}\n"
	if errs := newAPIServer(t, examples["NodePool"].crd).validate(t, minimal); len(errs) > 0 {
		t.Errorf("minimal NodePool rejected: %v", errs.ToAggregate())
	}
}

// TestCRDAndGoAgree runs the same bad manifests through the CRD (as the API
// server would) and through the Go validation: both must reject them.
func TestCRDAndGoAgree(t *testing.T) {
	cases := []struct {
		kind, name, from, to string
	}{
		{"NodePool", "restricted label", "billing-team: my-team", "karpenter.sh/team: my-team"},
		{"NodePool", "nodepool label", "billing-team: my-team", "karpenter.sh/nodepool: x"},
		{"NodePool", "label value", "billing-team: my-team", "billing-team: -bad-"},
		{"NodePool", "requirement key restricted", "key: example.com/forbidden", "key: karpenter.sh/forbidden"},
		{"NodePool", "Gt two values", "operator: Gt\n        values:\n        - \"2\"", "operator: Gt\n        values: [a, b]"},
		{"NodePool", "Gte not an integer", "- \"2048\"", "- x2048"},
		{"NodePool", "Gt hex value", "- \"2\"\n", "- \"0x2\"\n"},
		{"NodePool", "In without values", "operator: NotIn\n        values:\n        - arm64", "operator: In\n        values: []"},
		{"NodePool", "minValues above values", "minValues: 2", "minValues: 4"},
		{"NodePool", "minValues range", "minValues: 10", "minValues: 51"},
		{"NodePool", "operator", "operator: NotIn", "operator: Like"},
		{"NodePool", "taint effect", "effect: NoSchedule\n      startupTaints", "effect: Sometimes\n      startupTaints"},
		{"NodePool", "taint key", "key: example.com/special-taint", "key: bad key"},
		{"NodePool", "weight", "weight: 10", "weight: 0"},
		{"NodePool", "budget nodes", "- nodes: 10%", "- nodes: 101%"},
		{"NodePool", "schedule without duration", "      duration: 8h\n", ""},
		{"NodePool", "budget duration seconds", "duration: 8h", "duration: 30s"},
		{"NodePool", "budget reason", "- Drifted", "- Expired"},
		{"NodePool", "consolidation policy", "consolidationPolicy: WhenEmptyOrUnderutilized", "consolidationPolicy: WhenUnderutilized"},
		{"NodePool", "terminationGracePeriod Never", "terminationGracePeriod: 48h", "terminationGracePeriod: Never"},
		{"NodePool", "expireAfter fractional", "expireAfter: 720h", "expireAfter: 1.5h"},
		{"NodePool", "nodeClassRef name", "name: default", "name: \"\""},
		{"NodeClaim", "requirement Lt", "- spot", "- spot\n  - key: karpenter.k8s.aws/instance-cpu\n    operator: Lt\n    values: [\"1\", \"2\"]"},
		{"NodeClaim", "startup taint effect", "effect: NoExecute", "effect: Never"},
		{"EC2NodeClass", "role and instance profile", "role: KarpenterNodeRole-my-cluster", "role: r\n  instanceProfile: p"},
		{"EC2NodeClass", "no role", "role: KarpenterNodeRole-my-cluster", ""},
		{"EC2NodeClass", "no amiFamily", "amiFamily: AL2023", ""},
		{"EC2NodeClass", "amiFamily enum", "amiFamily: AL2023", "amiFamily: Ubuntu"},
		{"EC2NodeClass", "alias with other terms", "- id: ami-123", "- alias: al2023@latest"},
		{"EC2NodeClass", "alias family", "amiSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: my-cluster\n      environment: test\n  - name: my-ami\n    owner: \"123456789012\"\n  - id: ami-123\n  - ssmParameter: /aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id", "amiSelectorTerms:\n  - alias: ubuntu@latest"},
		{"EC2NodeClass", "windows alias pinned", "amiSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: my-cluster\n      environment: test\n  - name: my-ami\n    owner: \"123456789012\"\n  - id: ami-123\n  - ssmParameter: /aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id", "amiSelectorTerms:\n  - alias: windows2022@v1"},
		{"EC2NodeClass", "amiFamily mismatches alias", "amiSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: my-cluster\n      environment: test\n  - name: my-ami\n    owner: \"123456789012\"\n  - id: ami-123\n  - ssmParameter: /aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id", "amiSelectorTerms:\n  - alias: bottlerocket@latest"},
		{"EC2NodeClass", "ami id pattern", "id: ami-123", "id: image-123"},
		{"EC2NodeClass", "ami id with name", "- id: ami-123", "- id: ami-123\n    name: x"},
		{"EC2NodeClass", "subnet id pattern", "id: subnet-09fa4a0a8f233a921", "id: net-1"},
		{"EC2NodeClass", "subnet id with tags", "subnetSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: my-cluster\n      environment: test\n  - id: subnet-09fa4a0a8f233a921", "subnetSelectorTerms:\n  - id: subnet-09fa4a0a8f233a921\n    tags: {a: b}"},
		{"EC2NodeClass", "empty selector tag value", "environment: test\n  - id: subnet", "environment: \"\"\n  - id: subnet"},
		{"EC2NodeClass", "security group name with id", "securityGroupSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: my-cluster\n  - name: my-security-group\n  - id: sg-063d7acfb4b06c82c", "securityGroupSelectorTerms:\n  - name: my-security-group\n    id: sg-1"},
		{"EC2NodeClass", "restricted tag", "team: team-a", "kubernetes.io/cluster/c: owned"},
		{"EC2NodeClass", "joiner tag", "team: team-a", "joiner.io/launch-id: x"},
		{"EC2NodeClass", "reserved key", "pid: \"100\"", "gpu: \"1\""},
		{"EC2NodeClass", "reserved negative", "cpu: 200m", "cpu: -200m"},
		{"EC2NodeClass", "eviction key", "nodefs.inodesFree: 10%", "memory.free: 10%"},
		{"EC2NodeClass", "evictionSoft without grace", "      nodefs.inodesFree: 2m\n", ""},
		{"EC2NodeClass", "imageGC order", "imageGCLowThresholdPercent: 80", "imageGCLowThresholdPercent: 90"},
		{"EC2NodeClass", "maxPods", "maxPods: 20", "maxPods: -1"},
		{"EC2NodeClass", "two root volumes", "      iops: 3000\n", "      iops: 3000\n    rootVolume: true\n"},
		{"EC2NodeClass", "ebs without size", "volumeSize: 100Gi", "volumeType: gp3"},
		{"EC2NodeClass", "volume size range", "volumeSize: 100Gi", "volumeSize: 60000Gi"},
		{"EC2NodeClass", "volume type", "volumeType: io2", "volumeType: io9"},
		{"EC2NodeClass", "init rate without snapshot", "      throughput: 125", "      throughput: 125\n      volumeInitializationRate: 150"},
		{"EC2NodeClass", "init rate range", "volumeInitializationRate: 200", "volumeInitializationRate: 400"},
		{"EC2NodeClass", "hop limit", "httpPutResponseHopLimit: 1", "httpPutResponseHopLimit: 65"},
		{"EC2NodeClass", "http tokens", "httpTokens: required", "httpTokens: maybe"},
		{"EC2NodeClass", "instance store policy", "instanceStorePolicy: RAID0", "instanceStorePolicy: RAID1"},
		{"EC2NodeClass", "capacity reservation owner", "ownerID: \"123456789012\"\n  - id: cr-", "ownerID: \"12\"\n  - id: cr-"},
	}
	servers := map[string]*apiServer{}
	for kind, ex := range examples {
		servers[kind] = newAPIServer(t, ex.crd)
	}
	for _, tc := range cases {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			base := readExample(t, tc.kind)
			if strings.Count(base, tc.from) != 1 {
				t.Fatalf("%q occurs %d times in the %s example", tc.from, strings.Count(base, tc.from), tc.kind)
			}
			doc := strings.Replace(base, tc.from, tc.to, 1)
			crdErrs := servers[tc.kind].validate(t, doc)
			goErr := goValidate(t, tc.kind, doc)
			if len(crdErrs) == 0 {
				t.Errorf("the CRD accepts it (Go says: %v)", goErr)
			}
			if goErr == nil {
				t.Errorf("Go validation accepts it (the CRD says: %v)", crdErrs.ToAggregate())
			}
		})
	}
}
