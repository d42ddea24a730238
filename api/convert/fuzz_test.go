package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// FuzzConvert feeds arbitrary streams to Convert: it must not panic; it
// accepts only UTF-8; when it succeeds, it is deterministic and idempotent
// (its output, all v1 or foreign, converts to itself). Findings are kept
// in testdata/fuzz/FuzzConvert and as cases of TestBadInput and
// TestOutputConvertsToItself.
func FuzzConvert(f *testing.F) {
	ins, _ := filepath.Glob("testdata/*.in.yaml")
	for _, in := range ins {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(provisioner("p", "  providerRef: {name: default}\n  kubeletConfiguration: {containerRuntime: x, evictionSoftGracePeriod: {a: 1m}}\n") + "---\n" + awsTemplate))
	f.Add([]byte(nodePoolV1beta1("a", "s", "{maxPods: 1}") + "---\n" + nodePoolV1beta1("b", "s", "{maxPods: 2}")))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: karpenter.sh/v1alpha5, kind: Provisioner, metadata: {name: x}, spec: {provider: {}}}]\n"))
	f.Add([]byte("--- # c\n...\n---\na: &x [*x]\n"))
	f.Add([]byte("apiVersion: karpenter.sh/v1beta1\nkind: NodeClaim\nmetadata: {name: c, labels: {karpenter.sh/nodepool: p}}\nspec: {nodeClassRef: {name: x}}\n---\n" + nodePoolV1beta1("p", "x", "")))
	f.Add([]byte("apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: u}\nspec: {amiFamily: Ubuntu, subnetSelectorTerms: [{id: subnet-1}], securityGroupSelectorTerms: [{id: sg-1}]}\n"))
	f.Add([]byte(provisioner("p", "  providerRef: {name: x}\n  weight: ten\n  kubeletConfiguration: {evictionMaxPodGracePeriod: 3m, kubeReserved: {cpu: 1}}\n")))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Convert(in, nil)
		if err != nil {
			return
		}
		if !utf8.Valid(in) {
			t.Fatalf("input that is not UTF-8 accepted:\n%q", in)
		}
		again, err := Convert(in, nil)
		if err != nil || !bytes.Equal(out, again) {
			t.Fatalf("not deterministic (err %v)", err)
		}
		twice, err := Convert(out, nil)
		if err != nil {
			t.Fatalf("converting the output failed: %v\noutput:\n%s", err, out)
		}
		if !bytes.Equal(out, twice) {
			t.Fatalf("not idempotent:\n--- once\n%s\n--- twice\n%s", out, twice)
		}
	})
}
