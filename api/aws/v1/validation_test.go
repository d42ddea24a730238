package v1

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/yamltest"
)

func load(t *testing.T) *EC2NodeClass {
	t.Helper()
	return yamltest.Load[EC2NodeClass](t, "testdata/ec2nodeclass.yaml")
}

func p[T any](v T) *T { return &v }

func withAlias(alias string) func(*EC2NodeClass) {
	return func(nc *EC2NodeClass) {
		nc.Spec.AMIFamily = nil
		nc.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: alias}}
	}
}

func assertInvalid(t *testing.T, err error, field, value string) {
	t.Helper()
	if err == nil {
		t.Fatalf("valid, want an error at %s", field)
	}
	if !errors.Is(err, karpv1.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	for _, fe := range karpv1.FieldErrors(err) {
		if fe.Field == field && strings.Contains(fe.Detail, value) {
			if !strings.Contains(err.Error(), fe.Error()) {
				t.Errorf("Error() lacks the line %q", fe.Error())
			}
			return
		}
	}
	t.Errorf("no error at %s mentioning %q; got:\n%v", field, value, err)
}

func TestEC2NodeClassInvalid(t *testing.T) {
	kubelet := func(f func(*KubeletConfiguration)) func(*EC2NodeClass) {
		return func(nc *EC2NodeClass) { f(nc.Spec.Kubelet) }
	}
	cases := []struct {
		name   string
		mutate func(*EC2NodeClass)
		field  string
		value  string
	}{
		{"no ami terms", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms = nil }, "spec.amiSelectorTerms", "at least one term is required"},
		{"too many ami terms", func(nc *EC2NodeClass) {
			for len(nc.Spec.AMISelectorTerms) <= MaxSelectorTerms {
				nc.Spec.AMISelectorTerms = append(nc.Spec.AMISelectorTerms, AMISelectorTerm{Name: "x"})
			}
		}, "spec.amiSelectorTerms", "at most 30 terms, got 31"},
		{"empty ami term", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[1] = AMISelectorTerm{Owner: "self"} },
			"spec.amiSelectorTerms[1]", "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
		{"ami id with name", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[2].Name = "x" },
			"spec.amiSelectorTerms[2].id", `mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms (alias, tags, name, owner), got id "ami-123"`},
		{"ami id pattern", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[2].ID = "image-1" },
			"spec.amiSelectorTerms[2].id", `got "image-1"`},
		{"ami tag empty value", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Tags["environment"] = "" },
			"spec.amiSelectorTerms[0].tags[environment]", "empty tag keys or values aren't supported"},
		{"ami tag empty key", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Tags[""] = "x" },
			"spec.amiSelectorTerms[0].tags", `empty tag keys or values aren't supported, got key "" with value "x"`},
		{"alias with other terms", func(nc *EC2NodeClass) {
			nc.Spec.AMIFamily = nil
			nc.Spec.AMISelectorTerms[0] = AMISelectorTerm{Alias: "al2023@latest"}
		},
			"spec.amiSelectorTerms[0].alias", `combination of other amiSelectorTerms, got alias "al2023@latest" among 4 terms`},
		{"alias with tags", func(nc *EC2NodeClass) {
			nc.Spec.AMIFamily = nil
			nc.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "al2023@latest", Tags: map[string]string{"a": "b"}}}
		}, "spec.amiSelectorTerms[0].alias", `'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms (id, tags, name, owner), got alias "al2023@latest"`},
		{"alias format", withAlias("al2023"), "spec.amiSelectorTerms[0].alias", `'family@version', got "al2023"`},
		{"alias family", withAlias("ubuntu@latest"), "spec.amiSelectorTerms[0].alias", `got "ubuntu@latest"`},
		{"alias windows pinned", withAlias("windows2022@v20240101"), "spec.amiSelectorTerms[0].alias", `may only specify version 'latest', got "windows2022@v20240101"`},
		{"alias too long", withAlias("bottlerocket@v1.20.0-0123456789abcdef"), "spec.amiSelectorTerms[0].alias", "at most 30 characters"},
		{"amiFamily mismatches alias", func(nc *EC2NodeClass) { withAlias("bottlerocket@v1.20.0")(nc); nc.Spec.AMIFamily = p("AL2023") },
			"spec.amiFamily", `amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias, got "AL2023"`},
		{"amiFamily required", func(nc *EC2NodeClass) { nc.Spec.AMIFamily = nil }, "spec.amiFamily", "must specify amiFamily if amiSelectorTerms does not contain an alias"},
		{"amiFamily enum", func(nc *EC2NodeClass) { nc.Spec.AMIFamily = p("Ubuntu") }, "spec.amiFamily", `got "Ubuntu"`},
		{"no subnet terms", func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms = []SubnetSelectorTerm{} }, "spec.subnetSelectorTerms", "cannot be empty"},
		{"subnet id pattern", func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms[1].ID = "sn-1" }, "spec.subnetSelectorTerms[1].id", `got "sn-1"`},
		{"subnet id with tags in every term", func(nc *EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []SubnetSelectorTerm{{ID: "subnet-1", Tags: map[string]string{"a": "b"}}}
		}, "spec.subnetSelectorTerms", `'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term, got id "subnet-1"`},
		{"empty subnet term", func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms[0] = SubnetSelectorTerm{} },
			"spec.subnetSelectorTerms[0]", "expected at least one, got none, ['tags', 'id']"},
		{"too many subnet tags", func(nc *EC2NodeClass) {
			for i := 0; i < 21; i++ {
				nc.Spec.SubnetSelectorTerms[0].Tags[strings.Repeat("k", i+1)] = "v"
			}
		}, "spec.subnetSelectorTerms[0].tags", "at most 20 tags"},
		{"no security group terms", func(nc *EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms = nil }, "spec.securityGroupSelectorTerms", "cannot be empty"},
		{"security group id pattern", func(nc *EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms[2].ID = "group-1" },
			"spec.securityGroupSelectorTerms[2].id", `got "group-1"`},
		{"security group name with tags in every term", func(nc *EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []SecurityGroupSelectorTerm{{Name: "n", Tags: map[string]string{"a": "b"}}}
		}, "spec.securityGroupSelectorTerms", `'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term, got name "n"`},
		{"security group id with name in every term", func(nc *EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []SecurityGroupSelectorTerm{{ID: "sg-1", Name: "n"}, {ID: "sg-2", Tags: map[string]string{"a": "b"}}}
		}, "spec.securityGroupSelectorTerms", `'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term, got id "sg-1"`},
		{"capacity reservation id with owner in every term", func(nc *EC2NodeClass) {
			nc.Spec.CapacityReservationSelectorTerms = []CapacityReservationSelectorTerm{{ID: "cr-1", OwnerID: "123456789012"}}
		}, "spec.capacityReservationSelectorTerms", `'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term, got 1 terms`},
		{"capacity reservation terms empty", func(nc *EC2NodeClass) { nc.Spec.CapacityReservationSelectorTerms = []CapacityReservationSelectorTerm{} },
			"spec.capacityReservationSelectorTerms", `an empty list is rejected too`},
		{"placement group name and id", func(nc *EC2NodeClass) {
			nc.Spec.PlacementGroupSelector = &PlacementGroupSelector{Name: p("a"), ID: p("pg-1")}
		},
			"spec.placementGroupSelector", `'name' and 'id' are mutually exclusive, got name "a" and id "pg-1"`},
		{"placement group empty", func(nc *EC2NodeClass) { nc.Spec.PlacementGroupSelector = &PlacementGroupSelector{} },
			"spec.placementGroupSelector", `expected at least one, got none, ['name', 'id']`},
		{"placement group id", func(nc *EC2NodeClass) { nc.Spec.PlacementGroupSelector = &PlacementGroupSelector{ID: p("group-1")} },
			"spec.placementGroupSelector.id", `got "group-1"`},
		{"placement group empty name", func(nc *EC2NodeClass) { nc.Spec.PlacementGroupSelector = &PlacementGroupSelector{Name: p("")} },
			"spec.placementGroupSelector.name", `must not be empty`},
		{"network interfaces without primary", func(nc *EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: InterfaceTypeInterface}}
		}, "spec.networkInterfaces", `must include a primary interface`},
		{"network interfaces duplicate", func(nc *EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*NetworkInterface{{InterfaceType: InterfaceTypeInterface}, {InterfaceType: InterfaceTypeEFAOnly}}
		}, "spec.networkInterfaces[1]", `duplicate networkCardIndex and deviceIndex pairs: 0/0 is also [0]`},
		{"network interfaces two efa on a card", func(nc *EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*NetworkInterface{{InterfaceType: InterfaceTypeInterface}, {NetworkCardIndex: 1, InterfaceType: InterfaceTypeEFAOnly},
				{NetworkCardIndex: 1, DeviceIndex: 1, InterfaceType: InterfaceTypeEFAOnly}}
		}, "spec.networkInterfaces[2]", `at most one efa-only device per network card: card 1 also has [1]`},
		{"network interface type", func(nc *EC2NodeClass) { nc.Spec.NetworkInterfaces = []*NetworkInterface{{InterfaceType: "efa"}} },
			"spec.networkInterfaces[0].interfaceType", `got "efa"`},
		{"network interface negative index", func(nc *EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*NetworkInterface{{InterfaceType: InterfaceTypeInterface}, {NetworkCardIndex: -1, InterfaceType: InterfaceTypeInterface}}
		}, "spec.networkInterfaces[1].networkCardIndex", `got -1`},
		{"connection tracking empty", func(nc *EC2NodeClass) { nc.Spec.ConnectionTracking = &ConnectionTracking{} },
			"spec.connectionTracking", `at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set`},
		{"connection tracking udp", func(nc *EC2NodeClass) { nc.Spec.ConnectionTracking = &ConnectionTracking{UDPTimeout: p(int32(61))} },
			"spec.connectionTracking.udpTimeout", `between 30 and 60 seconds, got 61`},
		{"cpu options", func(nc *EC2NodeClass) { nc.Spec.CPUOptions = &CPUOptions{NestedVirtualization: p("on")} },
			"spec.cpuOptions.nestedVirtualization", `got "on"`},
		{"capacity reservation owner", func(nc *EC2NodeClass) { nc.Spec.CapacityReservationSelectorTerms[0].OwnerID = "12" },
			"spec.capacityReservationSelectorTerms[0].ownerID", `got "12"`},
		{"capacity reservation match criteria", func(nc *EC2NodeClass) { nc.Spec.CapacityReservationSelectorTerms[2].InstanceMatchCriteria = "any" },
			"spec.capacityReservationSelectorTerms[2].instanceMatchCriteria", `got "any"`},
		{"role and instance profile", func(nc *EC2NodeClass) { nc.Spec.InstanceProfile = p("profile") },
			"spec", `exactly one of ['role', 'instanceProfile'], got role "KarpenterNodeRole-my-cluster" and instanceProfile "profile"`},
		{"neither role nor instance profile", func(nc *EC2NodeClass) { nc.Spec.Role = "" }, "spec", "got neither"},
		{"empty instance profile", func(nc *EC2NodeClass) { nc.Spec.Role = ""; nc.Spec.InstanceProfile = p("") },
			"spec.instanceProfile", "cannot be empty"},
		{"tag cluster", func(nc *EC2NodeClass) { nc.Spec.Tags["kubernetes.io/cluster/my-cluster"] = "owned" },
			"spec.tags[kubernetes.io/cluster/my-cluster]", `got "kubernetes.io/cluster/my-cluster"`},
		{"tag eks cluster name", func(nc *EC2NodeClass) { nc.Spec.Tags["eks:eks-cluster-name"] = "c" },
			"spec.tags[eks:eks-cluster-name]", "restricted"},
		{"tag nodepool", func(nc *EC2NodeClass) { nc.Spec.Tags["karpenter.sh/nodepool"] = "c" }, "spec.tags[karpenter.sh/nodepool]", "restricted"},
		{"tag nodeclaim", func(nc *EC2NodeClass) { nc.Spec.Tags["karpenter.sh/nodeclaim"] = "c" }, "spec.tags[karpenter.sh/nodeclaim]", "restricted"},
		{"tag ec2nodeclass", func(nc *EC2NodeClass) { nc.Spec.Tags["karpenter.k8s.aws/ec2nodeclass"] = "c" },
			"spec.tags[karpenter.k8s.aws/ec2nodeclass]", "restricted"},
		{"tag joiner", func(nc *EC2NodeClass) { nc.Spec.Tags["joiner.io/launch-id"] = "c" }, "spec.tags[joiner.io/launch-id]", `got "joiner.io/launch-id"`},
		{"tag empty key", func(nc *EC2NodeClass) { nc.Spec.Tags[""] = "c" }, "spec.tags[]", "empty tag keys"},
		{"kubelet reserved key", kubelet(func(k *KubeletConfiguration) { k.SystemReserved["gpu"] = "1" }),
			"spec.kubelet.systemReserved[gpu]", `got "gpu"`},
		{"kubelet reserved negative", kubelet(func(k *KubeletConfiguration) { k.KubeReserved["cpu"] = "-100m" }),
			"spec.kubelet.kubeReserved[cpu]", `got "-100m"`},
		{"kubelet reserved not a quantity", kubelet(func(k *KubeletConfiguration) { k.KubeReserved["memory"] = "lots" }),
			"spec.kubelet.kubeReserved[memory]", `got "lots"`},
		{"kubelet eviction key", kubelet(func(k *KubeletConfiguration) { k.EvictionHard["memory.free"] = "5%" }),
			"spec.kubelet.evictionHard[memory.free]", `got "memory.free"`},
		{"kubelet eviction value", kubelet(func(k *KubeletConfiguration) { k.EvictionHard["memory.available"] = "110%" }),
			"spec.kubelet.evictionHard[memory.available]", `got "110%"`},
		{"kubelet evictionSoft without grace", kubelet(func(k *KubeletConfiguration) { k.EvictionSoft["imagefs.available"] = "10%" }),
			"spec.kubelet.evictionSoft[imagefs.available]", "does not have a matching evictionSoftGracePeriod"},
		{"kubelet grace without evictionSoft", kubelet(func(k *KubeletConfiguration) { delete(k.EvictionSoft, "nodefs.available") }),
			"spec.kubelet.evictionSoftGracePeriod[nodefs.available]", "does not have a matching evictionSoft"},
		{"kubelet grace negative", kubelet(func(k *KubeletConfiguration) {
			k.EvictionSoftGracePeriod["memory.available"] = yamltest.Must(karpv1.ParseDuration("-1m"))
		}),
			"spec.kubelet.evictionSoftGracePeriod[memory.available]", `got "-1m"`},
		{"kubelet grace Never", kubelet(func(k *KubeletConfiguration) { k.EvictionSoftGracePeriod["memory.available"] = karpv1.NeverDuration() }),
			"spec.kubelet.evictionSoftGracePeriod[memory.available]", `got "Never"`},
		{"kubelet imageGC high not above low", kubelet(func(k *KubeletConfiguration) { k.ImageGCHighThresholdPercent = p(int32(80)) }),
			"spec.kubelet.imageGCHighThresholdPercent", "greater than imageGCLowThresholdPercent (80), got 80"},
		{"kubelet imageGC range", kubelet(func(k *KubeletConfiguration) { k.ImageGCLowThresholdPercent = p(int32(-1)) }),
			"spec.kubelet.imageGCLowThresholdPercent", "between 0 and 100, got -1"},
		{"kubelet maxPods", kubelet(func(k *KubeletConfiguration) { k.MaxPods = p(int32(-1)) }), "spec.kubelet.maxPods", "got -1"},
		{"kubelet podsPerCore", kubelet(func(k *KubeletConfiguration) { k.PodsPerCore = p(int32(-2)) }), "spec.kubelet.podsPerCore", "got -2"},
		{"kubelet clusterDNS", kubelet(func(k *KubeletConfiguration) { k.ClusterDNS = []string{"dns.local"} }),
			"spec.kubelet.clusterDNS[0]", `got "dns.local"`},
		{"two root volumes", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[1].RootVolume = true },
			"spec.blockDeviceMappings[1].rootVolume", "only one"},
		{"ebs without size or snapshot", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = nil },
			"spec.blockDeviceMappings[0].ebs", "snapshotID or volumeSize must be defined"},
		{"ebs volume type", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].EBS.VolumeType = p("gp4") },
			"spec.blockDeviceMappings[0].ebs.volumeType", `got "gp4"`},
		{"ebs size too big", func(nc *EC2NodeClass) {
			q := resource.MustParse("60000Gi")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		},
			"spec.blockDeviceMappings[0].ebs.volumeSize", `got "60000Gi"`},
		{"ebs size without unit", func(nc *EC2NodeClass) {
			q := resource.MustParse("100")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		},
			"spec.blockDeviceMappings[0].ebs.volumeSize", `got "100"`},
		{"ebs size too small", func(nc *EC2NodeClass) {
			q := resource.MustParse("1m")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		},
			"spec.blockDeviceMappings[0].ebs.volumeSize", `got "1m"`},
		{"ebs init rate range", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[1].EBS.VolumeInitializationRate = p(int32(301)) },
			"spec.blockDeviceMappings[1].ebs.volumeInitializationRate", "between 100 and 300 MiB/s, got 301"},
		{"ebs init rate without snapshot", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].EBS.VolumeInitializationRate = p(int32(150)) },
			"spec.blockDeviceMappings[0].ebs.volumeInitializationRate", "snapshotID must be set"},
		{"null block device mapping", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[1] = nil }, "spec.blockDeviceMappings[1]", "null"},
		{"metadata endpoint", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPEndpoint = p("on") },
			"spec.metadataOptions.httpEndpoint", `got "on"`},
		{"metadata ipv6", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPProtocolIPv6 = p("yes") },
			"spec.metadataOptions.httpProtocolIPv6", `got "yes"`},
		{"metadata tokens", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPTokens = p("maybe") },
			"spec.metadataOptions.httpTokens", `got "maybe"`},
		{"metadata hop limit", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPPutResponseHopLimit = p(int64(65)) },
			"spec.metadataOptions.httpPutResponseHopLimit", "between 1 and 64, got 65"},
		{"instance store policy", func(nc *EC2NodeClass) { nc.Spec.InstanceStorePolicy = p(InstanceStorePolicy("RAID1")) },
			"spec.instanceStorePolicy", `got "RAID1"`},
		{"ip prefix count", func(nc *EC2NodeClass) { nc.Spec.IPPrefixCount = p(int32(-1)) }, "spec.ipPrefixCount", "got -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := load(t)
			tc.mutate(nc)
			assertInvalid(t, nc.Validate(), tc.field, tc.value)
		})
	}
	t.Logf("%d invalid EC2NodeClass cases", len(cases))
}

