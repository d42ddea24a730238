package userdata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/userdata/mime"
)

// This file ports the user data cases of Karpenter v1.14.1's
// pkg/providers/launchtemplate/suite_test.go (the "User Data" context and
// the do-not-sync-taints label cases). Karpenter provisions a pod and reads
// the user data of the launch templates it created; here the same
// EC2NodeClass and NodePool go through FromNodePool and Render, on a stock
// EKS image (no Joiner hook: Karpenter's exact shape). Karpenter's test
// cluster: name test-cluster, endpoint https://test-cluster, kube-dns
// 10.0.100.10, service CIDR 10.100.0.0/16; its default class is AL2023 and
// its NodePool carries the label testing/cluster=unspecified.

// kClass is Karpenter's test EC2NodeClass with the alias and kubelet
// block given.
func kClass(alias string, k *awsv1.KubeletConfiguration) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "default"
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias}}
	nc.Spec.Kubelet = k
	return nc
}

// kPool is Karpenter's test NodePool (on-demand).
func kPool() *karpv1.NodePool {
	np := &karpv1.NodePool{}
	np.Name = "default"
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"testing/cluster": "unspecified"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
	}
	return np
}

// kRender renders the user data of a node of np with nc in Karpenter's
// test cluster, on an m5.xlarge (58 ENI-limited pods, 4 vCPUs).
func kRender(t *testing.T, nc *awsv1.EC2NodeClass, np *karpv1.NodePool, dnsIP string) ([]byte, error) {
	t.Helper()
	if dnsIP == "" {
		dnsIP = "10.0.100.10"
	}
	in := FromNodePool(nc, np, BuildOptions{InstanceMaxPods: 58, VCPU: 4, Cluster: Cluster{
		Name: "test-cluster", Endpoint: "https://test-cluster", CABundle: "Y2EtYnVuZGxlCg==", ServiceCIDR: "10.100.0.0/16", DNSIP: dnsIP}})
	return Render(in)
}

