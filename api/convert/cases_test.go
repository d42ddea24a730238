package convert

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

const awsTemplate = `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  instanceProfile: profile
  subnetSelector: {karpenter.sh/discovery: c}
  securityGroupSelector: {karpenter.sh/discovery: c}
`

func provisioner(name, spec string) string {
	return "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: " + name + "\nspec:\n" + spec
}

func nodePoolV1beta1(name, class, kubelet string) string {
	s := "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata:\n  name: " + name +
		"\nspec:\n  template:\n    spec:\n      nodeClassRef: {name: " + class + "}\n      requirements: []\n"
	if kubelet != "" {
		s += "      kubelet: " + kubelet + "\n"
	}
	return s
}

// consolidated keeps the consolidation warning out of tests about
// something else.
const consolidated = "  consolidation: {enabled: true}\n"

// TestWarnings asserts the exact warnings for dropped and moved fields.
func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "containerRuntime dropped, kubelet moved",
			in: provisioner("default", consolidated+"  providerRef: {name: default}\n  kubeletConfiguration: {containerRuntime: dockerd, maxPods: 10}\n") +
				"---\n" + awsTemplate,
			want: []string{
				"Provisioner default: spec.kubeletConfiguration.containerRuntime has no v1 equivalent (containerd is the only runtime); dropped",
				"Provisioner default: spec.kubeletConfiguration moved to EC2NodeClass default spec.kubelet (v1 keeps kubelet on the node class)",
			},
		},
		{
			name: "containerRuntime alone leaves no kubelet block",
			in:   provisioner("default", consolidated+"  providerRef: {name: default}\n  kubeletConfiguration: {containerRuntime: containerd}\n") + "---\n" + awsTemplate,
			want: []string{
				"Provisioner default: spec.kubeletConfiguration.containerRuntime has no v1 equivalent (containerd is the only runtime); dropped",
			},
		},
		{
			name: "unknown fields anywhere",
			in: provisioner("p", consolidated+"  providerRef: {name: default, extra: 1}\n  bogus: {a: 1}\n  requirements:\n  - {key: a, operator: In, values: [b], typo: 1}\n") +
				"---\n" + strings.Replace(awsTemplate, "spec:\n", "spec:\n  launchTemplateName: lt\n", 1),
			want: []string{
				"Provisioner p: spec.bogus is not a karpenter.sh/v1alpha5 Provisioner field; dropped",
				"Provisioner p: spec.providerRef.extra is not a karpenter.sh/v1alpha5 Provisioner field; dropped",
				"Provisioner p: spec.requirements[0].typo is not a karpenter.sh/v1alpha5 Provisioner field; dropped",
				"AWSNodeTemplate default: spec.launchTemplateName is not a karpenter.k8s.aws/v1alpha1 AWSNodeTemplate field; dropped",
			},
		},
		{
			name: "consolidation wins over ttlSecondsAfterEmpty",
			in:   provisioner("p", "  providerRef: {name: default}\n  consolidation: {enabled: true}\n  ttlSecondsAfterEmpty: 30\n") + "---\n" + awsTemplate,
			want: []string{
				"Provisioner p: spec.ttlSecondsAfterEmpty conflicts with spec.consolidation.enabled (v1alpha5 rejected both); dropped in favour of consolidation",
			},
		},
		{
			name: "kubelet for a class not in the input",
			in:   nodePoolV1beta1("np", "elsewhere", "{maxPods: 20}"),
			want: []string{
				`NodePool np: spec.template.spec.kubelet cannot move: EC2NodeClass elsewhere is not in the input; dropped, add spec.kubelet {"maxPods":20} to it by hand`,
			},
		},
		{
			name: "kubelet for a class that is already v1",
			in: nodePoolV1beta1("np", "v1class", "{maxPods: 20}") +
				"---\napiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: v1class}\nspec: {}\n",
			want: []string{
				`NodePool np: spec.template.spec.kubelet cannot move: EC2NodeClass v1class is already v1 and passed through unchanged; dropped, add spec.kubelet {"maxPods":20} to it by hand`,
			},
		},
		{
			name: "other Karpenter versions pass through with a warning",
			in:   "apiVersion: karpenter.sh/v1alpha5\nkind: Machine\nmetadata: {name: m}\nspec: {}\n",
			want: []string{
				"Machine m: karpenter.sh/v1alpha5 Machine is not converted (no v1 manifest equivalent); passed through unchanged",
			},
		},
		{
			name: "nothing to say for v1 and foreign documents",
			in:   "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: y}\n",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			if _, err := Convert([]byte(tt.in), func(w string) { got = append(got, w) }); err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("warnings:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestErrors asserts that bad input fails with an error naming the
// document, the object, the field and its value.
func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		is   error
		want string
	}{
		{"malformed yaml", "apiVersion: v1\nkind: ConfigMap\n---\n\na: [1,\n", ErrMalformed,
			"document 2 (line 4): malformed manifest: yaml: line 5: did not find expected node content"},
		{"duplicate key", "a: 1\n---\nb: 1\nb: 2\n", ErrMalformed,
			`document 2 (line 3): malformed manifest: yaml: unmarshal errors: line 4: key "b" already set in map`},
		{"wrong field type", provisioner("p", "  weight: ten\n  providerRef: {name: x}\n"), ErrMalformed,
			`document 1 (line 1): Provisioner p: spec.weight: "ten": expected an integer`},
		{"no name", "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nspec: {}\n", ErrMalformed,
			"document 1 (line 1): Provisioner: malformed manifest: metadata.name is required"},
		{"provider and providerRef", provisioner("p", "  providerRef: {name: x}\n  provider: {instanceProfile: prof}\n"), nil,
			"document 1 (line 1): Provisioner p: spec.provider and spec.providerRef are both set; v1alpha5 allowed only one"},
		{"no node class", provisioner("p", "  weight: 1\n"), nil,
			"document 1 (line 1): Provisioner p: neither spec.provider nor spec.providerRef is set"},
		{"bad grace period", provisioner("p", "  providerRef: {name: x}\n  kubeletConfiguration: {evictionSoftGracePeriod: {memory.available: soon}}\n"), nil,
			`Provisioner p: spec.kubeletConfiguration.evictionSoftGracePeriod[memory.available]: "soon": expected a duration such as 90s, 5m or 1h30m`},
		{"negative ttl", provisioner("p", "  providerRef: {name: x}\n  ttlSecondsAfterEmpty: -1\n"), nil,
			"Provisioner p: spec.ttlSecondsAfterEmpty: -1: must be >= 0"},
		{"custom without amis", strings.Replace(awsTemplate, "spec:\n", "spec:\n  amiFamily: Custom\n", 1), nil,
			"AWSNodeTemplate default: spec.amiFamily: Custom: requires AMI selector terms (spec.amiSelector is empty)"},
		{"inline custom", provisioner("p", "  provider: {amiFamily: Custom, instanceProfile: prof}\n"), nil,
			"Provisioner p: spec.provider.amiFamily: Custom: requires AMI selector terms (an inline provider cannot select AMIs: use an AWSNodeTemplate with spec.amiSelector)"},
		{"unknown special key", strings.Replace(awsTemplate, "subnetSelector: {karpenter.sh/discovery: c}", "subnetSelector: {aws::name: x}", 1), nil,
			"AWSNodeTemplate default: spec.subnetSelector[aws::name]: unknown special key"},
		{"owners alone", strings.Replace(awsTemplate, "spec:\n", "spec:\n  amiSelector: {aws::owners: amazon}\n", 1), nil,
			"AWSNodeTemplate default: spec.amiSelector: aws::owners without aws::name or tags"},
		// karpenter-convert (tools/karpenter-convert/pkg/convert/convert.go
		// convertNodeTemplate): cannot convert with "spec.launchTemplate".
		{"launchTemplate", strings.Replace(awsTemplate, "spec:\n", "spec:\n  launchTemplate: my-lt\n", 1), ErrUnsupported,
			`document 1 (line 1): AWSNodeTemplate default: spec.launchTemplate: "my-lt": not convertible: v1 builds its own launch template`},
		{"inline launchTemplate", provisioner("p", "  provider: {instanceProfile: prof, launchTemplate: lt}\n"), ErrUnsupported,
			`Provisioner p: spec.provider.launchTemplate: "lt": not convertible`},
		{"conflicting kubelets", nodePoolV1beta1("a", "shared", "{maxPods: 10}") + "---\n" + nodePoolV1beta1("b", "shared", "{maxPods: 20}") +
			"---\napiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: shared}\nspec: {role: r}\n",
			ErrConflict, "document 2 (line 12): NodePool b: conflicting manifests: spec.template.spec.kubelet gives EC2NodeClass shared other kubelet settings than NodePool a spec.template.spec.kubelet; v1 keeps kubelet on the EC2NodeClass, so point this pool at a class of its own and convert again"},
		{"class produced twice", provisioner("default", "  provider: {instanceProfile: prof, subnetSelector: {a: b}, securityGroupSelector: {a: b}}\n") + "---\n" + awsTemplate,
			ErrConflict, "document 2 (line 8): AWSNodeTemplate default: conflicting manifests: EC2NodeClass default is produced twice (first from document 1 (line 1) (Provisioner default))"},
		{"pool produced twice", nodePoolV1beta1("a", "x", "") + "---\n" + nodePoolV1beta1("a", "x", ""), ErrConflict,
			"document 2 (line 11): NodePool a: conflicting manifests: NodePool a is produced twice"},
		{"bad policy", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  template: {spec: {nodeClassRef: {name: x}}}\n  disruption: {consolidationPolicy: Sometimes}\n", nil,
			`NodePool a: spec.disruption.consolidationPolicy: "Sometimes": expected WhenEmpty or WhenUnderutilized`},
		{"no nodeClassRef", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec: {template: {spec: {}}}\n", nil,
			"NodePool a: spec.template.spec.nodeClassRef.name is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]byte(tt.in), nil)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n %s\ndoes not contain\n %s", err, tt.want)
			}
		})
	}
}

