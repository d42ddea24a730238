package userdata

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/userdata/mime"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const (
	testCA   = "Y2EtYnVuZGxlCg==" // base64("ca-bundle\n")
	testCIDR = "10.100.0.0/16"
	testDNS  = "10.100.0.10"
)

func ptr[T any](v T) *T { return &v }

func dur(s string) karpv1.Duration {
	d, err := karpv1.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// fullKubelet is the kubelet block from the issue (plus image GC and CFS
// quota, so every mapped field appears in a golden file).
func fullKubelet() *awsv1.KubeletConfiguration {
	return &awsv1.KubeletConfiguration{
		ClusterDNS:     []string{"10.0.1.100"},
		SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
		KubeReserved:   map[string]string{"cpu": "200m", "memory": "100Mi", "ephemeral-storage": "3Gi"},
		EvictionHard:   map[string]string{"memory.available": "5%", "nodefs.available": "10%", "nodefs.inodesFree": "10%"},
		EvictionSoft:   map[string]string{"memory.available": "500Mi", "nodefs.available": "15%", "nodefs.inodesFree": "15%"},
		EvictionSoftGracePeriod: map[string]karpv1.Duration{
			"memory.available": dur("1m"), "nodefs.available": dur("1m30s"), "nodefs.inodesFree": dur("2m"),
		},
		EvictionMaxPodGracePeriod:   ptr(int32(180)),
		PodsPerCore:                 ptr(int32(2)),
		MaxPods:                     ptr(int32(20)),
		ImageGCHighThresholdPercent: ptr(int32(85)),
		ImageGCLowThresholdPercent:  ptr(int32(80)),
		CPUCFSQuota:                 ptr(false),
	}
}

func testInput(family, userData string, kubelet *awsv1.KubeletConfiguration) Input {
	return Input{
		Family:   family,
		UserData: userData,
		Kubelet:  kubelet,
		Labels: map[string]string{
			karpv1.LabelNodePool:          "default",
			karpv1.LabelNodeClass:         "default",
			karpv1.LabelCapacityType:      "on-demand",
			"testing/cluster":             "unspecified",
			karpv1.LabelInstanceType:      "m5.4xlarge", // restricted domain: dropped
			"topology.kubernetes.io/zone": "us-west-2a", // restricted domain: dropped
		},
		Taints:        []corev1.Taint{{Key: "foo", Value: "bar", Effect: corev1.TaintEffectNoSchedule}},
		StartupTaints: []corev1.Taint{{Key: "baz", Value: "bin", Effect: corev1.TaintEffectNoExecute}},
		Cluster: Cluster{
			Name: "test-cluster", Endpoint: "https://test-cluster", CABundle: testCA, ServiceCIDR: testCIDR,
		},
		MaxPods:      234, // m5.4xlarge
		VCPU:         16,
		AgentEnabled: true,
		JoinerImage:  true, // the matrix is of Joiner images; stock ones: eks_test.go
	}
}

// wantLabels are the labels every non-Custom family registers with.
var wantLabels = map[string]string{
	karpv1.LabelNodePool:     "default",
	karpv1.LabelNodeClass:    "default",
	karpv1.LabelCapacityType: "on-demand",
	karpv1.LabelDoNotSync:    "true",
	"testing/cluster":        "unspecified",
}

var wantTaints = []string{"baz=bin:NoExecute", "foo=bar:NoSchedule", "karpenter.sh/unregistered:NoExecute"}

func readInput(t testing.TB, name string) string {
	t.Helper()
	if name == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join("testdata", "input", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nativeInput is the family's own structured user data.
func nativeInput(family string) string {
	switch {
	case family == FamilyBottlerocket:
		return "settings.toml"
	case isWindows(family):
		return "windows.ps1"
	}
	return "nodeconfig.yaml"
}

type matrixCase struct {
	name, family, inputFile, kubeletName string
	kubelet                              *awsv1.KubeletConfiguration
}

func matrix() []matrixCase {
	var cases []matrixCase
	for _, fam := range []string{FamilyAL2, FamilyAL2023, FamilyBottlerocket, FamilyCustom, FamilyUbuntu, FamilyWindows2019, FamilyWindows2022} {
		for _, ud := range []struct{ name, file string }{
			{"none", ""}, {"shell", "shell.sh"}, {"mime", "mime.txt"}, {"native", nativeInput(fam)},
		} {
			for _, kb := range []struct {
				name string
				k    func() *awsv1.KubeletConfiguration
			}{{"kubelet-empty", func() *awsv1.KubeletConfiguration { return nil }}, {"kubelet-full", fullKubelet}} {
				cases = append(cases, matrixCase{
					name:   strings.ToLower(fam) + "-" + ud.name + "-" + kb.name,
					family: fam, inputFile: ud.file, kubeletName: kb.name, kubelet: kb.k(),
				})
			}
		}
	}
	return cases
}

// TestGolden renders every family x user data x kubelet block and compares
// with testdata/golden (go test ./userdata -run TestGolden -update rewrites).
// Errors are golden too (files ending in .err.golden).
func TestGolden(t *testing.T) {
	for _, c := range matrix() {
		t.Run(c.name, func(t *testing.T) {
			in := testInput(c.family, readInput(t, c.inputFile), c.kubelet)
			out, err := Render(in)
			checkGolden(t, c.name, out, err)
			// Deterministic: a second render (new map iteration order) is identical.
			again, err2 := Render(testInput(c.family, readInput(t, c.inputFile), c.kubelet))
			if (err == nil) != (err2 == nil) || !bytes.Equal(out, again) {
				t.Errorf("second render differs")
			}
		})
	}
}

// checkGolden compares a render's output (or its error, in a file ending
// .err.golden) with testdata/golden/<name>.golden; -update rewrites it.
func checkGolden(t *testing.T, name string, out []byte, err error) {
	t.Helper()
	okPath, errPath := filepath.Join("testdata", "golden", name+".golden"), filepath.Join("testdata", "golden", name+".err.golden")
	got, path := out, okPath
	if err != nil {
		got, path = []byte(err.Error()+"\n"), errPath
	}
	if *update {
		_ = os.Remove(okPath)
		_ = os.Remove(errPath)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatalf("render error=%v; golden %s: %v (run with -update)", err, path, rerr)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update to accept)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestMatrixSemantics parses every rendered output back and checks what the
// kubelet will register with.
func TestMatrixSemantics(t *testing.T) {
	for _, c := range matrix() {
		t.Run(c.name, func(t *testing.T) {
			userData := readInput(t, c.inputFile)
			out, err := Render(testInput(c.family, userData, c.kubelet))
			if c.family == FamilyBottlerocket && (c.inputFile == "shell.sh" || c.inputFile == "mime.txt") {
				if err == nil || !strings.Contains(err.Error(), "line ") {
					t.Fatalf("Bottlerocket with non-TOML user data: want an error naming the line, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.family == FamilyCustom {
				if string(out) != userData {
					t.Fatalf("Custom must pass user data through byte for byte")
				}
				return
			}
			facts, err := Parse(c.family, out)
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, out)
			}
			labels := wantLabels
			if c.family == FamilyAL2023 && c.inputFile == "nodeconfig.yaml" {
				labels = copyMap(wantLabels)
				labels["team"] = "user" // the user's --node-labels flag survives; Joiner wins on capacity-type
			}
			if c.family == FamilyBottlerocket && c.inputFile == "settings.toml" {
				labels = copyMap(wantLabels)
				labels["custom"] = "kept" // user node-labels merged; Joiner wins on capacity-type
			}
			if !equalMaps(facts.Labels, labels) {
				t.Errorf("labels = %v, want %v", facts.Labels, labels)
			}
			if got := taintStrings(facts.Taints); strings.Join(got, " ") != strings.Join(wantTaints, " ") {
				t.Errorf("taints = %v, want %v", got, wantTaints)
			}
			wantMax, wantDNS := int32(234), testDNS
			if isWindows(c.family) {
				wantMax = DefaultMaxPods
			}
			if c.kubelet != nil {
				wantMax, wantDNS = 20, "10.0.1.100"
			}
			if facts.MaxPods != wantMax {
				t.Errorf("maxPods = %d, want %d", facts.MaxPods, wantMax)
			}
			if facts.ClusterDNS != wantDNS {
				t.Errorf("clusterDNS = %q, want %q", facts.ClusterDNS, wantDNS)
			}
			if want := !isWindows(c.family); facts.Agent != want {
				t.Errorf("agent hook present = %v, want %v", facts.Agent, want)
			}
		})
	}
}

func copyMap(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func taintStrings(ts []corev1.Taint) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, taintString(t))
	}
	sort.Strings(out)
	return out
}

// TestMIMEPartOrder checks the archive structure of AL2 and AL2023 output.
func TestMIMEPartOrder(t *testing.T) {
	type want struct {
		types []string
		first string // substring of the first part's body
	}
	cases := []struct {
		family, file string
		want         want
	}{
		{FamilyAL2, "", want{[]string{"text/x-shellscript", "text/x-shellscript"}, "joiner bootstrap"}},
		{FamilyAL2, "shell.sh", want{[]string{"text/x-shellscript", "text/x-shellscript", "text/x-shellscript"}, "hello from user data"}},
		{FamilyAL2, "mime.txt", want{[]string{"text/x-shellscript", "application/node.eks.aws", "text/x-shellscript", "text/x-shellscript"}, "hello from a MIME part"}},
		{FamilyAL2023, "", want{[]string{"text/x-shellscript", "application/node.eks.aws"}, "joiner bootstrap"}},
		{FamilyAL2023, "shell.sh", want{[]string{"text/x-shellscript", "text/x-shellscript", "application/node.eks.aws"}, "hello from user data"}},
		{FamilyAL2023, "nodeconfig.yaml", want{[]string{"application/node.eks.aws", "text/x-shellscript", "application/node.eks.aws"}, "maxPods: 42"}},
		{FamilyAL2023, "mime.txt", want{[]string{"text/x-shellscript", "application/node.eks.aws", "text/x-shellscript", "application/node.eks.aws"}, "hello from a MIME part"}},
	}
	for _, c := range cases {
		t.Run(c.family+"/"+c.file, func(t *testing.T) {
			out, err := Render(testInput(c.family, readInput(t, c.file), nil))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(out, []byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n")) {
				t.Errorf("archive header:\n%s", out)
			}
			if bytes.Contains(out, []byte("\r")) {
				t.Errorf("archive contains CR")
			}
			parts, err := mime.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, p := range parts {
				types = append(types, p.MediaType())
			}
			if strings.Join(types, ",") != strings.Join(c.want.types, ",") {
				t.Fatalf("part types = %v, want %v", types, c.want.types)
			}
			if !strings.Contains(string(parts[0].Body), c.want.first) {
				t.Errorf("first part = %q, want it to contain %q", parts[0].Body, c.want.first)
			}
			hook := parts[len(parts)-2]
			if !strings.Contains(string(hook.Body), "joiner bootstrap") {
				t.Errorf("the part before Joiner's last part must be the Joiner hook, got %q", hook.Body)
			}
			last := string(parts[len(parts)-1].Body)
			switch c.family {
			case FamilyAL2:
				if !strings.Contains(last, "/etc/eks/bootstrap.sh 'test-cluster'") {
					t.Errorf("last part is not the bootstrap.sh call: %q", last)
				}
			case FamilyAL2023:
				nc, err := ParseNodeConfig(parts[len(parts)-1].Body)
				if err != nil {
					t.Fatal(err)
				}
				if nc.Kind != "NodeConfig" || nc.APIVersion != NodeConfigAPIVersion || nc.Spec.Cluster.CIDR != testCIDR ||
					nc.Spec.Cluster.Name != "test-cluster" || nc.Spec.Cluster.CertificateAuthority != testCA ||
					nc.Spec.Cluster.APIServerEndpoint != "https://test-cluster" {
					t.Errorf("NodeConfig cluster block wrong: %+v", nc)
				}
				if nc.Spec.Kubelet.Config["maxPods"] != 234 {
					t.Errorf("maxPods = %v", nc.Spec.Kubelet.Config["maxPods"])
				}
				if len(nc.Spec.Kubelet.Flags) != 1 || !strings.HasPrefix(nc.Spec.Kubelet.Flags[0], `--node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,`) {
					t.Errorf("flags = %v", nc.Spec.Kubelet.Flags)
				}
			}
		})
	}
}

// TestAL2MergeNormalises: a MIME archive (either header order, LF or CRLF)
// and the bare script give the same output.
func TestAL2MergeNormalises(t *testing.T) {
	script := "#!/bin/bash\necho 'user script'\n"
	mimeA := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" + script + "\n--BOUNDARY--\n"
	mimeB := "Content-Type: multipart/mixed; boundary=\"BOUNDARY\"\nMIME-Version: 1.0\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" + script + "\n--BOUNDARY--\n"
	mimeCRLF := strings.ReplaceAll(mimeA, "\n", "\r\n")
	mimeNoClose := strings.TrimSuffix(mimeA, "--BOUNDARY--\n")
	var outs [][]byte
	for _, ud := range []string{mimeA, mimeB, mimeCRLF, mimeNoClose, script} {
		out, err := Render(testInput(FamilyAL2, ud, nil))
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	for i := 1; i < len(outs); i++ {
		if !bytes.Equal(outs[0], outs[i]) {
			t.Errorf("input %d renders differently:\n%s\n---\n%s", i, outs[0], outs[i])
		}
	}
}

func TestCloudConfigKeepsItsType(t *testing.T) {
	for _, fam := range []string{FamilyAL2, FamilyAL2023, FamilyUbuntu} {
		out, err := Render(testInput(fam, "#cloud-config\npackages: [jq]\n", nil))
		if err != nil {
			t.Fatal(err)
		}
		parts, err := mime.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		if parts[0].MediaType() != "text/cloud-config" || string(parts[0].Body) != "#cloud-config\npackages: [jq]\n" {
			t.Errorf("%s: first part %q %q", fam, parts[0].ContentType(), parts[0].Body)
		}
	}
}

func TestMalformedUserMIME(t *testing.T) {
	for _, ud := range []string{
		"MIME-Version: 1.0\nContent-Type: text/plain\n\nhello\n",
		"MIME-Version: 1.0\nMIME_VERSION = 1.0\n\n--X\n\nhi\n",
		"Content-Type: multipart/mixed\n\n--X\n\nhi\n",
		"Content-Type: multipart/mixed; boundary=X\n\nno boundary here\n",
	} {
		for _, fam := range []string{FamilyAL2, FamilyAL2023, FamilyUbuntu} {
			_, err := Render(testInput(fam, ud, nil))
			if err == nil {
				t.Errorf("%s: want an error for %q", fam, ud)
			}
		}
	}
}

func TestAL2023RefusesUnknownCIDR(t *testing.T) {
	in := testInput(FamilyAL2023, "", nil)
	in.Cluster.ServiceCIDR = ""
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), ErrServiceCIDRUnknown.Error()) {
		t.Fatalf("want ErrServiceCIDRUnknown, got %v", err)
	}
}

func TestBottlerocketMerge(t *testing.T) {
	out, err := Render(testInput(FamilyBottlerocket, readInput(t, "settings.toml"), nil))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseTOML(string(out))
	if err != nil {
		t.Fatalf("output is not TOML: %v\n%s", err, out)
	}
	if _, ok := m["labels"]; ok {
		t.Errorf("top-level [labels] must be dropped")
	}
	s := m["settings"].(map[string]any)
	k := s["kubernetes"].(map[string]any)
	for key, want := range map[string]any{
		"api-server": "https://test-cluster", "cluster-name": "test-cluster", "cluster-certificate": testCA,
		"cloud-provider": "external", "max-pods": int64(234), "cluster-dns-ip": testDNS,
	} {
		if k[key] != want {
			t.Errorf("settings.kubernetes.%s = %v, want %v", key, k[key], want)
		}
	}
	if _, ok := k["unknown-setting"]; ok {
		t.Errorf("unknown-setting must be dropped")
	}
	if eh := k["eviction-hard"].(map[string]any); eh["memory.available"] != "3%" {
		t.Errorf("user eviction-hard must survive when the NodeClass sets none: %v", eh)
	}
	labels := k["node-labels"].(map[string]any)
	if labels["custom"] != "kept" || labels[karpv1.LabelCapacityType] != "on-demand" {
		t.Errorf("node-labels = %v", labels)
	}
	taints := k["node-taints"].(map[string]any)
	if len(taints) != 3 || taints["replace"] != nil {
		t.Errorf("node-taints must be replaced by Joiner's: %v", taints)
	}
	if got := taints[karpv1.TaintUnregisteredKey].([]any); len(got) != 1 || got[0] != ":NoExecute" {
		t.Errorf("unregistered taint = %v", got)
	}
	if s["network"].(map[string]any)["hostname"] != "kept.example" || s["ntp"] == nil {
		t.Errorf("settings.network / settings.ntp must survive: %v", s)
	}
	bc := s["bootstrap-containers"].(map[string]any)[BottlerocketBootstrapContainer].(map[string]any)
	if bc["source"] != DefaultBootstrapImage || bc["essential"] != true || bc["mode"] != "always" {
		t.Errorf("bootstrap container = %v", bc)
	}
	// Full kubelet block: the NodeClass wins over the user's eviction-hard;
	// podsPerCore is ignored by Bottlerocket; image GC as strings.
	out, err = Render(testInput(FamilyBottlerocket, readInput(t, "settings.toml"), fullKubelet()))
	if err != nil {
		t.Fatal(err)
	}
	m, _ = parseTOML(string(out))
	k = m["settings"].(map[string]any)["kubernetes"].(map[string]any)
	if eh := k["eviction-hard"].(map[string]any); eh["memory.available"] != "5%" {
		t.Errorf("eviction-hard = %v", eh)
	}
	if k["image-gc-high-threshold-percent"] != "85" || k["eviction-max-pod-grace-period"] != int64(180) ||
		k["cpu-cfs-quota-enforced"] != false || k["max-pods"] != int64(20) || k["cluster-dns-ip"] != "10.0.1.100" {
		t.Errorf("kubelet fields: %v", k)
	}
	if g := k["eviction-soft-grace-period"].(map[string]any); g["nodefs.available"] != "1m30s" {
		t.Errorf("eviction-soft-grace-period = %v", g)
	}
}

func TestBottlerocketInvalidTOMLNamesLine(t *testing.T) {
	_, err := Render(testInput(FamilyBottlerocket, "[settings.kubernetes]\nmax-pods = 10\nthis is not toml\n", nil))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("want an error naming line 3, got %v", err)
	}
	_, err = Render(testInput(FamilyBottlerocket, "settings = 5\n", nil))
	if err == nil || !strings.Contains(err.Error(), "settings must be a table") {
		t.Fatalf("want a table error, got %v", err)
	}
}