// nodeConfigKubelet is the kubelet block of the NodeConfig Joiner wrote
// (the last application/node.eks.aws part), its config fields as JSON.
func nodeConfigKubelet(t *testing.T, out []byte) (config map[string]json.RawMessage, flags []string, strategy string) {
	t.Helper()
	parts, err := mime.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	for _, p := range parts {
		if p.MediaType() == mime.ContentTypeNodeadm {
			body = p.Body
		}
	}
	if body == nil {
		t.Fatalf("no NodeConfig part in\n%s", out)
	}
	var doc struct {
		Spec struct {
			Instance struct {
				LocalStorage struct {
					Strategy string `json:"strategy"`
				} `json:"localStorage"`
			} `json:"instance"`
			Kubelet struct {
				Config map[string]json.RawMessage `json:"config"`
				Flags  []string                   `json:"flags"`
			} `json:"kubelet"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Spec.Kubelet.Config, doc.Spec.Kubelet.Flags, doc.Spec.Instance.LocalStorage.Strategy
}

// bottlerocketKubernetes is settings.kubernetes of rendered Bottlerocket
// TOML.
func bottlerocketKubernetes(t *testing.T, out []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := toml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	settings, _ := doc["settings"].(map[string]any)
	k8s, _ := settings["kubernetes"].(map[string]any)
	if k8s == nil {
		t.Fatalf("no settings.kubernetes in\n%s", out)
	}
	return k8s
}

// asJSON is v as compact JSON, to compare decoded values whatever their Go
// types.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

var (
	reserved = map[string]string{"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"}
	thresh   = map[string]string{"memory.available": "10%", "nodefs.available": "15%", "nodefs.inodesFree": "5%"}
	graces   = map[string]karpv1.Duration{"memory.available": dur("1m"), "nodefs.available": dur("180s"), "nodefs.inodesFree": dur("5m")}
)

// TestAL2023KubeletAsKarpenter: the AL2023 kubelet configuration cases
// (Karpenter's "User Data" It cases on its default AL2023 class and the
// AL2023 "should specify KubletConfiguration field when specified in
// NodePool" table). Each wants one kubelet config field of the NodeConfig
// as JSON.
func TestAL2023KubeletAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		karpenter string
		kubelet   *awsv1.KubeletConfiguration
		dnsIP     string
		want      map[string]string // config field -> JSON
	}{
		{karpenter: "should specify systemReserved when overriding system reserved values",
			kubelet: &awsv1.KubeletConfiguration{SystemReserved: reserved},
			want:    map[string]string{"systemReserved": `{"cpu":"500m","ephemeral-storage":"2Gi","memory":"1Gi"}`}},
		{karpenter: "should specify kubeReserved when overriding system reserved values",
			kubelet: &awsv1.KubeletConfiguration{KubeReserved: reserved},
			want:    map[string]string{"kubeReserved": `{"cpu":"500m","ephemeral-storage":"2Gi","memory":"1Gi"}`}},
		{karpenter: "should pass evictionHard threshold values when specified",
			kubelet: &awsv1.KubeletConfiguration{EvictionHard: thresh},
			want:    map[string]string{"evictionHard": `{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`}},
		{karpenter: "should pass evictionSoft threshold values when specified",
			kubelet: &awsv1.KubeletConfiguration{EvictionSoft: thresh, EvictionSoftGracePeriod: graces},
			want:    map[string]string{"evictionSoft": `{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`}},
		{karpenter: "should pass evictionSoftGracePeriod values when specified",
			kubelet: &awsv1.KubeletConfiguration{EvictionSoft: thresh, EvictionSoftGracePeriod: graces},
			want:    map[string]string{"evictionSoftGracePeriod": `{"memory.available":"1m0s","nodefs.available":"3m0s","nodefs.inodesFree":"5m0s"}`}},
		{karpenter: "should pass evictionMaxPodGracePeriod when specified",
			kubelet: &awsv1.KubeletConfiguration{EvictionMaxPodGracePeriod: ptr(int32(300))},
			want:    map[string]string{"evictionMaxPodGracePeriod": `300`}},
		{karpenter: "should specify podsPerCore",
			kubelet: &awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(2))},
			want:    map[string]string{"podsPerCore": `2`}},
		{karpenter: "should specify podsPerCore with maxPods enabled",
			kubelet: &awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(2)), MaxPods: ptr(int32(100))},
			want:    map[string]string{"podsPerCore": `2`, "maxPods": `100`}},
		{karpenter: "should specify clusterDNS when running in an ipv6 cluster", dnsIP: "fd4b:121b:812b::a",
			want: map[string]string{"clusterDNS": `["fd4b:121b:812b::a"]`}},
		{karpenter: "should specify clusterDNS when running in an ipv4 cluster",
			want: map[string]string{"clusterDNS": `["10.0.100.10"]`}},
		{karpenter: "should pass ImageGCHighThresholdPercent when specified",
			kubelet: &awsv1.KubeletConfiguration{ImageGCHighThresholdPercent: ptr(int32(50))},
			want:    map[string]string{"imageGCHighThresholdPercent": `50`}},
		{karpenter: "should pass ImageGCLowThresholdPercent when specified",
			kubelet: &awsv1.KubeletConfiguration{ImageGCLowThresholdPercent: ptr(int32(50))},
			want:    map[string]string{"imageGCLowThresholdPercent": `50`}},
		{karpenter: "should pass cpuCFSQuota when specified",
			kubelet: &awsv1.KubeletConfiguration{CPUCFSQuota: ptr(false)},
			want:    map[string]string{"cpuCFSQuota": `false`}},
		// AL2023 "should specify KubletConfiguration field when specified in NodePool" entries.
		{karpenter: "AL2023 KubeletConfiguration field: systemReserved", kubelet: &awsv1.KubeletConfiguration{SystemReserved: reserved},
			want: map[string]string{"systemReserved": `{"cpu":"500m","ephemeral-storage":"2Gi","memory":"1Gi"}`}},
		{karpenter: "AL2023 KubeletConfiguration field: kubeReserved", kubelet: &awsv1.KubeletConfiguration{KubeReserved: reserved},
			want: map[string]string{"kubeReserved": `{"cpu":"500m","ephemeral-storage":"2Gi","memory":"1Gi"}`}},
		{karpenter: "AL2023 KubeletConfiguration field: evictionHard", kubelet: &awsv1.KubeletConfiguration{EvictionHard: thresh},
			want: map[string]string{"evictionHard": `{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`}},
		{karpenter: "AL2023 KubeletConfiguration field: evictionSoft", kubelet: &awsv1.KubeletConfiguration{EvictionSoft: thresh, EvictionSoftGracePeriod: graces},
			want: map[string]string{"evictionSoft": `{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`}},
		{karpenter: "AL2023 KubeletConfiguration field: evictionSoftGracePeriod", kubelet: &awsv1.KubeletConfiguration{EvictionSoft: thresh, EvictionSoftGracePeriod: graces},
			want: map[string]string{"evictionSoftGracePeriod": `{"memory.available":"1m0s","nodefs.available":"3m0s","nodefs.inodesFree":"5m0s"}`}},
		{karpenter: "AL2023 KubeletConfiguration field: evictionMaxPodGracePeriod", kubelet: &awsv1.KubeletConfiguration{EvictionMaxPodGracePeriod: ptr(int32(300))},
			want: map[string]string{"evictionMaxPodGracePeriod": `300`}},
		{karpenter: "AL2023 KubeletConfiguration field: podsPerCore", kubelet: &awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(2))},
			want: map[string]string{"podsPerCore": `2`}},
		{karpenter: "AL2023 KubeletConfiguration field: clusterDNS", kubelet: &awsv1.KubeletConfiguration{ClusterDNS: []string{"10.0.100.0"}},
			want: map[string]string{"clusterDNS": `["10.0.100.0"]`}},
		{karpenter: "AL2023 KubeletConfiguration field: imageGCHighThresholdPercent", kubelet: &awsv1.KubeletConfiguration{ImageGCHighThresholdPercent: ptr(int32(50))},
			want: map[string]string{"imageGCHighThresholdPercent": `50`}},
		{karpenter: "AL2023 KubeletConfiguration field: imageGCLowThresholdPercent", kubelet: &awsv1.KubeletConfiguration{ImageGCLowThresholdPercent: ptr(int32(50))},
			want: map[string]string{"imageGCLowThresholdPercent": `50`}},
		{karpenter: "AL2023 KubeletConfiguration field: cpuCFSQuota", kubelet: &awsv1.KubeletConfiguration{CPUCFSQuota: ptr(false)},
			want: map[string]string{"cpuCFSQuota": `false`}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			out, err := kRender(t, kClass("al2023@latest", tc.kubelet), kPool(), tc.dnsIP)
			if err != nil {
				t.Fatal(err)
			}
			config, _, _ := nodeConfigKubelet(t, out)
			for field, want := range tc.want {
				if got := asJSON(t, config[field]); got != want {
					t.Errorf("kubelet.config.%s = %s, want %s", field, got, want)
				}
			}
		})
	}
}

// TestUserDataLabelsTaintsAsKarpenter: taints and labels reach the kubelet
// (AL2023 "Kubelet" context, Bottlerocket label cases), labels in
// restricted domains do not ("should not pass any labels in restricted
// domains"), and every family but Custom adds karpenter.sh/do-not-sync-taints
// (the InjectDoNotSyncTaintsLabel cases).
func TestUserDataLabelsTaintsAsKarpenter(t *testing.T) {
	wantLabels := map[string]string{"test-label-1": "value-1", "test-label-2": "value-2"}
	asTemplateLabels := func(np *karpv1.NodePool) { np.Spec.Template.ObjectMeta.Labels = wantLabels }
	asRequirements := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: "test-label-1", Operator: karpv1.OpIn, Values: []string{"value-1"}},
			{Key: "test-label-2", Operator: karpv1.OpIn, Values: []string{"value-2"}},
		}
	}
	for _, tc := range []struct {
		karpenter string
		alias     string
		pool      func(*karpv1.NodePool)
	}{
		{"AL2023: should specify labels in the Kubelet flags when specified in NodePool", "al2023@latest", asTemplateLabels},
		{"AL2023: should specify labels in the Kubelet flags when single value requirements are specified in NodePool", "al2023@latest", asRequirements},
		{"Bottlerocket: should specify labels in the Kubelet flags when specified in NodePool", "bottlerocket@latest", asTemplateLabels},
		{"Bottlerocket: should specify labels in the Kubelet flags when single value requirements are specified in NodePool", "bottlerocket@latest", asRequirements},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			np := kPool()
			tc.pool(np)
			out, err := kRender(t, kClass(tc.alias, &awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))}), np, "")
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tc.alias, "al2023") {
				_, flags, _ := nodeConfigKubelet(t, out)
				if len(flags) != 1 || !strings.HasPrefix(flags[0], "--node-labels") {
					t.Fatalf("kubelet flags %v, want one --node-labels", flags)
				}
				for k, v := range wantLabels {
					if !strings.Contains(flags[0], k+"="+v) {
						t.Errorf("--node-labels lacks %s=%s: %s", k, v, flags[0])
					}
				}
				return
			}
			labels, _ := bottlerocketKubernetes(t, out)["node-labels"].(map[string]any)
			for k, v := range wantLabels {
				if labels[k] != v {
					t.Errorf("node-labels[%s] = %v, want %s", k, labels[k], v)
				}
			}
		})
	}

	t.Run("AL2023: should specify taints in the KubeletConfiguration when specified in NodePool", func(t *testing.T) {
		np := kPool()
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "test-taint-1", Effect: corev1.TaintEffectNoSchedule},
			{Key: "test-taint-2", Effect: corev1.TaintEffectNoExecute}}
		out, err := kRender(t, kClass("al2023@latest", nil), np, "")
		if err != nil {
			t.Fatal(err)
		}
		config, _, _ := nodeConfigKubelet(t, out)
		want := `[{"effect":"NoSchedule","key":"test-taint-1"},{"effect":"NoExecute","key":"test-taint-2"},{"effect":"NoExecute","key":"karpenter.sh/unregistered"}]`
		if got := asJSON(t, config["registerWithTaints"]); got != want {
			t.Errorf("registerWithTaints = %s, want %s", got, want)
		}
	})

	for _, label := range []string{"node-restriction.kubernetes.io/bar", "kubernetes.io/bar", "k8s.io/bar",
		"foo.node-restriction.kubernetes.io/bar", "foo.kubernetes.io/bar", "foo.k8s.io/bar"} {
		t.Run("should not pass any labels in restricted domains: "+label, func(t *testing.T) {
			np := kPool()
			np.Spec.Template.ObjectMeta.Labels[label] = "foobar"
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: label, Operator: karpv1.OpIn, Values: []string{"foobar"}})
			out, err := kRender(t, kClass("al2023@latest", nil), np, "")
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(out, []byte(label)) {
				t.Errorf("user data carries %s:\n%s", label, out)
			}
		})
	}

	for _, tc := range []struct {
		karpenter, family string
		want              bool
	}{
		{"should not add the do not sync taints label to nodes when AMI type is custom", FamilyCustom, false},
		{"should add the do not sync taints label to nodes when AMI type is al2", FamilyAL2, true},
		{"should add the do not sync taints label to nodes when AMI type is al2023", FamilyAL2023, true},
		{"should add the do not sync taints label to nodes when AMI type is br", FamilyBottlerocket, true},
		{"should add the do not sync taints label to nodes when AMI type is windows", FamilyWindows2022, true},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			r, err := resolve(Input{Family: tc.family, Labels: map[string]string{}})
			if err != nil {
				t.Fatal(err)
			}
			if _, got := r.labels[karpv1.LabelDoNotSync]; got != tc.want || (tc.want && len(r.labels) != 1) {
				t.Errorf("labels %v, want only %s=true: %v", r.labels, karpv1.LabelDoNotSync, tc.want)
			}
		})
	}
}

// TestAL2UserDataAsKarpenter: the AL2 cases (bootstrap.sh flags, and the
// "AL2 Custom UserData" context: a MIME archive, one whose Content-Type
// header comes before MIME-Version and a bare script all merge the same
// way, the user's part first and bootstrap.sh last).
func TestAL2UserDataAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		karpenter string
		class     func(*awsv1.EC2NodeClass)
		want      []string
	}{
		{"should specify --use-max-pods=false when using ENI-based pod density", nil, []string{"--use-max-pods false", "--max-pods=58"}},
		{"should specify --use-max-pods=false and --max-pods user value when user specifies maxPods in NodePool",
			func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: ptr(int32(10))} },
			[]string{"--use-max-pods false", "--max-pods=10"}},
		{"should specify --local-disks raid0 when instance-store policy is set on AL2",
			func(nc *awsv1.EC2NodeClass) { nc.Spec.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0) },
			[]string{"--local-disks raid0"}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			nc := kClass("al2@latest", nil)
			if tc.class != nil {
				tc.class(nc)
			}
			out, err := kRender(t, nc, kPool(), "")
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("user data lacks %q:\n%s", w, out)
				}
			}
		})
	}

	script := "#!/bin/bash\necho \"the user's own step\"\n"
	archive := func(first, second string) string {
		return first + "\n" + second + "\n\n--B\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" + script + "\n--B--"
	}
	var merged []byte
	for _, tc := range []struct{ karpenter, userData string }{
		{"should merge in custom user data", archive("MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="B"`)},
		{"should merge in custom user data when Content-Type is before MIME-Version", archive(`Content-Type: multipart/mixed; boundary="B"`, "MIME-Version: 1.0")},
		{"should merge in custom user data not in multi-part mime format", script},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			nc := kClass("al2@latest", &awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))})
			nc.Spec.UserData = ptr(tc.userData)
			out, err := kRender(t, nc, kPool(), "")
			if err != nil {
				t.Fatal(err)
			}
			parts, err := mime.Parse(out)
			if err != nil || len(parts) != 2 || string(parts[0].Body) != script ||
				!bytes.Contains(parts[1].Body, []byte("/etc/eks/bootstrap.sh 'test-cluster'")) {
				t.Fatalf("parts %+v, %v: want the user's script, then bootstrap.sh", parts, err)
			}
			if merged == nil {
				merged = out
			} else if !bytes.Equal(out, merged) {
				t.Errorf("renders differently from the first form:\n%s\n---\n%s", out, merged)
			}
		})
	}
	t.Run("should handle empty custom user data", func(t *testing.T) {
		out, err := kRender(t, kClass("al2@latest", &awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))}), kPool(), "")
		if err != nil {
			t.Fatal(err)
		}
		parts, err := mime.Parse(out)
		if err != nil || len(parts) != 1 || !bytes.Contains(parts[0].Body, []byte(
			`--kubelet-extra-args '--node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,testing/cluster=unspecified" --register-with-taints="karpenter.sh/unregistered:NoExecute" --max-pods=110'`)) {
			t.Fatalf("parts %+v, %v: want bootstrap.sh alone, with Karpenter's kubelet arguments", parts, err)
		}
	})
}