func TestAliasValid(t *testing.T) {
	for _, a := range []string{"al2@latest", "al2023@v20240625", "bottlerocket@v1.20.0", "windows2019@latest", "windows2022@latest", "windows2025@latest"} {
		nc := load(t)
		withAlias(a)(nc)
		if err := nc.Validate(); err != nil {
			t.Errorf("%s: %v", a, err)
		}
		nc.Spec.AMIFamily = p(AMIFamilyCustom)
		if err := nc.Validate(); err != nil {
			t.Errorf("%s with amiFamily Custom: %v", a, err)
		}
	}
}

func TestWellKnownLabelsAllowedInRequirements(t *testing.T) {
	for k := range karpv1.WellKnownLabels {
		if k == karpv1.LabelNodePool {
			continue
		}
		if why := karpv1.RestrictedLabel(k); why != "" {
			t.Errorf("%s: %s", k, why)
		}
	}
	if why := karpv1.CRDLabelRestriction(karpv1.LabelNodeClass, true); why != "" {
		t.Errorf("%s: %s", karpv1.LabelNodeClass, why)
	}
}

// Values the CRD accepts (Karpenter's rules, some looser than they look).
func TestEC2NodeClassValidLikeKarpenter(t *testing.T) {
	cases := map[string]func(*EC2NodeClass){
		"unanchored subnet id": func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms[1].ID = "xsubnet-1" },
		"id with tags in one term of two": func(nc *EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms[1].Tags = map[string]string{"a": "b"}
		},
		"empty selector tags": func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms[0].Tags = map[string]string{} },
		"negative evictionMaxPodGracePeriod": func(nc *EC2NodeClass) {
			nc.Spec.Kubelet.EvictionMaxPodGracePeriod = p(int32(-1))
		},
		"empty evictionHard value": func(nc *EC2NodeClass) { nc.Spec.Kubelet.EvictionHard["memory.available"] = "" },
		"volume size 58Ti": func(nc *EC2NodeClass) {
			q := resource.MustParse("58Ti")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		},
		"volume size 64000G": func(nc *EC2NodeClass) {
			q := resource.MustParse("64000G")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		},
		"empty cpu options": func(nc *EC2NodeClass) { nc.Spec.CPUOptions = &CPUOptions{} },
		"efa interfaces": func(nc *EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*NetworkInterface{{InterfaceType: InterfaceTypeInterface}, {DeviceIndex: 1, InterfaceType: InterfaceTypeEFAOnly},
				{NetworkCardIndex: 1, InterfaceType: InterfaceTypeEFAOnly}, {NetworkCardIndex: 1, DeviceIndex: 1, InterfaceType: InterfaceTypeInterface}}
		},
	}
	for name, mutate := range cases {
		nc := load(t)
		mutate(nc)
		if err := nc.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestEC2NodeClassDefaults(t *testing.T) {
	nc := EC2NodeClass{Spec: EC2NodeClassSpec{AMISelectorTerms: []AMISelectorTerm{{Alias: "bottlerocket@latest"}}}}
	nc.SetDefaults()
	m := nc.Spec.MetadataOptions
	if m == nil || *m.HTTPEndpoint != "enabled" || *m.HTTPProtocolIPv6 != "disabled" || *m.HTTPPutResponseHopLimit != 1 || *m.HTTPTokens != "required" {
		t.Errorf("metadataOptions = %+v", m)
	}
	if nc.Spec.AMIFamily == nil || *nc.Spec.AMIFamily != AMIFamilyBottlerocket {
		t.Errorf("amiFamily = %v, want Bottlerocket from the alias", nc.Spec.AMIFamily)
	}
	partial := EC2NodeClass{Spec: EC2NodeClassSpec{AMIFamily: p(AMIFamilyCustom), MetadataOptions: &MetadataOptions{HTTPPutResponseHopLimit: p(int64(2))},
		AMISelectorTerms: []AMISelectorTerm{{Alias: "al2023@latest"}}}}
	partial.SetDefaults()
	if m := partial.Spec.MetadataOptions; *m.HTTPPutResponseHopLimit != 2 || *m.HTTPTokens != "required" || *m.HTTPEndpoint != "enabled" {
		t.Errorf("partial metadataOptions = %+v", m)
	}
	if *partial.Spec.AMIFamily != AMIFamilyCustom {
		t.Errorf("amiFamily Custom must be kept, got %s", *partial.Spec.AMIFamily)
	}
	if got := partial.AMIFamily(); got != AMIFamilyCustom {
		t.Errorf("AMIFamily() = %s", got)
	}
}
