package convert

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// The tests in this file pin what Karpenter's own conversion does; each
// names the source it was checked against:
//   - karpenter-convert: aws/karpenter-provider-aws v0.32.x
//     tools/karpenter-convert/pkg/convert/convert.go and
//     pkg/utils/nodeclass/nodeclass.go (AWSNodeTemplate -> v1beta1),
//     kubernetes-sigs/karpenter v0.32.x pkg/utils/nodepool/nodepool.go
//     (Provisioner -> v1beta1);
//   - the v1 webhook: kubernetes-sigs/karpenter v1.0.x
//     pkg/apis/v1/nodepool_conversion.go and nodeclaim_conversion.go,
//     aws/karpenter-provider-aws v1.0.x pkg/apis/v1/ec2nodeclass_conversion.go;
//   - the v1beta1 CRD defaults the webhook reads back: aws/karpenter-provider-aws
//     v0.32.x-v0.37.x pkg/apis/v1beta1/ec2nodeclass.go, kubernetes-sigs/karpenter
//     pkg/apis/v1beta1/nodepool.go.

// template is a v1alpha1 AWSNodeTemplate with extra spec lines.
func template(name, extra string) string {
	return "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: " + name + "}\nspec:\n" +
		"  instanceProfile: profile\n  subnetSelector: {a: b}\n  securityGroupSelector: {a: b}\n" + extra
}

// classV1beta1 is a v1beta1 EC2NodeClass with extra spec lines.
func classV1beta1(name, extra string) string {
	return "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: " + name + "}\nspec:\n" +
		"  amiFamily: AL2023\n  role: r\n  subnetSelectorTerms: [{id: subnet-1}]\n  securityGroupSelectorTerms: [{id: sg-1}]\n" + extra
}

// convertAll converts in with opts, failing the test on any document error.
func convertAll(t *testing.T, in string, opts Options) []Object {
	t.Helper()
	r := ConvertAll([]Input{{Data: []byte(in)}}, opts)
	if err := r.Err(); err != nil {
		t.Fatalf("ConvertAll: %v", err)
	}
	return r.Objects
}

// onlyClass converts in and returns its (last) EC2NodeClass.
func onlyClass(t *testing.T, in string) *awsv1.EC2NodeClass {
	t.Helper()
	var got *awsv1.EC2NodeClass
	for _, o := range convertAll(t, in, Options{}) {
		if o.EC2NodeClass != nil {
			got = o.EC2NodeClass
		}
	}
	if got == nil {
		t.Fatalf("no EC2NodeClass from:\n%s", in)
	}
	return got
}

// onlyPool converts in and returns its first NodePool.
func onlyPool(t *testing.T, in string) *karpv1.NodePool {
	t.Helper()
	for _, o := range convertAll(t, in, Options{}) {
		if o.NodePool != nil {
			return o.NodePool
		}
	}
	t.Fatalf("no NodePool from:\n%s", in)
	return nil
}