// TestAL2023UserDataAsKarpenter: the AL2023 merge table ("should merge
// custom user data": the user's parts first, Karpenter's NodeConfig last),
// RAID0, and the refusal without a service CIDR.
func TestAL2023UserDataAsKarpenter(t *testing.T) {
	userConfig := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 42\n"
	shell := "#!/bin/bash\necho \"AL2023 user step\"\n"
	mimeInput := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\n" +
		userConfig + "--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" + shell + "--//\n"
	for _, tc := range []struct {
		karpenter string
		userData  *string
		want      []string // media types of the parts, Karpenter's NodeConfig last
	}{
		{"should merge custom user data: MIME", &mimeInput, []string{"application/node.eks.aws", "text/x-shellscript", "application/node.eks.aws"}},
		{"should merge custom user data: YAML", &userConfig, []string{"application/node.eks.aws", "application/node.eks.aws"}},
		{"should merge custom user data: shell", &shell, []string{"text/x-shellscript", "application/node.eks.aws"}},
		{"should merge custom user data: empty", nil, []string{"application/node.eks.aws"}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			nc := kClass("al2023@latest", &awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))})
			nc.Spec.UserData = tc.userData
			out, err := kRender(t, nc, kPool(), "")
			if err != nil {
				t.Fatal(err)
			}
			parts, err := mime.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, p := range parts {
				types = append(types, p.MediaType())
			}
			if strings.Join(types, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("parts %v, want %v", types, tc.want)
			}
			config, flags, _ := nodeConfigKubelet(t, out)
			if asJSON(t, config["maxPods"]) != "110" || asJSON(t, config["clusterDNS"]) != `["10.0.100.10"]` ||
				asJSON(t, config["registerWithTaints"]) != `[{"effect":"NoExecute","key":"karpenter.sh/unregistered"}]` ||
				len(flags) != 1 || flags[0] != `--node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,testing/cluster=unspecified"` {
				t.Errorf("NodeConfig kubelet %v %v", config, flags)
			}
		})
	}
	t.Run("should set LocalDiskStrategy to Raid0 when specified by the InstanceStorePolicy", func(t *testing.T) {
		nc := kClass("al2023@latest", nil)
		nc.Spec.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0)
		out, err := kRender(t, nc, kPool(), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, strategy := nodeConfigKubelet(t, out); strategy != "RAID0" {
			t.Errorf("instance.localStorage.strategy = %q, want RAID0", strategy)
		}
	})
	t.Run("should fail to create launch templates if cluster CIDR is unresolved", func(t *testing.T) {
		in := FromNodePool(kClass("al2023@latest", nil), kPool(), BuildOptions{Cluster: Cluster{Name: "test-cluster", Endpoint: "https://test-cluster"}})
		if _, err := Render(in); err == nil || !strings.Contains(err.Error(), ErrServiceCIDRUnknown.Error()) {
			t.Errorf("Render = %v, want %v", err, ErrServiceCIDRUnknown)
		}
	})
}

