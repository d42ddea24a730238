package userdata

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/userdata/mime"
)

// The cluster as EKS discovery reports it (DescribeCluster of a
// Kubernetes 1.34 cluster): the regional endpoint, the CA bundle base64
// encoded, service CIDR 172.20.0.0/16 (kube-dns at its 10th address). The
// Kubernetes version shows in no user data: it picks the image (AWS
// publishes no AL2 image for 1.33 and later, so the AL2 case is a pinned
// or own AL2 image).
const (
	eksName        = "prod-usw2"
	eksEndpoint    = "https://0F3A9C27D1E84B6A5C0D2E7F91B3A4C8.gr7.us-west-2.eks.amazonaws.com"
	eksServiceCIDR = "172.20.0.0/16"
	eksDNS         = "172.20.0.10"
)

func eksCluster(t testing.TB) Cluster {
	pemCA := readInput(t, "eks-ca.crt")
	return Cluster{Name: eksName, Endpoint: eksEndpoint, CABundle: base64.StdEncoding.EncodeToString([]byte(pemCA)),
		ServiceCIDR: eksServiceCIDR, IPFamily: "ipv4"}
}

// eksFamilies are the families with a discovered-cluster golden pair.
var eksFamilies = []string{FamilyAL2, FamilyAL2023, FamilyBottlerocket, FamilyCustom, FamilyUbuntu, FamilyWindows2022}

// eksNodeClass is the EC2NodeClass a platform engineer writes for the
// family: an alias where AWS publishes one, kube-reserved and friends.
func eksNodeClass(t testing.TB, family string) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "web"
	nc.Spec.Kubelet = &awsv1.KubeletConfiguration{
		KubeReserved:   map[string]string{"cpu": "80m", "memory": "893Mi"},
		SystemReserved: map[string]string{"memory": "100Mi"},
		EvictionHard:   map[string]string{"memory.available": "100Mi"},
	}
	switch family {
	case FamilyCustom, FamilyUbuntu:
		nc.Spec.AMIFamily = ptr(family)
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}
	default:
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: strings.ToLower(family) + "@latest"}}
	}
	if family == FamilyCustom {
		nc.Spec.UserData = ptr(readInput(t, "eks-custom-nodeconfig.yaml"))
	}
	return nc
}

func eksNodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{}
	np.Name = "web"
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "web"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeSpot}},
	}
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	return np
}

// renderEKS renders a node of the discovered cluster on an m6i.large (29
// ENI-limited pods, 2 vCPUs): on a stock image, or on one that runs
// "joiner bootstrap" (a Joiner-built AMI; on Bottlerocket, where no image
// has the binary, the EC2NodeClass asks for the bootstrap container).
func renderEKS(t testing.TB, family string, joiner bool) (Input, []byte, error) {
	nc := eksNodeClass(t, family)
	opts := BuildOptions{Cluster: eksCluster(t), InstanceMaxPods: 29, VCPU: 2}
	switch {
	case joiner && family == FamilyBottlerocket:
		nc.Annotations = map[string]string{karpv1.AnnotationAgent: "true"}
	case joiner:
		opts.JoinerImage = true
	}
	in := FromNodePool(nc, eksNodePool(), opts)
	out, err := Render(in)
	return in, out, err
}

func eksMode(joiner bool) string {
	if joiner {
		return "joiner"
	}
	return "stock"
}

// TestEKSGolden: per family, the discovered cluster's user data on a stock
// image and on a Joiner image (testdata/golden/eks-<family>-<mode>.golden).
func TestEKSGolden(t *testing.T) {
	for _, fam := range eksFamilies {
		for _, joiner := range []bool{false, true} {
			name := "eks-" + strings.ToLower(fam) + "-" + eksMode(joiner)
			t.Run(name, func(t *testing.T) {
				_, out, err := renderEKS(t, fam, joiner)
				checkGolden(t, name, out, err)
			})
		}
	}
}

