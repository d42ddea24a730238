package convert

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestTypeErrors: a value of the wrong type is reported as
// `<document>: <kind> <name>: <field>: <value>: <what the field takes>`,
// not as a Go decoder message, and is an ErrMalformed.
func TestTypeErrors(t *testing.T) {
	ref := "  providerRef: {name: x}\n"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"grace period as a duration (v1alpha5)", provisioner("p", ref+"  kubeletConfiguration: {evictionMaxPodGracePeriod: 3m}\n"),
			`document 1 (line 1): Provisioner p: spec.kubeletConfiguration.evictionMaxPodGracePeriod: "3m": expected an integer (seconds)`},
		{"grace period as a duration (v1beta1)", nodePoolV1beta1("np", "c", "{evictionMaxPodGracePeriod: 3m}"),
			`document 1 (line 1): NodePool np: spec.template.spec.kubelet.evictionMaxPodGracePeriod: "3m": expected an integer (seconds)`},
		{"ttl as a duration", provisioner("p", ref+"  ttlSecondsAfterEmpty: 30s\n"),
			`Provisioner p: spec.ttlSecondsAfterEmpty: "30s": expected an integer (seconds)`},
		{"weight too large", provisioner("p", ref+"  weight: 3000000000\n"),
			`Provisioner p: spec.weight: 3000000000: expected an integer between -2147483648 and 2147483647`},
		{"fraction for an integer", provisioner("p", ref+"  kubeletConfiguration: {maxPods: 1.5}\n"),
			`Provisioner p: spec.kubeletConfiguration.maxPods: 1.5: expected an integer`},
		{"unquoted boolean label", provisioner("p", ref+"  labels: {spot: true}\n"),
			`Provisioner p: spec.labels[spot]: true: expected a string (quote it: "true")`},
		{"unquoted number annotation", "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: t, annotations: {rev: 3}}\nspec: {}\n",
			`AWSNodeTemplate t: metadata.annotations[rev]: 3: expected a string (quote it: "3")`},
		{"selector as a list", strings.Replace(awsTemplate, "subnetSelector: {karpenter.sh/discovery: c}", "subnetSelector: [subnet-1]", 1),
			`AWSNodeTemplate default: spec.subnetSelector: ["subnet-1"]: expected an object (key: value lines)`},
		{"requirements as an object", provisioner("p", ref+"  requirements: {key: a}\n"),
			`Provisioner p: spec.requirements: {"key":"a"}: expected a list`},
		{"bad quantity in limits", provisioner("p", ref+"  limits: {resources: {cpu: lots}}\n"),
			`Provisioner p: spec.limits.resources[cpu]: "lots": expected a quantity such as 100Mi, 2 or 500m`},
		{"bad duration", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: np}\nspec:\n  template: {spec: {nodeClassRef: {name: c}}}\n  disruption: {expireAfter: 30 days}\n",
			`NodePool np: spec.disruption.expireAfter: "30 days": expected a duration such as 90s, 5m or 1h30m`},
		{"hop limit as text", strings.Replace(awsTemplate, "spec:\n", "spec:\n  metadataOptions: {httpPutResponseHopLimit: two}\n", 1),
			`AWSNodeTemplate default: spec.metadataOptions.httpPutResponseHopLimit: "two": expected an integer`},
		{"reservation neither string nor number", provisioner("p", ref+"  kubeletConfiguration: {kubeReserved: {cpu: [1]}}\n"),
			`Provisioner p: spec.kubeletConfiguration.kubeReserved[cpu]: [1]: expected a resource amount such as 100Mi or 1 (a string or a number)`},
		{"taint in a list of taints", provisioner("p", ref+"  taints: [{key: a, effect: [NoSchedule]}]\n"),
			`Provisioner p: spec.taints[0].effect: ["NoSchedule"]: expected a string`},
		{"boolean as text", strings.Replace(awsTemplate, "spec:\n", "spec:\n  detailedMonitoring: \"yes\"\n", 1),
			`AWSNodeTemplate default: spec.detailedMonitoring: "yes": expected true or false`},
		{"time", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: np, creationTimestamp: yesterday}\nspec: {template: {spec: {nodeClassRef: {name: c}}}}\n",
			`NodePool np: metadata.creationTimestamp: "yesterday": expected a time such as 2024-01-02T15:04:05Z`},
		{"long value cut", provisioner("p", ref+"  weight: \""+strings.Repeat("x", 100)+"\"\n"),
			`Provisioner p: spec.weight: "` + strings.Repeat("x", 59) + `...: expected an integer`},
		{"in a List item", "apiVersion: v1\nkind: List\nitems:\n- " + legacyItem + "\n- {apiVersion: karpenter.sh/v1alpha5, kind: Provisioner, metadata: {name: yy}, spec: {weight: heavy}}\n",
			`document 1 (line 1) items[1]: Provisioner yy: spec.weight: "heavy": expected an integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]byte(tt.in), nil)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want an ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n %s\ndoes not contain\n %s", err, tt.want)
			}
			var de *DocumentError
			if !errors.As(err, &de) {
				t.Errorf("%v is not a *DocumentError", err)
			}
		})
	}
}

// TestDocumentErrorsDoNotStopOthers: every document that converts is in
// the result; each one that does not is reported once, with its position,
// kind and name, and nothing of it is in the result.
func TestDocumentErrorsDoNotStopOthers(t *testing.T) {
	good := template("good", "")
	badType := provisioner("bad-type", "  providerRef: {name: good}\n  kubeletConfiguration: {evictionMaxPodGracePeriod: 3m}\n")
	inline := provisioner("inline", consolidated+"  provider: {instanceProfile: p, launchTemplate: lt}\n")
	configMap := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}\n"
	tests := []struct {
		name   string
		inputs []Input
		want   []string // output documents: kind and name
		errs   []string
	}{
		{
			name: "bad documents among good ones",
			inputs: []Input{{Name: "a.yaml", Data: []byte(good + "---\n" + badType + "---\n" + configMap + "---\nkind: [\n---\n" +
				nodePoolV1beta1("pool", "good", "{maxPods: 5}"))}},
			want: []string{"EC2NodeClass good", "ConfigMap keep", "NodePool pool"},
			errs: []string{
				`a.yaml: document 2 (line 9): Provisioner bad-type: spec.kubeletConfiguration.evictionMaxPodGracePeriod: "3m": expected an integer (seconds)`,
				"a.yaml: document 4 (line 21): malformed manifest: yaml: line 21: did not find expected node content",
			},
		},
		{
			name:   "an inline provider that fails takes its NodePool with it",
			inputs: []Input{{Name: "a.yaml", Data: []byte(inline + "---\n" + configMap)}},
			want:   []string{"ConfigMap keep"},
			errs:   []string{`a.yaml: document 1 (line 1): Provisioner inline: spec.provider.launchTemplate: "lt": not convertible`},
		},
		{
			name: "an input that is not UTF-8 is left out whole, the others convert",
			inputs: []Input{
				{Name: "a.yaml", Data: []byte(good)},
				{Name: "b.yaml", Data: []byte(configMap + "# caf\xe9\n")},
				{Name: "c.yaml", Data: []byte(configMap)},
			},
			want: []string{"EC2NodeClass good", "ConfigMap keep"},
			errs: []string{"b.yaml: malformed manifest: byte 0xe9 at offset 59 (line 4, column 6, in document 1 (line 1)) is not UTF-8; nothing of this input is converted"},
		},
		{
			name: "only the pool whose kubelet differs fails",
			inputs: []Input{{Name: "a.yaml", Data: []byte(nodePoolV1beta1("a", "good", "{maxPods: 5}") + "---\n" + nodePoolV1beta1("b", "good", "{maxPods: 6}") +
				"---\n" + nodePoolV1beta1("c", "good", "{maxPods: 5}") + "---\n" + good)}},
			want: []string{"NodePool a", "NodePool c", "EC2NodeClass good"},
			errs: []string{"a.yaml: document 2 (line 12): NodePool b: conflicting manifests: spec.template.spec.kubelet gives EC2NodeClass good other kubelet settings than NodePool a spec.template.spec.kubelet"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ConvertAll(tt.inputs, Options{})
			var got []string
			for _, o := range r.Objects {
				if obj, kind, name := o.converted(); obj != nil {
					got = append(got, kind+" "+name)
					continue
				}
				tm, _ := rawTypeMeta(o.Raw)
				got = append(got, tm.what())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("output %q, want %q", got, tt.want)
			}
			if len(r.Errors) != len(tt.errs) {
				t.Fatalf("errors %q, want %d", r.Errors, len(tt.errs))
			}
			for i, e := range r.Errors {
				if !strings.HasPrefix(e.Error(), tt.errs[i]) {
					t.Errorf("error %d:\n %s\nwant prefix\n %s", i, e, tt.errs[i])
				}
			}
			if _, errs := EncodeAs(r.Objects, FormatYAML); len(errs) > 0 {
				t.Errorf("encoding what converted: %v", errs)
			}
		})
	}
}

// TestValidateAll: objects of a document with an invalid converted object
// are held back; each invalid field is one error naming the document and
// the object.
func TestValidateAll(t *testing.T) {
	noSubnets := strings.Replace(template("t", ""), "  subnetSelector: {a: b}\n", "", 1)
	in := noSubnets + "---\n" + template("ok", "")
	objs, err := ConvertInputs([]Input{{Name: "f.yaml", Data: []byte(in)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	valid, errs := ValidateAll(objs)
	if len(valid) != 1 || valid[0].EC2NodeClass.Name != "ok" {
		t.Errorf("valid objects %+v, want only EC2NodeClass ok", valid)
	}
	// the wording after the field is api/aws/v1's
	want := "f.yaml: document 1 (line 1): AWSNodeTemplate t: converted EC2NodeClass t: spec.subnetSelectorTerms: "
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
		t.Fatalf("errors %q, want one starting %q", errs, want)
	}
	var ve *invalidError
	if !errors.As(errs[0], &ve) {
		t.Errorf("%v is not an invalid field", errs[0])
	}
}