// TestPassThrough asserts non-Karpenter documents come out byte-identical.
func TestPassThrough(t *testing.T) {
	docs := []string{
		"# only a comment\n",
		"apiVersion: v1\nkind: ConfigMap   # trailing comment\nmetadata:\n  name: x\ndata:\n  a: |\n    keep   spacing\n\n",
		"- a list\n- not an object\n",
		"just a scalar\n",
		"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: y}\nspec:   {weight: 5}\n",
		"apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata:\n    name: z\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: n}\n",
		"kind: 7\napiVersion: [x]\n",
	}
	in := "---\n" + strings.Join(docs, "---\n") + "---\n\n"
	var warned []string
	out, err := Convert([]byte(in), func(w string) { warned = append(warned, w) })
	if err != nil {
		t.Fatal(err)
	}
	got := splitDocuments(out)
	if len(got) != len(docs) {
		t.Fatalf("got %d documents, want %d:\n%s", len(got), len(docs), out)
	}
	for i, d := range got {
		if !bytes.Equal(d.raw, []byte(docs[i])) {
			t.Errorf("document %d changed:\n got %q\nwant %q", i+1, d.raw, docs[i])
		}
	}
	if len(warned) != 0 {
		t.Errorf("unexpected warnings %q", warned)
	}

	// Mixed with legacy documents: the foreign ones keep their bytes.
	mixed := docs[1] + "---\n" + provisioner("p", "  providerRef: {name: default}\n") + "---\n" + docs[5]
	out, err = Convert([]byte(mixed), nil)
	if err != nil {
		t.Fatal(err)
	}
	got = splitDocuments(out)
	if len(got) != 3 || string(got[0].raw) != docs[1] || string(got[2].raw) != docs[5] {
		t.Errorf("foreign documents changed around a converted one:\n%s", out)
	}
	if !strings.HasPrefix(string(got[1].raw), "apiVersion: karpenter.sh/v1\nkind: NodePool\n") {
		t.Errorf("middle document not converted:\n%s", got[1].raw)
	}
}