// TestBottlerocketUserDataAsKarpenter: the "Bottlerocket" context of
// "User Data" (settings.kubernetes written from the kubelet block, the
// user's TOML merged) and the RAID0 bootstrap commands.
func TestBottlerocketUserDataAsKarpenter(t *testing.T) {
	big := map[string]string{"cpu": "2", "memory": "3Gi", "ephemeral-storage": "10Gi"}
	for _, tc := range []struct {
		karpenter string
		kubelet   *awsv1.KubeletConfiguration
		want      map[string]string // settings.kubernetes key -> JSON
	}{
		{"should override system reserved values in user data", &awsv1.KubeletConfiguration{SystemReserved: big},
			map[string]string{"system-reserved": `{"cpu":"2","ephemeral-storage":"10Gi","memory":"3Gi"}`}},
		{"should override kube reserved values in user data", &awsv1.KubeletConfiguration{KubeReserved: big},
			map[string]string{"kube-reserved": `{"cpu":"2","ephemeral-storage":"10Gi","memory":"3Gi"}`}},
		{"should override soft eviction values in user data", &awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "10%"},
			EvictionSoftGracePeriod: map[string]karpv1.Duration{"memory.available": dur("1m")}},
			map[string]string{"eviction-soft": `{"memory.available":"10%"}`, "eviction-soft-grace-period": `{"memory.available":"1m0s"}`}},
		{"should override max pod grace period in user data", &awsv1.KubeletConfiguration{MaxPods: ptr(int32(35)), EvictionMaxPodGracePeriod: ptr(int32(10))},
			map[string]string{"max-pods": `35`, "eviction-max-pod-grace-period": `10`, "cluster-dns-ip": `"10.0.100.10"`,
				"api-server": `"https://test-cluster"`, "cluster-certificate": `"Y2EtYnVuZGxlCg=="`, "cluster-name": `"test-cluster"`}},
		// Karpenter names this one "should override kube reserved values in user data" too.
		{"should override kube reserved values in user data (evictionHard)", &awsv1.KubeletConfiguration{EvictionHard: thresh},
			map[string]string{"eviction-hard": `{"memory.available":"10%","nodefs.available":"15%","nodefs.inodesFree":"5%"}`}},
		{"should specify max pods value when passing maxPods in configuration", &awsv1.KubeletConfiguration{MaxPods: ptr(int32(10))},
			map[string]string{"max-pods": `10`}},
		{"should pass ImageGCHighThresholdPercent when specified", &awsv1.KubeletConfiguration{ImageGCHighThresholdPercent: ptr(int32(50))},
			map[string]string{"image-gc-high-threshold-percent": `"50"`}},
		{"should pass ImageGCLowThresholdPercent when specified", &awsv1.KubeletConfiguration{ImageGCLowThresholdPercent: ptr(int32(50))},
			map[string]string{"image-gc-low-threshold-percent": `"50"`}},
		{"should pass ClusterDNSIP when discovered", nil, map[string]string{"cluster-dns-ip": `"10.0.100.10"`}},
		{"should pass CPUCFSQuota when specified", &awsv1.KubeletConfiguration{CPUCFSQuota: ptr(false)},
			map[string]string{"cpu-cfs-quota-enforced": `false`}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			out, err := kRender(t, kClass("bottlerocket@latest", tc.kubelet), kPool(), "")
			if err != nil {
				t.Fatal(err)
			}
			k8s := bottlerocketKubernetes(t, out)
			for key, want := range tc.want {
				if got := asJSON(t, k8s[key]); got != want {
					t.Errorf("settings.kubernetes.%s = %s, want %s", key, got, want)
				}
			}
		})
	}

	// "should merge in custom user data" and "should bootstrap when custom
	// user data is empty": Karpenter's keys win, the user's other known
	// keys and tables stay, unknown settings.kubernetes keys are dropped.
	taints := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "foo", Value: "bar", Effect: corev1.TaintEffectNoExecute}}
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "baz", Value: "bin", Effect: corev1.TaintEffectNoExecute}}
	}
	user := `[settings.kubernetes]
"unknown-setting" = "dropped"
api-server = 'overridden'
cloud-provider = 'external'
max-pods = 12345

[settings.kubernetes.eviction-hard]
"memory.available" = "12%"

[settings.kubernetes.node-labels]
"custom-node-label" = "custom"
"karpenter.sh/nodepool" = "overridden"

[settings.kubernetes.node-taints]
"replace" = ["me:NoSchedule"]

[settings.ntp]
time-servers = ["169.254.169.123"]
`
	for _, tc := range []struct {
		karpenter string
		userData  *string
		want      string // the whole document as JSON
	}{
		{"Bottlerocket: should merge in custom user data", &user, `{"settings":{"kubernetes":{"api-server":"https://test-cluster",` +
			`"cloud-provider":"external","cluster-certificate":"Y2EtYnVuZGxlCg==","cluster-dns-ip":"10.0.100.10","cluster-name":"test-cluster",` +
			`"eviction-hard":{"memory.available":"12%"},"max-pods":110,"node-labels":{"custom-node-label":"custom",` +
			`"karpenter.k8s.aws/ec2nodeclass":"default","karpenter.sh/capacity-type":"on-demand","karpenter.sh/do-not-sync-taints":"true",` +
			`"karpenter.sh/nodepool":"default","testing/cluster":"unspecified"},"node-taints":{"baz":["bin:NoExecute"],"foo":["bar:NoExecute"],` +
			`"karpenter.sh/unregistered":[":NoExecute"]}},"ntp":{"time-servers":["169.254.169.123"]}}}`},
		{"Bottlerocket: should bootstrap when custom user data is empty", nil, `{"settings":{"kubernetes":{"api-server":"https://test-cluster",` +
			`"cluster-certificate":"Y2EtYnVuZGxlCg==","cluster-dns-ip":"10.0.100.10","cluster-name":"test-cluster","max-pods":110,` +
			`"node-labels":{"karpenter.k8s.aws/ec2nodeclass":"default","karpenter.sh/capacity-type":"on-demand","karpenter.sh/do-not-sync-taints":"true",` +
			`"karpenter.sh/nodepool":"default","testing/cluster":"unspecified"},"node-taints":{"baz":["bin:NoExecute"],"foo":["bar:NoExecute"],` +
			`"karpenter.sh/unregistered":[":NoExecute"]}}}}`},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			nc := kClass("bottlerocket@latest", &awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))})
			nc.Spec.UserData = tc.userData
			np := kPool()
			taints(np)
			out, err := kRender(t, nc, np, "")
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := toml.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			// JSON of a map is in key order: TOML's table order does
			// not matter to Bottlerocket (Karpenter writes its keys in
			// its struct's order, Joiner sorted).
			if got := asJSON(t, doc); got != tc.want {
				t.Errorf("settings\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	t.Run("Bottlerocket: should not bootstrap on invalid toml user data", func(t *testing.T) {
		nc := kClass("bottlerocket@latest", nil)
		nc.Spec.UserData = ptr("#/bin/bash\n ./not-toml.sh")
		if _, err := kRender(t, nc, kPool(), ""); err == nil {
			t.Error("Render succeeded, want an error (Karpenter launches nothing)")
		}
	})

	mount := func(bind ...any) string {
		cmds := []any{[]any{"apiclient", "ephemeral-storage", "init"}, append([]any{"apiclient", "ephemeral-storage", "bind"}, bind...)}
		return fmt.Sprintf(`{"commands":%s,"essential":true,"mode":"always"}`, asJSON(t, cmds))
	}
	for _, tc := range []struct {
		karpenter, alias string
		userData         *string
		want             map[string]string // bootstrap-commands entry -> JSON
	}{
		{"should specify RAID0 bootstrap-command when instance-store policy is set on Bottlerocket", "bottlerocket@latest", nil,
			map[string]string{"000-mount-instance-storage": mount()}},
		{"should merge bootstrap-commands when instance-store policy is set on Bottlerocket", "bottlerocket@latest",
			ptr("[settings.bootstrap-commands.111-say-hello]\ncommands = [['echo', 'hello']]\nmode = 'always'\nessential = true\n"),
			map[string]string{"000-mount-instance-storage": mount(), "111-say-hello": `{"commands":[["echo","hello"]],"essential":true,"mode":"always"}`}},
		{"should use explicit directories for Bottlerocket v1.45.0", "bottlerocket@v1.45.0", nil,
			map[string]string{"000-mount-instance-storage": mount("--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")}},
		{"should use default bind for Bottlerocket v1.46.0", "bottlerocket@v1.46.0", nil,
			map[string]string{"000-mount-instance-storage": mount()}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			nc := kClass(tc.alias, nil)
			nc.Spec.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0)
			nc.Spec.UserData = tc.userData
			out, err := kRender(t, nc, kPool(), "")
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Settings struct {
					BootstrapCommands map[string]any `toml:"bootstrap-commands"`
				} `toml:"settings"`
			}
			if err := toml.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Settings.BootstrapCommands) != len(tc.want) {
				t.Errorf("bootstrap-commands %v, want %d entries", doc.Settings.BootstrapCommands, len(tc.want))
			}
			for name, want := range tc.want {
				if got := asJSON(t, doc.Settings.BootstrapCommands[name]); got != want {
					t.Errorf("bootstrap-commands.%s = %s, want %s", name, got, want)
				}
			}
		})
	}
}