func TestWindows(t *testing.T) {
	out, err := Render(testInput(FamilyWindows2022, "Write-Host \"one\"\nWrite-Host \"two\"", nil))
	if err != nil {
		t.Fatal(err)
	}
	want := "<powershell>\nWrite-Host \"one\"\nWrite-Host \"two\"\n" +
		`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n" +
		`& $EKSBootstrapScriptFile -EKSClusterName 'test-cluster' -APIServerEndpoint 'https://test-cluster' -Base64ClusterCA 'Y2EtYnVuZGxlCg==' ` +
		`-KubeletExtraArgs '--node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,testing/cluster=unspecified" ` +
		`--register-with-taints="foo=bar:NoSchedule,baz=bin:NoExecute,karpenter.sh/unregistered:NoExecute" --max-pods=110' -DNSClusterIP '10.100.0.10'` +
		"\n</powershell>"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestAL2Flags(t *testing.T) {
	in := testInput(FamilyAL2, "", &awsv1.KubeletConfiguration{ClusterDNS: []string{"fd00::a"}})
	in.InstanceStorePolicy = "RAID0"
	in.Cluster.Name = "it's"
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		`/etc/eks/bootstrap.sh 'it'\''s' --apiserver-endpoint 'https://test-cluster' --b64-cluster-ca 'Y2EtYnVuZGxlCg==' \` + "\n--ip-family ipv6 \\\n--dns-cluster-ip 'fd00::a' \\\n--use-max-pods false \\\n--kubelet-extra-args '",
		"--max-pods=234' \\\n--local-disks raid0\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	if strings.Contains(s, "--container-runtime") {
		t.Errorf("--container-runtime must not be emitted")
	}
	facts, err := Parse(FamilyAL2, out)
	if err != nil || facts.ClusterDNS != "fd00::a" || facts.MaxPods != 234 {
		t.Errorf("Parse = %+v, %v", facts, err)
	}
}

func TestAL2IPv6WithoutDNS(t *testing.T) {
	in := testInput(FamilyUbuntu, "", nil)
	in.Cluster.ServiceCIDR, in.Cluster.IPFamily = "", "ipv6"
	out, err := Render(in)
	if err != nil || !bytes.Contains(out, []byte("\n--ip-family ipv6 \\\n--use-max-pods false")) || bytes.Contains(out, []byte("--dns-cluster-ip")) {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestFromNodeClaim: the kubelet labels of a NodeClaim's node are the
// claim's labels and the capacity type, as Karpenter passes them; a
// single-valued requirement on a well-known label (instance type, zone, a
// capacity reservation) adds none, one on a custom label only what a
// Karpenter NodeClaim carries already.
func TestFromNodeClaim(t *testing.T) {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "nc"
	nc.Spec.AMIFamily = ptr("al2023")
	nc.Spec.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0)
	claim := &karpv1.NodeClaim{}
	claim.Labels = map[string]string{karpv1.LabelNodePool: "p", karpv1.LabelNodeClass: "nc", karpv1.LabelCapacityType: "spot", "team": "a"}
	claim.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelInstanceType, Operator: karpv1.OpIn, Values: []string{"m5.large"}},
		{Key: karpv1.LabelZone, Operator: karpv1.OpIn, Values: []string{"us-west-2a"}},
		{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeReserved}},
		{Key: karpv1.LabelCapacityReservationID, Operator: karpv1.OpIn, Values: []string{"cr-0123"}},
		{Key: karpv1.LabelCapacityReservationType, Operator: karpv1.OpIn, Values: []string{"default"}},
		{Key: karpv1.LabelInstanceFamily, Operator: karpv1.OpIn, Values: []string{"m5"}},
		{Key: "workload", Operator: karpv1.OpIn, Values: []string{"batch"}},
		{Key: "team", Operator: karpv1.OpIn, Values: []string{"b"}}, // the claim's label stands
		{Key: "tier", Operator: karpv1.OpIn, Values: []string{"1", "2"}},
	}
	claim.Spec.Taints = []corev1.Taint{{Key: "t", Effect: corev1.TaintEffectNoSchedule}}
	in := FromNodeClaim(nc, claim, BuildOptions{Cluster: Cluster{Name: "c", Endpoint: "e", ServiceCIDR: testCIDR}, CapacityType: karpv1.CapacityTypeReserved,
		InstanceMaxPods: 29})
	want := map[string]string{karpv1.LabelNodePool: "p", karpv1.LabelNodeClass: "nc", karpv1.LabelCapacityType: karpv1.CapacityTypeReserved,
		"team": "a", "workload": "batch"}
	if !equalMaps(in.Labels, want) {
		t.Errorf("labels = %v, want %v", in.Labels, want)
	}
	if in.Family != FamilyAL2023 || in.InstanceStorePolicy != "RAID0" {
		t.Fatalf("input = %+v", in)
	}
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(FamilyAL2023, out)
	if err != nil || f.MaxPods != 29 || len(f.Taints) != 2 {
		t.Fatalf("facts %+v %v", f, err)
	}
	want[karpv1.LabelDoNotSync] = "true"
	if !equalMaps(f.Labels, want) {
		t.Errorf("kubelet labels = %v, want %v", f.Labels, want)
	}
	// Without a launch capacity type: the claim's, else the requirement's.
	if in := FromNodeClaim(nc, claim, BuildOptions{}); in.Labels[karpv1.LabelCapacityType] != "spot" {
		t.Errorf("capacity type %q, want the claim's spot", in.Labels[karpv1.LabelCapacityType])
	}
	delete(claim.Labels, karpv1.LabelCapacityType)
	if in := FromNodeClaim(nc, claim, BuildOptions{}); in.Labels[karpv1.LabelCapacityType] != karpv1.CapacityTypeReserved {
		t.Errorf("capacity type %q, want the requirement's reserved", in.Labels[karpv1.LabelCapacityType])
	}
}

func TestAgentDisabled(t *testing.T) {
	for _, fam := range []string{FamilyAL2, FamilyAL2023, FamilyUbuntu, FamilyBottlerocket} {
		in := testInput(fam, "", nil)
		in.AgentEnabled = false
		out, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out, []byte("joiner bootstrap")) || bytes.Contains(out, []byte(BottlerocketBootstrapContainer)) {
			t.Errorf("%s: hook present with the agent disabled:\n%s", fam, out)
		}
		if f, err := Parse(fam, out); err != nil || f.Agent {
			t.Errorf("%s: Parse = %+v, %v", fam, f, err)
		}
	}
}

func TestRAID0(t *testing.T) {
	for fam, want := range map[string]string{
		FamilyAL2023:       "strategy: RAID0",
		FamilyBottlerocket: "000-mount-instance-storage",
	} {
		in := testInput(fam, "", nil)
		in.InstanceStorePolicy = "RAID0"
		out, err := Render(in)
		if err != nil || !bytes.Contains(out, []byte(want)) {
			t.Errorf("%s: want %q, err %v\n%s", fam, want, err, out)
		}
	}
}

func TestCustomPassThrough(t *testing.T) {
	ud := "\r\n  arbitrary \x00 bytes\r\n--//\n"
	out, err := Render(testInput(FamilyCustom, ud, fullKubelet()))
	if err != nil || string(out) != ud {
		t.Fatalf("Custom: %q, %v", out, err)
	}
}

func TestUnknownFamily(t *testing.T) {
	if _, err := Render(Input{Family: "Gentoo"}); err == nil || !strings.Contains(err.Error(), "Gentoo") {
		t.Fatalf("want unknown family error, got %v", err)
	}
}

func TestEffectiveMaxPods(t *testing.T) {
	cases := []struct {
		family    string
		k         *awsv1.KubeletConfiguration
		eni, vcpu int32
		want      int32
	}{
		{FamilyAL2, nil, 29, 2, 29},
		{FamilyAL2, nil, 0, 2, 110},
		{FamilyWindows2022, nil, 29, 2, 110},
		{FamilyAL2023, &awsv1.KubeletConfiguration{MaxPods: ptr(int32(50))}, 29, 2, 50},
		{FamilyAL2023, &awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(4))}, 29, 2, 8},
		{FamilyAL2023, &awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(40))}, 29, 2, 29},
		{FamilyBottlerocket, &awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(4))}, 29, 2, 29},
		// A maxPods the NodeClass sets is kept as given (the kubelet
		// applies podsPerCore itself).
		{FamilyAL2023, &awsv1.KubeletConfiguration{MaxPods: ptr(int32(100)), PodsPerCore: ptr(int32(2))}, 234, 16, 100},
		{FamilyAL2, &awsv1.KubeletConfiguration{MaxPods: ptr(int32(100)), PodsPerCore: ptr(int32(2))}, 29, 2, 100},
	}
	for _, c := range cases {
		if got := EffectiveMaxPods(c.family, c.k, c.eni, c.vcpu); got != c.want {
			t.Errorf("%s %+v eni=%d vcpu=%d: %d, want %d", c.family, c.k, c.eni, c.vcpu, got, c.want)
		}
	}
}

func TestClusterDNSIP(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.100.0.0/16": "10.100.0.10", "172.20.0.0/16": "172.20.0.10", "10.0.0.5/24": "10.0.0.10",
		"fd00:1234::/108": "fd00:1234::a",
	} {
		if got, err := ClusterDNSIP(cidr); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", cidr, got, err, want)
		}
	}
	for _, bad := range []string{"", "nonsense", "10.0.0.0/30"} {
		if _, err := ClusterDNSIP(bad); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
}

func TestFromNodePool(t *testing.T) {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "default"
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
	nc.Spec.UserData = ptr("[settings]\n")
	nc.Annotations = map[string]string{karpv1.AnnotationAgent: "false"}
	np := &karpv1.NodePool{}
	np.Name = "pool"
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "a"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{"spot"}},
		{Key: "zone-ish", Operator: karpv1.OpIn, Values: []string{"a", "b"}},
		{Key: "single", Operator: karpv1.OpIn, Values: []string{"one"}},
		{Key: "notin", Operator: karpv1.OpNotIn, Values: []string{"x"}},
		// Well known: the NodeClaim Karpenter creates does not carry them.
		{Key: karpv1.LabelZone, Operator: karpv1.OpIn, Values: []string{"us-west-2a"}},
		{Key: karpv1.LabelInstanceFamily, Operator: karpv1.OpIn, Values: []string{"m5"}},
	}
	np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "s", Effect: corev1.TaintEffectNoSchedule}}
	in := FromNodePool(nc, np, BuildOptions{InstanceMaxPods: 29})
	if in.Family != FamilyBottlerocket || in.AgentEnabled || in.UserData != "[settings]\n" || in.MaxPods != 29 {
		t.Errorf("input = %+v", in)
	}
	want := map[string]string{"team": "a", karpv1.LabelNodePool: "pool", karpv1.LabelNodeClass: "default",
		karpv1.LabelCapacityType: "spot", "single": "one"}
	if !equalMaps(in.Labels, want) {
		t.Errorf("labels = %v, want %v", in.Labels, want)
	}
	nc.Annotations = nil
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-123"}}
	if in := FromNodePool(nc, np, BuildOptions{}); in.Family != FamilyCustom || !in.AgentEnabled {
		t.Errorf("family %s agent %v", in.Family, in.AgentEnabled)
	}
}

// TestBottlerocketKubernetesKeys: the user's settings.kubernetes keys that
// survive are exactly those Karpenter's typed settings know; the rest (and
// unknown fields of credential providers, static pods and the topology
// manager's policy options) are dropped, as Karpenter's decode drops them.
func TestBottlerocketKubernetesKeys(t *testing.T) {
	user := `[settings.kubernetes]
container-log-max-workers = 2
container-log-monitor-interval = '10s'
topology-manager-policy = 'best-effort'
hostname-override-source = 'private-dns-name'
single-process-oom-kill = true
authentication-mode = 'tls'
bootstrap-token = 'abcdef.0123456789abcdef'
memory-manager-reserved-memory = 'x'
provider-id = 'aws:///us-west-2a/i-0'
standalone-mode = true

[settings.kubernetes.topology-manager-policy-options]
prefer-closest-numa-nodes = true
max-allowable-numa-nodes = 8
made-up = 1

[settings.kubernetes.credential-providers.ecr-credential-provider]
enabled = true
cache-duration = '12h'
image-patterns = ['*.dkr.ecr.*.amazonaws.com']
environment = { AWS_PROFILE = 'x' }
made-up = 'dropped'

[settings.kubernetes.static-pods.my-pod]
enabled = true
manifest = 'YWJj'
made-up = 'dropped'
`
	out, err := Render(testInput(FamilyBottlerocket, user, nil))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseTOML(string(out))
	if err != nil {
		t.Fatalf("output is not TOML: %v\n%s", err, out)
	}
	k := m["settings"].(map[string]any)["kubernetes"].(map[string]any)
	for key, want := range map[string]any{
		"container-log-max-workers": int64(2), "container-log-monitor-interval": "10s", "topology-manager-policy": "best-effort",
		"hostname-override-source": "private-dns-name", "single-process-oom-kill": true,
	} {
		if k[key] != want {
			t.Errorf("settings.kubernetes.%s = %v, want %v (kept)", key, k[key], want)
		}
	}
	for _, key := range []string{"authentication-mode", "bootstrap-token", "memory-manager-reserved-memory", "provider-id", "standalone-mode"} {
		if v, ok := k[key]; ok {
			t.Errorf("settings.kubernetes.%s = %v, want it dropped (Karpenter's settings do not know it)", key, v)
		}
	}
	table := func(v any) map[string]any { m, _ := v.(map[string]any); return m }
	tm := table(k["topology-manager-policy-options"])
	if len(tm) != 2 || tm["prefer-closest-numa-nodes"] != true || tm["max-allowable-numa-nodes"] != int64(8) {
		t.Errorf("topology-manager-policy-options = %v, want the two known fields", tm)
	}
	cp := table(table(k["credential-providers"])["ecr-credential-provider"])
	if len(cp) != 4 || cp["cache-duration"] != "12h" || cp["made-up"] != nil {
		t.Errorf("credential provider = %v, want enabled, cache-duration, image-patterns, environment", cp)
	}
	sp := table(table(k["static-pods"])["my-pod"])
	if len(sp) != 2 || sp["manifest"] != "YWJj" {
		t.Errorf("static pod = %v, want enabled and manifest", sp)
	}
}

// TestSupportsDefaultBind: Karpenter's version table for the Bottlerocket
// releases that bind ephemeral storage to the default directories.
func TestSupportsDefaultBind(t *testing.T) {
	for v, want := range map[string]bool{
		"1.45.0": false, "1.46.0": true, "1.47.0": true, "2.0.0": true, "v1.45.0": false, "v1.46.0": true,
		"1.9.0": false, "latest": true, "invalid": false, "1": false, "": false, "1.46": false, "abc.def.ghi": false,
		"v1.46.*": true, "v2.x.0": false,
	} {
		if got := SupportsDefaultBind(v); got != want {
			t.Errorf("SupportsDefaultBind(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestBottlerocketVersion: the release is read from an alias term, else a
// name term, else the status AMI an id term selects, else any Bottlerocket
// status AMI (Karpenter's resolveAMIVersion cases).
func TestBottlerocketVersion(t *testing.T) {
	cases := []struct {
		name  string
		terms []awsv1.AMISelectorTerm
		amis  []awsv1.AMI
		want  string
	}{
		{"alias version", []awsv1.AMISelectorTerm{{Alias: "bottlerocket@v1.46.0"}}, nil, "v1.46.0"},
		{"alias latest", []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}, nil, "latest"},
		{"name", []awsv1.AMISelectorTerm{{Name: "bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a"}}, nil, "v1.46.0"},
		{"id with its status AMI", []awsv1.AMISelectorTerm{{ID: "ami-12345"}},
			[]awsv1.AMI{{ID: "ami-99999", Name: "bottlerocket-aws-k8s-1.33-x86_64-v1.40.0-aaa"}, {ID: "ami-12345", Name: "bottlerocket-aws-k8s-1.33-x86_64-v1.47.0-abc123"}}, "v1.47.0"},
		{"any status AMI", []awsv1.AMISelectorTerm{{Tags: map[string]string{"Environment": "prod"}}},
			[]awsv1.AMI{{ID: "ami-1", Name: "custom-image"}, {ID: "ami-67890", Name: "bottlerocket-aws-k8s-1.30-arm64-v2.0.1-def456"}}, "v2.0.1"},
		{"alias before name", []awsv1.AMISelectorTerm{{Name: "bottlerocket-aws-k8s-1.33-x86_64-v1.40.0-x"}, {Alias: "bottlerocket@v1.46.0"}}, nil, "v1.46.0"},
		{"none", []awsv1.AMISelectorTerm{{Name: "some-other-ami"}}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nc := &awsv1.EC2NodeClass{}
			nc.Spec.AMISelectorTerms, nc.Status.AMIs = c.terms, c.amis
			if got := BottlerocketVersion(nc); got != c.want {
				t.Errorf("BottlerocketVersion = %q, want %q", got, c.want)
			}
		})
	}
}

// TestBottlerocketRAID0Bind: with instanceStorePolicy RAID0, a release that
// binds ephemeral storage by itself ("latest", 1.46.0 and later) is told
// plain "bind"; an older or unknown one is given the directories, as
// Karpenter does. The user's bootstrap commands are kept next to it.
func TestBottlerocketRAID0Bind(t *testing.T) {
	const (
		plain = `commands = [['apiclient', 'ephemeral-storage', 'init'], ['apiclient', 'ephemeral-storage', 'bind']]`
		dirs  = `commands = [['apiclient', 'ephemeral-storage', 'init'], ['apiclient', 'ephemeral-storage', 'bind', '--dirs', '/var/lib/containerd', '/var/lib/kubelet', '/var/log/pods']]`
	)
	cases := []struct {
		name  string
		terms []awsv1.AMISelectorTerm
		want  string
	}{
		{"latest", []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}, plain},
		{"v1.46.0", []awsv1.AMISelectorTerm{{Alias: "bottlerocket@v1.46.0"}}, plain},
		{"v1.45.0", []awsv1.AMISelectorTerm{{Alias: "bottlerocket@v1.45.0"}}, dirs},
		{"name v1.50.2", []awsv1.AMISelectorTerm{{Name: "bottlerocket-aws-k8s-1.34-x86_64-v1.50.2-*"}}, plain},
		{"unknown", []awsv1.AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}, dirs},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nc := &awsv1.EC2NodeClass{}
			nc.Name = "br"
			nc.Spec.AMIFamily = ptr(FamilyBottlerocket)
			nc.Spec.AMISelectorTerms = c.terms
			nc.Spec.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0)
			nc.Spec.UserData = ptr("[settings.bootstrap-commands.111-say-hello]\ncommands = [['echo', 'hello']]\nmode = 'always'\nessential = true\n")
			np := &karpv1.NodePool{}
			np.Name = "pool"
			out, err := Render(FromNodePool(nc, np, BuildOptions{Cluster: Cluster{Name: "c", Endpoint: "https://c", ServiceCIDR: testCIDR}}))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"[settings.bootstrap-commands.000-mount-instance-storage]\n" + c.want + "\n",
				"[settings.bootstrap-commands.111-say-hello]\ncommands = [['echo', 'hello']]\n"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("want\n%s\nin\n%s", want, out)
				}
			}
		})
	}
}

// TestPodsPerCoreWithMaxPods: a NodeClass that sets both podsPerCore and
// maxPods gets both in the kubelet configuration, maxPods as given
// (Karpenter's "should specify podsPerCore with maxPods enabled").
func TestPodsPerCoreWithMaxPods(t *testing.T) {
	k := &awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(2)), MaxPods: ptr(int32(100))}
	out, err := Render(testInput(FamilyAL2023, "", k)) // 16 vCPUs: podsPerCore allows 32
	if err != nil {
		t.Fatal(err)
	}
	parts, err := mime.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ParseNodeConfig(parts[len(parts)-1].Body)
	if err != nil {
		t.Fatal(err)
	}
	if nc.Spec.Kubelet.Config["podsPerCore"] != 2 || nc.Spec.Kubelet.Config["maxPods"] != 100 {
		t.Errorf("kubelet config podsPerCore %v maxPods %v, want 2 and 100", nc.Spec.Kubelet.Config["podsPerCore"], nc.Spec.Kubelet.Config["maxPods"])
	}
	out, err = Render(testInput(FamilyAL2, "", k))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("--max-pods=100 --pods-per-core=2")) {
		t.Errorf("AL2 kubelet args lack --max-pods=100 --pods-per-core=2:\n%s", out)
	}
	// Read back, the kubelet registers the lower of the two (Bottlerocket
	// ignores podsPerCore).
	for fam, want := range map[string][2]int32{FamilyAL2: {32, 100}, FamilyAL2023: {32, 100}, FamilyUbuntu: {32, 100},
		FamilyWindows2022: {32, 100}, FamilyBottlerocket: {100, 100}} {
		out, err := Render(testInput(fam, "", k))
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(fam, out)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]int32{f.PodCapacity(16), f.PodCapacity(64)}; f.MaxPods != 100 || got != want {
			t.Errorf("%s: maxPods %d, pod capacity on 16 and 64 vCPUs %v, want 100 and %v", fam, f.MaxPods, got, want)
		}
	}
}

// TestUserMIMEAsKarpenterReadsIt: the user's MIME archive is read as Go's
// multipart reader (Karpenter's) reads it: quoted-printable parts arrive
// decoded without their Content-Transfer-Encoding header, and an archive
// ending with a delimiter instead of the closing one (Karpenter's AL2023
// MIME example) yields only the user's parts.
func TestUserMIMEAsKarpenterReadsIt(t *testing.T) {
	const open = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n" +
		"--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 42\n" +
		"--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho \"Hello, AL2023!\"\n--//\n"
	const qp = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n" +
		"--B\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\nContent-Transfer-Encoding: quoted-printable\nX-Note: kept on AL2\n\n" +
		"#!/bin/bash\necho x=3Dy a long line =\ncontinued\n--B--\n"
	for _, fam := range []string{FamilyAL2, FamilyAL2023} {
		t.Run(fam, func(t *testing.T) {
			out, err := Render(testInput(fam, open, nil))
			if err != nil {
				t.Fatal(err)
			}
			parts, err := mime.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			// The user's two parts, the hook, Joiner's part.
			if len(parts) != 4 || parts[1].MediaType() != "text/x-shellscript" || !strings.Contains(string(parts[1].Body), "Hello, AL2023!") {
				t.Errorf("parts of an archive without its closing delimiter: %q", parts)
			}
			out, err = Render(testInput(fam, qp, nil))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(out, []byte("Content-Transfer-Encoding")) {
				t.Errorf("Content-Transfer-Encoding header kept:\n%s", out)
			}
			if !bytes.Contains(out, []byte("\n\n#!/bin/bash\necho x=y a long line continued\n--//\n")) {
				t.Errorf("quoted-printable part not decoded:\n%s", out)
			}
			if got := bytes.Contains(out, []byte("X-Note: kept on AL2\n")); got != (fam == FamilyAL2) {
				t.Errorf("other part headers kept = %v, want %v (AL2 keeps them, AL2023 only Content-Type)", got, fam == FamilyAL2)
			}
		})
	}
}