func TestEmptyInput(t *testing.T) {
	for _, in := range []string{"", "\n", "---\n", "---\n---\n   \n"} {
		out, err := Convert([]byte(in), nil)
		if err != nil || len(out) != 0 {
			t.Errorf("Convert(%q) = %q, %v; want empty", in, out, err)
		}
	}
}

func TestSeconds(t *testing.T) {
	for n, want := range map[int64]string{0: "0s", 30: "30s", 90: "90s", 120: "2m", 3600: "1h", 2592000: "720h", 3601: "3601s"} {
		if got := seconds(n).String(); got != want {
			t.Errorf("seconds(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestSplitDocuments(t *testing.T) {
	in := "a: 1\n--- # c\nb: 2\n---\n\n...\n---x: 3\n"
	got := splitDocuments([]byte(in))
	want := []document{{1, 1, []byte("a: 1\n")}, {2, 3, []byte("b: 2\n")}, {3, 7, []byte("---x: 3\n")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestV1alpha5Defaults(t *testing.T) {
	keys := func(rs []karpv1.NodeSelectorRequirementWithMinValues) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Key+" "+string(r.Operator)+" "+strings.Join(r.Values, ","))
		}
		return out
	}
	tests := []struct {
		has  []string
		want []string
	}{
		{nil, []string{"kubernetes.io/os In linux", "kubernetes.io/arch In amd64", "karpenter.sh/capacity-type In on-demand",
			"karpenter.k8s.aws/instance-category In c,m,r", "karpenter.k8s.aws/instance-generation Gt 2"}},
		{[]string{"kubernetes.io/os", "kubernetes.io/arch", "karpenter.sh/capacity-type", "node.kubernetes.io/instance-type"}, nil},
		{[]string{"kubernetes.io/os", "kubernetes.io/arch", "karpenter.sh/capacity-type", "karpenter.k8s.aws/instance-family"}, nil},
		{[]string{"kubernetes.io/os", "kubernetes.io/arch", "karpenter.sh/capacity-type", "karpenter.k8s.aws/instance-generation"}, nil},
		{[]string{"kubernetes.io/os", "kubernetes.io/arch", "karpenter.k8s.aws/instance-category"}, []string{"karpenter.sh/capacity-type In on-demand"}},
	}
	for _, tt := range tests {
		has := map[string]bool{}
		for _, k := range tt.has {
			has[k] = true
		}
		if got := keys(v1alpha5Defaults(has)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("has %v: got %q, want %q", tt.has, got, tt.want)
		}
	}
}

// TestValidateCatchesInvalidOutput shows the golden tests' validation can
// fail: a template without subnets converts, but not to valid v1.
func TestValidateCatchesInvalidOutput(t *testing.T) {
	in := strings.Replace(awsTemplate, "  subnetSelector: {karpenter.sh/discovery: c}\n", "", 1)
	objs, err := ConvertDocuments([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := Validate(objs)
	// the wording after the field is api/aws/v1's
	want := "EC2NodeClass default from document 1 (line 1) (AWSNodeTemplate default): spec.subnetSelectorTerms: "
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
		t.Errorf("got %q, want one starting %q", errs, want)
	}
	if errs := Validate([]Object{{Raw: []byte("anything: at all\n")}}); errs != nil {
		t.Errorf("passed-through documents are not validated, got %v", errs)
	}
}