// TestWindowsAndCustomUserDataAsKarpenter: "Windows Custom UserData" (the
// user's script before Start-EKSBootstrap.ps1 in one <powershell> block)
// and "should copy over userData untouched when AMIFamily is Custom".
func TestWindowsAndCustomUserDataAsKarpenter(t *testing.T) {
	call := `& $EKSBootstrapScriptFile -EKSClusterName 'test-cluster' -APIServerEndpoint 'https://test-cluster' -Base64ClusterCA 'Y2EtYnVuZGxlCg==' ` +
		`-KubeletExtraArgs '--node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=spot,karpenter.sh/do-not-sync-taints=true,` +
		`karpenter.sh/nodepool=default,testing/cluster=unspecified" --register-with-taints="karpenter.sh/unregistered:NoExecute" --max-pods=110' -DNSClusterIP '10.0.100.10'`
	script := "Write-Host \"user step one\"\nWrite-Host \"user step two\"\n"
	for _, tc := range []struct {
		karpenter string
		userData  *string
		prefix    string
	}{
		{"Windows: should merge and bootstrap with custom user data", &script, "<powershell>\n" + script},
		{"Windows: should bootstrap when custom user data is empty", nil, "<powershell>\n"},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			nc := kClass("windows2022@latest", &awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))})
			nc.Spec.UserData = tc.userData
			np := kPool()
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelOSStable, Operator: karpv1.OpIn, Values: []string{"windows"}}}
			in := FromNodePool(nc, np, BuildOptions{CapacityType: karpv1.CapacityTypeSpot, InstanceMaxPods: 58, VCPU: 4, Cluster: Cluster{
				Name: "test-cluster", Endpoint: "https://test-cluster", CABundle: "Y2EtYnVuZGxlCg==", ServiceCIDR: "10.100.0.0/16", DNSIP: "10.0.100.10"}})
			out, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			s := string(out)
			if !strings.HasPrefix(s, tc.prefix+`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"`+"\n") ||
				!strings.Contains(s, call+"\n</powershell>") {
				t.Errorf("user data:\n%s\nwant the user's script, then\n%s", s, call)
			}
		})
	}
	t.Run("Custom AMI Selector: should copy over userData untouched when AMIFamily is Custom", func(t *testing.T) {
		nc := &awsv1.EC2NodeClass{}
		nc.Spec.AMIFamily = ptr(awsv1.AMIFamilyCustom)
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"*": "*"}}}
		nc.Spec.UserData = ptr("special user data")
		out, err := kRender(t, nc, kPool(), "")
		if err != nil || string(out) != "special user data" {
			t.Errorf("Render = %q, %v", out, err)
		}
	})
}