// TestMetadataOptionsLikeKarpenter: the stored values are kept; unset ones
// are the v1beta1 CRD defaults (httpPutResponseHopLimit 2), which every
// stored v1beta1 class carried and the v1 webhook copies, not v1's default
// hop limit 1 that would cut pods off IMDS.
func TestMetadataOptionsLikeKarpenter(t *testing.T) {
	type mo struct {
		endpoint, ipv6 string
		hops           int64
		tokens         string
	}
	legacyDefaults := mo{"enabled", "disabled", 2, "required"}
	tests := []struct {
		name string
		in   string
		want mo
	}{
		{"v1alpha1 stored hop limit 2 kept", template("t", "  metadataOptions: {httpEndpoint: enabled, httpProtocolIPv6: disabled, httpPutResponseHopLimit: 2, httpTokens: required}\n"), legacyDefaults},
		{"v1alpha1 hop limit 1 kept", template("t", "  metadataOptions: {httpPutResponseHopLimit: 1}\n"), mo{"enabled", "disabled", 1, "required"}},
		{"v1alpha1 other values kept", template("t", "  metadataOptions: {httpEndpoint: disabled, httpProtocolIPv6: enabled, httpPutResponseHopLimit: 5, httpTokens: optional}\n"), mo{"disabled", "enabled", 5, "optional"}},
		{"v1alpha1 without metadataOptions: v1beta1 defaults", template("t", ""), legacyDefaults},
		{"v1alpha1 partial: unset fields from v1beta1's field defaults", template("t", "  metadataOptions: {httpTokens: optional}\n"), mo{"enabled", "disabled", 2, "optional"}},
		{"inline provider without metadataOptions", provisioner("p", consolidated+"  provider: {instanceProfile: p, subnetSelector: {a: b}, securityGroupSelector: {a: b}}\n"), legacyDefaults},
		{"v1beta1 without metadataOptions: the CRD default the webhook copies", classV1beta1("c", ""), legacyDefaults},
		{"v1beta1 hop limit 3 kept", classV1beta1("c", "  metadataOptions: {httpPutResponseHopLimit: 3}\n"), mo{"enabled", "disabled", 3, "required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := onlyClass(t, tt.in).Spec.MetadataOptions
			if m == nil {
				t.Fatal("no metadataOptions written")
			}
			got := mo{*m.HTTPEndpoint, *m.HTTPProtocolIPv6, *m.HTTPPutResponseHopLimit, *m.HTTPTokens}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestUserDataByteForByte: karpenter-convert and the webhook copy userData
// as is; so does the conversion, in YAML and in JSON output.
func TestUserDataByteForByte(t *testing.T) {
	datas := []string{
		"#!/bin/bash\necho hello\n",
		"#!/bin/bash\necho no final newline",
		"two final newlines\n\n",
		"trailing blanks  \nand a tab\t\n",
		"\tleading tab\n",
		"crlf\r\nlines\r\n",
		"[settings.kubernetes]\nmax-pods = 110\n",
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript\n\necho x\n--//--\n",
		"\n",
	}
	for _, ud := range datas {
		quoted, _ := json.Marshal(ud) // a YAML double-quoted scalar
		line := "  userData: " + string(quoted) + "\n"
		for kind, in := range map[string]string{
			"v1alpha1": template("t", line),
			"v1beta1":  classV1beta1("c", line),
		} {
			for _, f := range Formats {
				r := ConvertAll([]Input{{Data: []byte(in)}}, Options{})
				out, errs := EncodeAs(r.Objects, f)
				if err := errors.Join(append(r.Errors, errs...)...); err != nil {
					t.Fatalf("%s %q: %v", kind, ud, err)
				}
				var back awsv1.EC2NodeClass
				if err := yaml.Unmarshal(out, &back); err != nil {
					t.Fatalf("%s %q %s: reading back: %v\n%s", kind, ud, f, err, out)
				}
				if back.Spec.UserData == nil || *back.Spec.UserData != ud {
					t.Errorf("%s %s: userData %q came back as %v", kind, f, ud, back.Spec.UserData)
				}
			}
		}
	}
}

// TestUserDataBlockScalars: userData written as YAML block scalars (clip,
// strip and keep) keeps the text the scalar holds, final newlines included.
func TestUserDataBlockScalars(t *testing.T) {
	tests := []struct{ block, want string }{
		{"|\n    #!/bin/bash\n    echo hi\n", "#!/bin/bash\necho hi\n"},
		{"|-\n    #!/bin/bash\n    echo hi\n", "#!/bin/bash\necho hi"},
		{"|+\n    echo hi\n\n\n", "echo hi\n\n\n"},
		{"|\n    [settings.kubernetes]\n      indented = true\n", "[settings.kubernetes]\n  indented = true\n"},
	}
	for _, tt := range tests {
		for _, f := range Formats {
			r := ConvertAll([]Input{{Data: []byte(template("t", "  userData: "+tt.block))}}, Options{})
			out, errs := EncodeAs(r.Objects, f)
			if err := errors.Join(append(r.Errors, errs...)...); err != nil {
				t.Fatalf("%q: %v", tt.block, err)
			}
			var back awsv1.EC2NodeClass
			if err := yaml.Unmarshal(out, &back); err != nil || back.Spec.UserData == nil || *back.Spec.UserData != tt.want {
				t.Errorf("%s %q: userData %v (err %v), want %q\n%s", f, tt.block, back.Spec.UserData, err, tt.want, out)
			}
		}
	}
}

// TestUbuntuLikeKarpenter: the v1 webhook turns amiFamily Ubuntu into AL2
// with the class's AMI terms, adds Ubuntu's root volume when the class has
// no block device mappings, the placeholder term when it selects no AMIs,
// and the annotation listing what it changed; karpenter-convert keeps
// Ubuntu in v1beta1, so a v1alpha1 template gets the same.
func TestUbuntuLikeKarpenter(t *testing.T) {
	root := []*awsv1.BlockDeviceMapping{ubuntuRootVolume()}
	own := "  blockDeviceMappings: [{deviceName: /dev/sda1, ebs: {volumeSize: 50Gi}}]\n"
	size := resource.MustParse("50Gi")
	ownMapping := []*awsv1.BlockDeviceMapping{{DeviceName: stringPtr("/dev/sda1"), EBS: &awsv1.BlockDevice{VolumeSize: &size}}}
	tests := []struct {
		name       string
		in         string
		terms      []awsv1.AMISelectorTerm
		bdms       []*awsv1.BlockDeviceMapping
		annotation string
	}{
		{"v1beta1 with terms, no mappings", strings.Replace(classV1beta1("u", "  amiSelectorTerms: [{id: ami-1}]\n"), "AL2023", "Ubuntu", 1),
			[]awsv1.AMISelectorTerm{{ID: "ami-1"}}, root, "amiFamily,blockDeviceMappings"},
		{"v1beta1 with terms and mappings", strings.Replace(classV1beta1("u", "  amiSelectorTerms: [{id: ami-1}]\n"+own), "AL2023", "Ubuntu", 1),
			[]awsv1.AMISelectorTerm{{ID: "ami-1"}}, ownMapping, "amiFamily"},
		{"v1beta1 without terms: placeholder, incompatible", strings.Replace(classV1beta1("u", ""), "AL2023", "Ubuntu", 1),
			[]awsv1.AMISelectorTerm{{ID: UbuntuAMIPlaceholder}}, root, "amiFamily,blockDeviceMappings,incompatible"},
		{"v1alpha1 with an amiSelector", template("u", "  amiFamily: Ubuntu\n  amiSelector: {aws::name: ubuntu-eks/*, aws::owners: \"099720109477\"}\n"),
			[]awsv1.AMISelectorTerm{{Name: "ubuntu-eks/*", Owner: "099720109477"}}, root, "amiFamily,blockDeviceMappings"},
		{"v1alpha1 with mappings", template("u", "  amiFamily: Ubuntu\n  amiSelector: {aws::ids: ami-2}\n"+own),
			[]awsv1.AMISelectorTerm{{ID: "ami-2"}}, ownMapping, "amiFamily"},
		{"inline provider cannot select AMIs: placeholder", provisioner("u", consolidated+"  provider: {amiFamily: Ubuntu, instanceProfile: p, subnetSelector: {a: b}, securityGroupSelector: {a: b}}\n"),
			[]awsv1.AMISelectorTerm{{ID: UbuntuAMIPlaceholder}}, root, "amiFamily,blockDeviceMappings,incompatible"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := onlyClass(t, tt.in)
			if nc.Spec.AMIFamily == nil || *nc.Spec.AMIFamily != awsv1.AMIFamilyAL2 {
				t.Errorf("amiFamily %v, want AL2", nc.Spec.AMIFamily)
			}
			if !reflect.DeepEqual(nc.Spec.AMISelectorTerms, tt.terms) {
				t.Errorf("terms %+v, want %+v", nc.Spec.AMISelectorTerms, tt.terms)
			}
			if !sameJSON(nc.Spec.BlockDeviceMappings, tt.bdms) {
				t.Errorf("blockDeviceMappings %s, want %s", asJSON(nc.Spec.BlockDeviceMappings), asJSON(tt.bdms))
			}
			if got := nc.Annotations[AnnotationUbuntuCompatibility]; got != tt.annotation {
				t.Errorf("annotation %q, want %q", got, tt.annotation)
			}
			if errs := ValidateObject(nc); len(errs) > 0 {
				t.Errorf("invalid v1: %v", errs)
			}
		})
	}
}

// TestAliasVersionAnnotation: a v1beta1 class carrying the v1 alias version
// (written when a pinned v1 alias was converted down) gets that alias back,
// and the annotation is dropped, as the webhook's ConvertFrom does.
func TestAliasVersionAnnotation(t *testing.T) {
	in := strings.Replace(classV1beta1("c", ""), "metadata: {name: c}", "metadata: {name: c, annotations: {"+AnnotationAliasVersion+": v20240807, team: a}}", 1)
	nc := onlyClass(t, in)
	want := []awsv1.AMISelectorTerm{{Alias: "al2023@v20240807"}}
	if !reflect.DeepEqual(nc.Spec.AMISelectorTerms, want) || nc.Spec.AMIFamily != nil {
		t.Errorf("terms %+v family %v, want %+v and no family", nc.Spec.AMISelectorTerms, nc.Spec.AMIFamily, want)
	}
	if !reflect.DeepEqual(nc.Annotations, map[string]string{"team": "a"}) {
		t.Errorf("annotations %v", nc.Annotations)
	}
}

// TestDefaultIdentity: karpenter-convert writes role $KARPENTER_NODE_ROLE
// for users to substitute; a template that relied on the global default
// instance profile gets it (with a warning) unless a default role or
// instance profile is given. A named instance profile or role is kept.
func TestDefaultIdentity(t *testing.T) {
	noProfile := strings.Replace(template("t", ""), "  instanceProfile: profile\n", "", 1)
	tests := []struct {
		name        string
		in          string
		opts        Options
		role        string
		profile     string
		wantWarning string
	}{
		{"placeholder", noProfile, Options{}, RolePlaceholder, "",
			"AWSNodeTemplate t: spec.instanceProfile is unset (v1alpha1 then used the aws.defaultInstanceProfile setting); written as role $KARPENTER_NODE_ROLE, as karpenter-convert does: substitute your node role (envsubst) or convert with --default-role or --default-instance-profile"},
		{"default role", noProfile, Options{DefaultRole: "KarpenterNodeRole-c"}, "KarpenterNodeRole-c", "",
			"AWSNodeTemplate t: spec.instanceProfile is unset (v1alpha1 then used the aws.defaultInstanceProfile setting); written as role KarpenterNodeRole-c (the default role given)"},
		{"default instance profile", noProfile, Options{DefaultInstanceProfile: "KarpenterNodeInstanceProfile-c"}, "", "KarpenterNodeInstanceProfile-c",
			"AWSNodeTemplate t: spec.instanceProfile is unset (v1alpha1 then used the aws.defaultInstanceProfile setting); written as instanceProfile KarpenterNodeInstanceProfile-c (the default instance profile given)"},
		{"inline provider", provisioner("p", consolidated+"  provider: {subnetSelector: {a: b}, securityGroupSelector: {a: b}}\n"), Options{DefaultRole: "r"}, "r", "",
			"Provisioner p: spec.provider.instanceProfile is unset (v1alpha1 then used the aws.defaultInstanceProfile setting); written as role r (the default role given)"},
		{"instance profile kept", template("t", ""), Options{DefaultRole: "r"}, "", "profile", ""},
		{"v1beta1 role kept", classV1beta1("c", ""), Options{DefaultInstanceProfile: "p"}, "r", "", ""},
		{"v1beta1 instance profile kept", strings.Replace(classV1beta1("c", ""), "role: r", "instanceProfile: ip", 1), Options{DefaultRole: "x"}, "", "ip", ""},
		{"v1beta1 with neither", strings.Replace(classV1beta1("c", ""), "  role: r\n", "", 1), Options{}, RolePlaceholder, "",
			"EC2NodeClass c: spec.role and spec.instanceProfile are unset (v1beta1 required one); written as role $KARPENTER_NODE_ROLE, as karpenter-convert does: substitute your node role (envsubst) or convert with --default-role or --default-instance-profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warnings []string
			tt.opts.Warn = func(w string) {
				if strings.Contains(w, "nstanceProfile") || strings.Contains(w, "role") {
					warnings = append(warnings, w)
				}
			}
			var nc *awsv1.EC2NodeClass
			for _, o := range convertAll(t, tt.in, tt.opts) {
				if o.EC2NodeClass != nil {
					nc = o.EC2NodeClass
				}
			}
			profile := ""
			if nc.Spec.InstanceProfile != nil {
				profile = *nc.Spec.InstanceProfile
			}
			if nc.Spec.Role != tt.role || profile != tt.profile {
				t.Errorf("role %q instanceProfile %q, want %q %q", nc.Spec.Role, profile, tt.role, tt.profile)
			}
			var want []string
			if tt.wantWarning != "" {
				want = []string{tt.wantWarning}
			}
			if !reflect.DeepEqual(warnings, want) {
				t.Errorf("warnings\n got %q\nwant %q", warnings, want)
			}
			if errs := ValidateObject(nc); len(errs) > 0 {
				t.Errorf("invalid v1: %v", errs)
			}
		})
	}
	r := ConvertAll([]Input{{Data: []byte(noProfile)}}, Options{DefaultRole: "r", DefaultInstanceProfile: "p"})
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "mutually exclusive") {
		t.Errorf("both defaults: %v", err)
	}
}

// TestDisruptionLikeKarpenter: v1alpha5 TTLs and consolidation as
// karpenter-convert maps them (consolidation wins; neither leaves the
// policy to v1beta1's default WhenUnderutilized; no ttlSecondsUntilExpired
// is Never), then v1beta1 disruption as the webhook does (WhenUnderutilized
// is WhenEmptyOrUnderutilized after 0s; WhenEmpty keeps consolidateAfter,
// Never when unset; expireAfter moves to the template).
func TestDisruptionLikeKarpenter(t *testing.T) {
	ref := "  providerRef: {name: x}\n"
	v1beta1 := func(disruption string) string {
		return "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  template: {spec: {nodeClassRef: {name: x}, requirements: []}}\n" + disruption
	}
	tests := []struct {
		name                           string
		in                             string
		policy, consolidateAfter, expy string
	}{
		{"v1alpha5 consolidation", provisioner("p", ref+"  consolidation: {enabled: true}\n"), "WhenEmptyOrUnderutilized", "0s", "Never"},
		{"v1alpha5 ttlSecondsAfterEmpty", provisioner("p", ref+"  ttlSecondsAfterEmpty: 30\n"), "WhenEmpty", "30s", "Never"},
		{"v1alpha5 ttlSecondsAfterEmpty 0 with consolidation off", provisioner("p", ref+"  consolidation: {enabled: false}\n  ttlSecondsAfterEmpty: 0\n"), "WhenEmpty", "0s", "Never"},
		{"v1alpha5 neither: v1beta1's default policy", provisioner("p", ref+"  consolidation: {enabled: false}\n"), "WhenEmptyOrUnderutilized", "0s", "Never"},
		{"v1alpha5 ttlSecondsUntilExpired", provisioner("p", ref+consolidated+"  ttlSecondsUntilExpired: 2592000\n"), "WhenEmptyOrUnderutilized", "0s", "720h"},
		{"v1beta1 without disruption: CRD defaults", v1beta1(""), "WhenEmptyOrUnderutilized", "0s", ""},
		{"v1beta1 WhenUnderutilized", v1beta1("  disruption: {consolidationPolicy: WhenUnderutilized, expireAfter: 24h}\n"), "WhenEmptyOrUnderutilized", "0s", "24h"},
		{"v1beta1 WhenUnderutilized with consolidateAfter", v1beta1("  disruption: {consolidationPolicy: WhenUnderutilized, consolidateAfter: 10m}\n"), "WhenEmptyOrUnderutilized", "0s", ""},
		{"v1beta1 WhenEmpty", v1beta1("  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 5m, expireAfter: Never}\n"), "WhenEmpty", "5m", "Never"},
		{"v1beta1 WhenEmpty without consolidateAfter", v1beta1("  disruption: {consolidationPolicy: WhenEmpty}\n"), "WhenEmpty", "Never", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := onlyPool(t, tt.in)
			d := np.Spec.Disruption
			got := []string{string(d.ConsolidationPolicy), d.ConsolidateAfter.String(), np.Spec.Template.Spec.ExpireAfter.String()}
			if want := []string{tt.policy, tt.consolidateAfter, tt.expy}; !reflect.DeepEqual(got, want) {
				t.Errorf("policy, consolidateAfter, expireAfter = %q, want %q", got, want)
			}
		})
	}
}