// TestEKSStockJoins reads each stock-image golden as a platform engineer
// would: the EKS join material is there in the family's own form, the
// kubelet gets the labels, taints, max pods, cluster DNS and
// kube-reserved, and nothing calls a joiner binary the image lacks.
func TestEKSStockJoins(t *testing.T) {
	c := eksCluster(t)
	block, _ := pem.Decode([]byte(mustB64(t, c.CABundle)))
	if block == nil {
		t.Fatal("the CA bundle does not decode to PEM")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		t.Fatalf("the CA bundle is not a certificate: %v", err)
	}
	bootstrapSh := "/etc/eks/bootstrap.sh '" + eksName + "' --apiserver-endpoint '" + eksEndpoint + "' --b64-cluster-ca '" + c.CABundle + "'"
	kubeletArgs := `--kube-reserved="cpu=80m,memory=893Mi"`
	want := map[string][]string{
		FamilyAL2:    {bootstrapSh, "--dns-cluster-ip '" + eksDNS + "'", "--use-max-pods false", kubeletArgs},
		FamilyUbuntu: {bootstrapSh, "--dns-cluster-ip '" + eksDNS + "'", "--use-max-pods false", kubeletArgs},
		FamilyAL2023: {"kind: NodeConfig", "apiServerEndpoint: " + eksEndpoint, "certificateAuthority: " + c.CABundle,
			"cidr: " + eksServiceCIDR, "name: " + eksName, "clusterDNS:\n      - " + eksDNS, "kubeReserved:\n        cpu: 80m\n        memory: 893Mi"},
		FamilyBottlerocket: {"api-server = '" + eksEndpoint + "'", "cluster-certificate = '" + c.CABundle + "'", "cluster-name = '" + eksName + "'",
			"cluster-dns-ip = '" + eksDNS + "'", "[settings.kubernetes.kube-reserved]\ncpu = '80m'\nmemory = '893Mi'"},
		FamilyWindows2022: {"& $EKSBootstrapScriptFile -EKSClusterName '" + eksName + "' -APIServerEndpoint '" + eksEndpoint +
			"' -Base64ClusterCA '" + c.CABundle + "'", "-DNSClusterIP '" + eksDNS + "'", kubeletArgs},
		FamilyCustom: {"name: " + eksName, "cidr: " + eksServiceCIDR},
	}
	for _, fam := range eksFamilies {
		t.Run(fam, func(t *testing.T) {
			in, out, err := renderEKS(t, fam, false)
			if err != nil {
				t.Fatal(err)
			}
			if in.JoinerImage || !in.AgentEnabled {
				t.Errorf("input: JoinerImage=%v AgentEnabled=%v, want false, true", in.JoinerImage, in.AgentEnabled)
			}
			for _, w := range want[fam] {
				if !strings.Contains(string(out), w) {
					t.Errorf("missing %q in\n%s", w, out)
				}
			}
			if bytes.Contains(out, []byte("joiner")) {
				t.Errorf("a stock image's user data mentions joiner:\n%s", out)
			}
			facts, err := Parse(fam, out)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			labels := map[string]string{"team": "web", karpv1.LabelNodePool: "web", karpv1.LabelNodeClass: "web",
				karpv1.LabelCapacityType: karpv1.CapacityTypeSpot, karpv1.LabelDoNotSync: "true"}
			taints := "dedicated=web:NoSchedule karpenter.sh/unregistered:NoExecute"
			if fam == FamilyCustom { // only what the user wrote
				labels = map[string]string{"team": "web", karpv1.LabelNodePool: "web"}
				taints = "dedicated=web:NoSchedule"
			}
			maxPods := int32(29)
			if isWindows(fam) {
				maxPods = DefaultMaxPods
			}
			if !equalMaps(facts.Labels, labels) || strings.Join(taintStrings(facts.Taints), " ") != taints ||
				facts.MaxPods != maxPods || facts.ClusterDNS != eksDNS || facts.Agent {
				t.Errorf("facts = %+v, want labels %v, taints %s, max pods %d, DNS %s, no agent", facts, labels, taints, maxPods, eksDNS)
			}
		})
	}
}

func mustB64(t *testing.T, s string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEKSModesDifferByHookOnly: a Joiner image's user data is the stock
// image's plus the hook (Linux: the hook part before Joiner's; Bottlerocket:
// the bootstrap container) and nothing else; Windows and Custom get no
// hook at all.
func TestEKSModesDifferByHookOnly(t *testing.T) {
	for _, fam := range eksFamilies {
		t.Run(fam, func(t *testing.T) {
			_, stock, err := renderEKS(t, fam, false)
			if err != nil {
				t.Fatal(err)
			}
			in, joiner, err := renderEKS(t, fam, true)
			if err != nil {
				t.Fatal(err)
			}
			facts, err := Parse(fam, joiner)
			if err != nil {
				t.Fatal(err)
			}
			hooked := fam != FamilyCustom && !isWindows(fam)
			if !in.JoinerImage || facts.Agent != hooked {
				t.Errorf("JoinerImage=%v, hook present=%v, want true, %v", in.JoinerImage, facts.Agent, hooked)
			}
			if got := withoutHook(t, fam, joiner); !bytes.Equal(got, stock) {
				t.Errorf("without the hook the Joiner image's user data differs from the stock one:\n%s\n---\n%s", got, stock)
			}
		})
	}
}

// withoutHook removes the Joiner hook from rendered user data.
func withoutHook(t *testing.T, family string, out []byte) []byte {
	t.Helper()
	switch family {
	case FamilyAL2, FamilyAL2023, FamilyUbuntu:
		parts, err := mime.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		var kept []mime.Part
		for _, p := range parts {
			if !isHook(p) {
				kept = append(kept, p)
			}
		}
		b, err := mime.Write(kept)
		if err != nil {
			t.Fatal(err)
		}
		return b
	case FamilyBottlerocket:
		return bytes.Replace(out, []byte("[settings.bootstrap-containers]\n[settings.bootstrap-containers.joiner-bootstrap]\n"+
			"essential = true\nmode = 'always'\nsource = '"+DefaultBootstrapImage+"'\n\n"), nil, 1)
	}
	return out
}

// TestHookNeedsJoinerImage: the hook is rendered only where the image can
// run it (JoinerImage) and the EC2NodeClass does not opt out; build takes
// JoinerImage from the images' tag or joiner.io/agent: "true".
func TestHookNeedsJoinerImage(t *testing.T) {
	for _, c := range []struct {
		annotation  string
		imageTagged bool
		want        bool
	}{
		{"", false, false}, {"", true, true},
		{"true", false, true}, {"TRUE", true, true},
		{"false", true, false}, {"false", false, false},
	} {
		for _, fam := range []string{FamilyAL2, FamilyAL2023, FamilyBottlerocket, FamilyUbuntu} {
			nc := eksNodeClass(t, fam)
			if c.annotation != "" {
				nc.Annotations = map[string]string{karpv1.AnnotationAgent: c.annotation}
			}
			in := FromNodePool(nc, eksNodePool(), BuildOptions{Cluster: eksCluster(t), JoinerImage: c.imageTagged})
			out, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(fam, out)
			if err != nil || f.Agent != c.want {
				t.Errorf("%s annotation=%q tagged=%v: hook %v (%v), want %v", fam, c.annotation, c.imageTagged, f.Agent, err, c.want)
			}
		}
	}
}
