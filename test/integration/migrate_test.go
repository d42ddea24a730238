package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/migrate"
	"github.com/joiner-dev/joiner/test/harness"
	"github.com/joiner-dev/joiner/test/karpenterstate"
	"github.com/joiner-dev/joiner/test/testenv"
)

// joinerBinary builds joiner into a temporary folder, or takes
// $JOINER_TEST_BINARY.
func joinerBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("JOINER_TEST_BINARY"); bin != "" {
		return bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := harness.BuildJoiner(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runMigrateCheck runs `joiner migrate check --kubeconfig F args...` and
// returns its stdout and exit code.
func runMigrateCheck(t *testing.T, bin, kubeconfig string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"migrate", "check", "--kubeconfig", kubeconfig}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("joiner migrate check: %v\n%s", err, stderr.String())
	}
	t.Logf("joiner migrate check %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return stdout.String(), code
}

// TestMigrateCheck runs `joiner migrate check` against a real API server
// with Joiner's CRDs holding objects as Karpenter v1.14 leaves them
// (test/karpenterstate): hash annotations computed with the cluster CA the
// kubeconfig names (a CA file, as in-cluster configs and most kubeconfigs
// have it), classes with Karpenter's status, NodeClaims with their Nodes.
//
// Every verdict is checked, in the JSON and the table: a NodePool the
// CRD admits but Karpenter's runtime validation (and so Joiner) refuses (a
// requirement on karpenter.k8s.aws/ec2nodeclass) and an EC2NodeClass whose
// kubelet.clusterDNS is no IP address are rejected; the valid pools and
// class are adopted; a NodeClaim Karpenter launched on the current template
// and image is adopted; one whose image is no longer in its class's
// status.amis drifts (AMIDrift); one launched before its pool's template
// changed drifts (NodePoolDrifted); one not launched yet, one of a deleted
// pool and one without a pool get their own rows. The exit code is 3 while
// something is rejected and 0 once the rejected objects are gone.
func TestMigrateCheck(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: true})
	bin := joinerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dyn := env.Dynamic()
	ca, err := karpenterstate.CABundle(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if len(env.Config.CAData) > 0 || env.Config.CAFile == "" {
		t.Fatal("the test kubeconfig should name its CA by file (what this test checks migrate check reads)")
	}
	now := time.Now()
	const region = harness.Region

	// Classes, as Karpenter resolved and hashed them.
	newClass := func(name string, edit func(*awsv1.EC2NodeClass)) *awsv1.EC2NodeClass {
		nc := &awsv1.EC2NodeClass{TypeMeta: metav1.TypeMeta{APIVersion: awsv1.SchemeGroupVersion.String(), Kind: "EC2NodeClass"},
			ObjectMeta: metav1.ObjectMeta{Name: name}}
		nc.Spec.Role = "KarpenterNodeRole-demo"
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}}
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}}
		if edit != nil {
			edit(nc)
		}
		stored, err := karpenterstate.Create(ctx, dyn, karpenterstate.EC2NodeClassesGVR, nc)
		if err != nil {
			t.Fatal(err)
		}
		stored.Status = karpenterstate.ClassStatus(stored,
			[]awsv1.Subnet{{ID: "subnet-0sim0001", Zone: region + "a", ZoneID: "use1-az1"}, {ID: "subnet-0sim0002", Zone: region + "b", ZoneID: "use1-az2"}},
			[]awsv1.SecurityGroup{{ID: "sg-0sim0001", Name: "sim-nodes"}},
			[]awsv1.AMI{{ID: "ami-0new2023arm", Name: "al2023-arm64-r2", Requirements: karpenterstate.ImageRequirements("arm64", true)},
				{ID: "ami-0new2023x86", Name: "al2023-x86_64-r2", Requirements: karpenterstate.ImageRequirements("amd64", true)}},
			karpenterstate.InstanceProfileName("demo", region, name), now)
		if stored, err = karpenterstate.UpdateStatus(ctx, dyn, karpenterstate.EC2NodeClassesGVR, stored); err != nil {
			t.Fatal(err)
		}
		if stored, err = karpenterstate.Annotate[awsv1.EC2NodeClass](ctx, dyn, karpenterstate.EC2NodeClassesGVR, name,
			karpenterstate.ClassAnnotations(stored, ca)); err != nil {
			t.Fatal(err)
		}
		return stored
	}
	class := newClass("default", nil)
	newClass("bad-dns", func(nc *awsv1.EC2NodeClass) {
		nc.Spec.Kubelet = &awsv1.KubeletConfiguration{ClusterDNS: []string{"dns.cluster.local"}}
	})

	// Pools, hashed by Karpenter.
	newPool := func(name string, edit func(*karpv1.NodePool)) *karpv1.NodePool {
		np := &karpv1.NodePool{TypeMeta: metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool"},
			ObjectMeta: metav1.ObjectMeta{Name: name}}
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}
		np.Spec.Disruption.ConsolidateAfter = karpv1.NewDuration(30 * time.Second)
		if edit != nil {
			edit(np)
		}
		stored, err := karpenterstate.Create(ctx, dyn, karpenterstate.NodePoolsGVR, np)
		if err != nil {
			t.Fatal(err)
		}
		if stored, err = karpenterstate.Annotate[karpv1.NodePool](ctx, dyn, karpenterstate.NodePoolsGVR, name, karpenterstate.PoolAnnotations(stored)); err != nil {
			t.Fatal(err)
		}
		return stored
	}
	general := newPool("general", nil)
	changed := newPool("changed", func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"tier": "v1"} })
	removed := newPool("removed", nil) // its claim stays after the pool goes
	// Admitted by the CRD, refused by Karpenter's runtime validation: Karpenter sets that label itself.
	newPool("bad", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelNodeClass, Operator: karpv1.OpIn, Values: []string{"default"}})
	})

	// NodeClaims and Nodes as Karpenter's lifecycle left them.
	n := 0
	launch := func(np *karpv1.NodePool, name, typ, zone, image string) {
		n++
		nc := karpenterstate.NewNodeClaim(np, karpenterstate.Claim{NodePool: np.Name, InstanceType: typ, Zone: zone, CapacityType: karpv1.CapacityTypeOnDemand,
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
		nc.GenerateName, nc.Name = "", name
		stored, err := karpenterstate.Create(ctx, dyn, karpenterstate.NodeClaimsGVR, nc)
		if err != nil {
			t.Fatal(err)
		}
		if image == "" {
			return // not launched yet
		}
		it := karpenterstate.FindType(class, region, typ)
		if it == nil {
			t.Fatalf("instance type %s not in the catalogue", typ)
		}
		inst := karpenterstate.Instance{ID: "i-0karp" + strings.Repeat("0", 10) + string(rune('a'+n)), Zone: zone, ImageID: image,
			CapacityType: karpv1.CapacityTypeOnDemand}
		karpenterstate.ApplyLaunch(stored, class, it, inst, ca, now)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-" + string(rune('0'+n)) + ".ec2.internal", Labels: map[string]string{
			corev1.LabelHostname: "ip-10-0-0-" + string(rune('0'+n)) + ".ec2.internal"}},
			Spec:   corev1.NodeSpec{ProviderID: inst.ProviderID()},
			Status: corev1.NodeStatus{Capacity: it.Capacity, Allocatable: it.Allocatable()}}
		for k, v := range it.Labels {
			node.Labels[k] = v
		}
		karpenterstate.RegisterNode(stored, node)
		karpenterstate.InitializeNode(node)
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		karpenterstate.ApplyRegistered(stored, node.Name, now)
		karpenterstate.ApplyInitialized(stored, now)
		status := stored.Status
		if stored, err = karpenterstate.Update(ctx, dyn, karpenterstate.NodeClaimsGVR, stored); err != nil {
			t.Fatal(err)
		}
		stored.Status = status
		if _, err := karpenterstate.UpdateStatus(ctx, dyn, karpenterstate.NodeClaimsGVR, stored); err != nil {
			t.Fatal(err)
		}
	}
	launch(general, "general-adopt", "m5.large", region+"a", "ami-0new2023x86")
	launch(general, "general-oldami", "m5.large", region+"b", "ami-0old2023x86") // the previous release
	launch(general, "general-pending", "m5.large", region+"a", "")
	launch(changed, "changed-old", "m6g.large", region+"a", "ami-0new2023arm")
	launch(removed, "removed-left", "m5.large", region+"b", "ami-0new2023x86")
	if err := dyn.Resource(karpenterstate.NodePoolsGVR).Delete(ctx, "removed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The template changed after changed-old launched; Karpenter's hash
	// controller hashed the new one.
	changed.Spec.Template.ObjectMeta.Labels["tier"] = "v2"
	changed.Annotations = nil
	u, err := karpenterstate.Update(ctx, dyn, karpenterstate.NodePoolsGVR, changed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := karpenterstate.Annotate[karpv1.NodePool](ctx, dyn, karpenterstate.NodePoolsGVR, "changed", karpenterstate.PoolAnnotations(u)); err != nil {
		t.Fatal(err)
	}
	// A standalone NodeClaim (no pool): not Joiner's to manage.
	standalone := &karpv1.NodeClaim{TypeMeta: metav1.TypeMeta{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "standalone"},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType, Operator: karpv1.OpIn, Values: []string{"m5.large"}}}}}
	if _, err := karpenterstate.Create(ctx, dyn, karpenterstate.NodeClaimsGVR, standalone); err != nil {
		t.Fatal(err)
	}

	type verdict struct{ action, reason string }
	want := map[string]verdict{
		"NodePool/bad":              {migrate.Reject, "ValidationFailed"},
		"NodePool/changed":          {migrate.Adopt, ""},
		"NodePool/general":          {migrate.Adopt, ""},
		"EC2NodeClass/bad-dns":      {migrate.Reject, "ValidationFailed"},
		"EC2NodeClass/default":      {migrate.Adopt, ""},
		"NodeClaim/changed-old":     {migrate.Drift, "NodePoolDrifted"},
		"NodeClaim/general-adopt":   {migrate.Adopt, ""},
		"NodeClaim/general-oldami":  {migrate.Drift, "AMIDrift"},
		"NodeClaim/general-pending": {migrate.Adopt, "NotLaunched"},
		"NodeClaim/removed-left":    {migrate.Adopt, "NodePoolNotFound"},
		"NodeClaim/standalone":      {migrate.Ignore, "NoNodePool"},
	}
	check := func(out string, code, wantCode int) {
		t.Helper()
		if code != wantCode {
			t.Errorf("exit code %d, want %d", code, wantCode)
		}
		var fs []migrate.Finding
		if err := json.Unmarshal([]byte(out), &fs); err != nil {
			t.Fatalf("decoding -o json: %v\n%s", err, out)
		}
		got := map[string]verdict{}
		for _, f := range fs {
			got[f.Kind+"/"+f.Name] = verdict{f.Action, f.Reason}
			if f.Action != migrate.Adopt && f.Action != "" && f.Detail == "" {
				t.Errorf("%s %s: %s without a detail", f.Kind, f.Name, f.Action)
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %+v, want %+v", k, got[k], v)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected row %s: %+v", k, v)
			}
		}
	}
	out, code := runMigrateCheck(t, bin, env.Kubeconfig, "-o", "json")
	check(out, code, 3)

	// The table says the same, one row per object.
	table, code := runMigrateCheck(t, bin, env.Kubeconfig)
	if code != 3 {
		t.Errorf("table: exit code %d, want 3", code)
	}
	for k, v := range want {
		kind, name, _ := strings.Cut(k, "/")
		reason := v.reason
		if reason == "" {
			reason = "-"
		}
		row := regexp.MustCompile(`(?m)^` + kind + `\s+` + regexp.QuoteMeta(name) + `\s+` + v.action + `\s+` + regexp.QuoteMeta(reason) + `\s`)
		if !row.MatchString(table) {
			t.Errorf("table has no row %s %s %s %s", kind, name, v.action, reason)
		}
	}

	// Rejected objects fixed (removed): nothing is rejected, exit 0.
	if err := dyn.Resource(karpenterstate.NodePoolsGVR).Delete(ctx, "bad", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn.Resource(karpenterstate.EC2NodeClassesGVR).Delete(ctx, "bad-dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	delete(want, "NodePool/bad")
	delete(want, "EC2NodeClass/bad-dns")
	out, code = runMigrateCheck(t, bin, env.Kubeconfig, "-o", "json")
	check(out, code, 0)
}