// TestBudgetsLikeKarpenter: the webhook copies nodes, schedule and
// duration; v1beta1 budgets had no reasons (they arrived with v1), so a
// reasons list is not a v1beta1 field and is dropped, as the API server
// pruned it.
func TestBudgetsLikeKarpenter(t *testing.T) {
	in := "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  template: {spec: {nodeClassRef: {name: x}, requirements: []}}\n" +
		"  disruption:\n    budgets:\n    - {nodes: 10%, reasons: [Empty]}\n    - {nodes: \"0\", schedule: \"0 9 * * mon-fri\", duration: 8h}\n"
	var warnings []string
	r := ConvertAll([]Input{{Data: []byte(in)}}, Options{Warn: func(w string) { warnings = append(warnings, w) }})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	got := asJSON(r.Objects[0].NodePool.Spec.Disruption.Budgets)
	if want := `[{"nodes":"10%"},{"nodes":"0","schedule":"0 9 * * mon-fri","duration":"8h"}]`; got != want {
		t.Errorf("budgets %s, want %s", got, want)
	}
	if want := []string{"NodePool a: spec.disruption.budgets[0].reasons is not a karpenter.sh/v1beta1 NodePool field; dropped"}; !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
}

// TestSelectorsLikeKarpenter: karpenter-convert's nodeclass.New splits
// comma-separated values and makes one term per combination, values of a
// later key outside the terms so far, and AMI owners outside names outside
// tags.
func TestSelectorsLikeKarpenter(t *testing.T) {
	tests := []struct {
		name string
		in   string
		got  func(*awsv1.EC2NodeClass) any
		want string
	}{
		{"subnet tag combinations", strings.Replace(template("t", ""), "subnetSelector: {a: b}", `subnetSelector: {a: "1,2", b: "x, y"}`, 1),
			func(nc *awsv1.EC2NodeClass) any { return nc.Spec.SubnetSelectorTerms },
			`[{"tags":{"a":"1","b":"x"}},{"tags":{"a":"2","b":"x"}},{"tags":{"a":"1","b":"y"}},{"tags":{"a":"2","b":"y"}}]`},
		{"security group ids", strings.Replace(template("t", ""), "securityGroupSelector: {a: b}", `securityGroupSelector: {aws-ids: "sg-1, sg-2"}`, 1),
			func(nc *awsv1.EC2NodeClass) any { return nc.Spec.SecurityGroupSelectorTerms },
			`[{"id":"sg-1"},{"id":"sg-2"}]`},
		{"ami owners outside names", template("t", "  amiFamily: AL2\n  amiSelector: {aws::name: \"n1,n2\", aws::owners: \"self,amazon\"}\n"),
			func(nc *awsv1.EC2NodeClass) any { return nc.Spec.AMISelectorTerms },
			`[{"name":"n1","owner":"self"},{"name":"n2","owner":"self"},{"name":"n1","owner":"amazon"},{"name":"n2","owner":"amazon"}]`},
		{"ami tags", template("t", "  amiFamily: Bottlerocket\n  amiSelector: {team: \"a,b\"}\n"),
			func(nc *awsv1.EC2NodeClass) any { return nc.Spec.AMISelectorTerms },
			`[{"tags":{"team":"a"}},{"tags":{"team":"b"}}]`},
		{"no amiFamily: AL2 alias", template("t", ""),
			func(nc *awsv1.EC2NodeClass) any { return []any{nc.Spec.AMIFamily, nc.Spec.AMISelectorTerms} },
			`[null,[{"alias":"al2@latest"}]]`},
		{"no amiFamily with AMIs: AL2", template("t", "  amiSelector: {aws::ids: ami-1}\n"),
			func(nc *awsv1.EC2NodeClass) any { return []any{nc.Spec.AMIFamily, nc.Spec.AMISelectorTerms} },
			`["AL2",[{"id":"ami-1"}]]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := asJSON(tt.got(onlyClass(t, tt.in))); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestIgnoreDefaults: like karpenter-convert --ignore-defaults, the
// requirements the v1alpha5 webhook defaulted are left out.
func TestIgnoreDefaults(t *testing.T) {
	in := provisioner("p", consolidated+"  providerRef: {name: x}\n  requirements: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]\n")
	for ignore, want := range map[bool]int{false: 5, true: 1} {
		var np *karpv1.NodePool
		for _, o := range convertAll(t, in, Options{IgnoreDefaults: ignore}) {
			np = o.NodePool
		}
		if got := len(np.Spec.Template.Spec.Requirements); got != want {
			t.Errorf("IgnoreDefaults %v: %d requirements, want %d", ignore, got, want)
		}
	}
}

// TestNodeClaimV1beta1: the webhook converts a NodeClaim's spec and takes
// expireAfter from the NodePool its label names (v1's default when that
// pool is not there); kubelet has no v1 NodeClaim field.
func TestNodeClaimV1beta1(t *testing.T) {
	claim := "apiVersion: karpenter.sh/v1beta1\nkind: NodeClaim\nmetadata: {name: c1, labels: {karpenter.sh/nodepool: pool}}\n" +
		"spec:\n  nodeClassRef: {name: cls}\n  requirements: [{key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 2}]\n" +
		"  resources: {requests: {cpu: 1500m}}\n  kubelet: {maxPods: 10}\nstatus: {providerID: aws:///us-east-1a/i-1}\n"
	pool := "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: pool}\nspec:\n  template: {spec: {nodeClassRef: {name: cls}, requirements: []}}\n  disruption: {expireAfter: 48h}\n"
	tests := []struct {
		name   string
		in     string
		expiry string
		warn   string
	}{
		{"with its NodePool", pool + "---\n" + claim, "48h", ""},
		{"NodePool not in the input", claim, "", "NodeClaim c1: spec.expireAfter: NodePool pool is not in the input; left to v1's default 720h (Karpenter's conversion copies the NodePool's)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warnings []string
			var nc *karpv1.NodeClaim
			for _, o := range convertAll(t, tt.in, Options{Warn: func(w string) { warnings = append(warnings, w) }}) {
				if o.NodeClaim != nil {
					nc = o.NodeClaim
				}
			}
			if nc == nil {
				t.Fatal("no NodeClaim")
			}
			if got := nc.Spec.ExpireAfter.String(); got != tt.expiry {
				t.Errorf("expireAfter %q, want %q", got, tt.expiry)
			}
			wantSpec := `{"requirements":[{"key":"karpenter.k8s.aws/instance-family","operator":"Exists","minValues":2}],"resources":{"requests":{"cpu":"1500m"}},"nodeClassRef":{"kind":"EC2NodeClass","name":"cls","group":"karpenter.k8s.aws"},"expireAfter":null}`
			spec := nc.Spec
			spec.ExpireAfter = karpv1.Duration{}
			if got := asJSON(spec); got != wantSpec {
				t.Errorf("spec %s\nwant %s", got, wantSpec)
			}
			want := []string{
				"NodeClaim c1: spec.kubelet has no v1 NodeClaim field (v1 keeps kubelet on the EC2NodeClass; the node keeps what it booted with); dropped",
				"NodeClaim c1: status is not written: applied, this NodeClaim asks for a new node; NodeClaims already in the cluster need no conversion",
			}
			if tt.warn != "" {
				want = append(want, tt.warn)
			}
			var got []string
			for _, w := range warnings {
				if strings.HasPrefix(w, "NodeClaim") {
					got = append(got, w)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("warnings\n got %q\nwant %q", got, want)
			}
			if errs := ValidateObject(nc); len(errs) > 0 {
				t.Errorf("invalid v1: %v", errs)
			}
		})
	}
}

// TestKubeletReservationsAsNumbers: v1alpha5 (and v1beta1 before v0.36)
// typed systemReserved and kubeReserved as ResourceLists, which take
// numbers; they are kept as their text.
func TestKubeletReservationsAsNumbers(t *testing.T) {
	in := provisioner("p", consolidated+"  providerRef: {name: c}\n  kubeletConfiguration: {systemReserved: {cpu: 1, memory: 100Mi}, kubeReserved: {cpu: 0.5}}\n") +
		"---\n" + nodePoolV1beta1("np", "d", "{kubeReserved: {cpu: 2}}") + "---\n" + template("c", "") + "---\n" + template("d", "")
	var got []string
	for _, o := range convertAll(t, in, Options{}) {
		if nc := o.EC2NodeClass; nc != nil {
			got = append(got, nc.Name+" "+asJSON(nc.Spec.Kubelet))
		}
	}
	want := []string{`c {"systemReserved":{"cpu":"1","memory":"100Mi"},"kubeReserved":{"cpu":"0.5"}}`, `d {"kubeReserved":{"cpu":"2"}}`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// asJSON is v as compact JSON, for comparing and showing values.
func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func sameJSON(a, b any) bool { return asJSON(a) == asJSON(b) }
