package crds

// Karpenter AWS provider v1.14.1: pkg/apis/v1/ec2nodeclass_validation_cel_test.go
// and nodepool_validation_cel_test.go, case by case.

import (
	"fmt"
	"strings"
	"testing"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// nodeClass is the EC2NodeClass of the suite's BeforeEach.
func nodeClass(edits ...edit) obj {
	return build(obj{
		"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": obj{},
		"spec": obj{
			"amiFamily":                  "AL2023",
			"amiSelectorTerms":           list(obj{"alias": "al2023@latest"}),
			"role":                       "role-1",
			"securityGroupSelectorTerms": list(obj{"tags": tags("*", "*")}),
			"subnetSelectorTerms":        list(obj{"tags": tags("*", "*")}),
		},
	}, edits)
}

func specSet(field string, v any) edit { return set("spec."+field, v) }

// terms sets a list of selector terms (an empty list is written, as
// Karpenter's client writes a non-nil empty slice without omitempty).
func terms(field string, ts ...any) edit { return specSet(field, append([]any{}, ts...)) }

func kubelet(k obj) edit { return specSet("kubelet", k) }

// mapOf writes pairs as a map, keeping values as given.
func mapOf(kv ...any) obj {
	m := obj{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

var allSignals = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}

func validEvictionSoft() edit {
	return kubelet(obj{
		"evictionSoft": tags("memory.available", "5%", "nodefs.available", "10%", "nodefs.inodesFree", "15%",
			"imagefs.available", "5%", "imagefs.inodesFree", "5%", "pid.available", "5%"),
		"evictionSoftGracePeriod": tags("memory.available", "1m0s", "nodefs.available", "1m30s", "nodefs.inodesFree", "5m0s",
			"imagefs.available", "1h0m0s", "imagefs.inodesFree", "24h0m0s", "pid.available", "1m0s"),
	})
}

func bdm(device, size string, root bool, ebs ...any) obj {
	e := obj{"volumeSize": size}
	for i := 0; i+1 < len(ebs); i += 2 {
		e[ebs[i].(string)] = ebs[i+1]
	}
	m := obj{"deviceName": device, "ebs": e}
	if root {
		m["rootVolume"] = true
	}
	return m
}

func nic(card, device int, typ string) obj {
	return obj{"networkCardIndex": card, "deviceIndex": device, "interfaceType": typ}
}

func ec2NodeClassCases() []kcase {
	var cases []kcase
	add := func(c ...kcase) { cases = append(cases, c...) }
	add(
		admits("should succeed if just specifying role", nodeClass()),
		admits("should succeed if just specifying instance profile", nodeClass(del("spec.role"), specSet("instanceProfile", "test-instance-profile"))),
		rejects("should fail if specifying both instance profile and role", nodeClass(specSet("instanceProfile", "test-instance-profile"))),
		rejects("should fail if not specifying one of instance profile and role", nodeClass(del("spec.role"))),
		admits("UserData/should succeed if user data is empty", nodeClass()),
	)

	const a = "AMIFamily/"
	families := []string{awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023, awsv1.AMIFamilyBottlerocket, awsv1.AMIFamilyWindows2019,
		awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025, awsv1.AMIFamilyCustom}
	byID := terms("amiSelectorTerms", obj{"id": "ami-0123456789abcdef"})
	for _, f := range families {
		add(admits(a+"should succeed with valid families/"+f, nodeClass(byID, specSet("amiFamily", f))))
	}
	add(rejects(a+"should fail with the ubuntu family", nodeClass(byID, specSet("amiFamily", awsv1.AMIFamilyUbuntu))))
	withAlias := func(family, alias string) obj {
		return nodeClass(terms("amiSelectorTerms", obj{"alias": alias}), specSet("amiFamily", family))
	}
	named := families[:len(families)-1] // all but Custom
	for _, f := range named {
		alias := strings.ToLower(f) + "@latest"
		add(admits(fmt.Sprintf("%sshould succeed when the amiFamily matches amiSelectorTerms[].alias/family %q with alias %q", a, f, alias), withAlias(f, alias)))
	}
	for _, f := range named {
		alias := strings.ToLower(f) + "@latest"
		add(admits(fmt.Sprintf("%sshould succeed when the amiFamily is custom with amiSelectorTerms[].alias/family \"Custom\" with alias %q", a, alias), withAlias(awsv1.AMIFamilyCustom, alias)))
	}
	for _, f := range named {
		for _, g := range named {
			if f == g {
				continue
			}
			alias := strings.ToLower(g) + "@latest"
			add(rejects(fmt.Sprintf("%sshould fail when then amiFamily does not match amiSelectorTerms[].alias/family %q with alias %q", a, f, alias), withAlias(f, alias)))
		}
	}
	add(rejects(a+"should fail when neither amiFamily nor an alias are specified", nodeClass(terms("amiSelectorTerms", obj{"id": "ami-01234567890abcdef"}), del("spec.amiFamily"))))

	const tg = "Tags/"
	add(
		admits(tg+"should succeed when tags are empty", nodeClass()), // an empty map is left out (omitempty)
		admits(tg+"should succeed if tags aren't in restricted tag keys", nodeClass(specSet("tags", tags(
			"karpenter.sh/custom-key", "value", "karpenter.sh/managed", "true", "kubernetes.io/role/key", "value")))),
		rejects(tg+"should fail if tags contain a restricted domain key", each([]string{karpv1.LabelNodePool, "kubernetes.io/cluster/test",
			"eks:eks-cluster-name", karpv1.LabelNodeClass, "karpenter.sh/nodeclaim"},
			func(k string) obj { return nodeClass(specSet("tags", tags(k, "value"))) })...),
	)

	// Selector terms: subnets, security groups, capacity reservations.
	type sel struct{ ctx, field, id, kind string }
	for _, s := range []sel{
		{"SubnetSelectorTerms/", "subnetSelectorTerms", "subnet-12345749", "subnet"},
		{"SecurityGroupSelectorTerms/", "securityGroupSelectorTerms", "sg-12345749", "security group"},
		{"CapacityReservationSelectorTerms/", "capacityReservationSelectorTerms", "cr-12345749", "capacity reservation"},
	} {
		t := func(ts ...any) obj { return nodeClass(terms(s.field, ts...)) }
		add(
			admits(s.ctx+"should succeed with a valid "+s.kind+" selector on tags", t(obj{"tags": tags("test", "testvalue")})),
			admits(s.ctx+"should succeed with a valid "+s.kind+" selector on id", t(obj{"id": s.id})),
			rejects(s.ctx+"should fail when a "+s.kind+" selector term has no values", t(obj{})),
			// tags: {} is left out by omitempty: the term is empty.
			rejects(s.ctx+"should fail when a "+s.kind+" selector term has no tag map values", t(obj{})),
			rejects(s.ctx+"should fail when a "+s.kind+" selector term has a tag map key that is empty", t(obj{"tags": tags("test", "")})),
			rejects(s.ctx+"should fail when a "+s.kind+" selector term has a tag map value that is empty", t(obj{"tags": tags("", "testvalue")})),
			rejects(s.ctx+"should fail when the last "+s.kind+" selector is invalid", t(obj{"tags": tags("test", "testvalue")},
				obj{"tags": tags("test2", "testvalue2")}, obj{"tags": tags("test3", "testvalue3")}, obj{"tags": tags("", "testvalue4")})),
		)
		switch s.field {
		case "subnetSelectorTerms", "securityGroupSelectorTerms":
			add(
				rejects(s.ctx+"should fail when "+s.kind+" selector terms is set to nil", nodeClass(del("spec."+s.field))),
				rejects(s.ctx+"should fail when no "+s.kind+" selector terms exist", t()),
				rejects(s.ctx+"should fail when specifying id with tags", t(obj{"id": s.id, "tags": tags("test", "testvalue")})),
			)
		}
	}
	const sg = "SecurityGroupSelectorTerms/"
	add(
		admits(sg+"should succeed with a valid security group selector on name", nodeClass(terms("securityGroupSelectorTerms", obj{"name": "testname"}))),
		rejects(sg+"should fail when specifying id with name", nodeClass(terms("securityGroupSelectorTerms", obj{"id": "sg-12345749", "name": "my-security-group"}))),
		rejects(sg+"should fail when specifying name with tags", nodeClass(terms("securityGroupSelectorTerms", obj{"name": "my-security-group", "tags": tags("test", "testvalue")}))),
	)
	const cr = "CapacityReservationSelectorTerms/"
	crt := func(ts ...any) obj { return nodeClass(terms("capacityReservationSelectorTerms", ts...)) }
	add(
		admits(cr+"should succeed for a valid ownerID", crt(obj{"ownerID": "012345678901", "tags": tags("test", "testvalue")})),
		rejects(cr+"should fail with a capacity reservation selector on a malformed id", crt(obj{"id": "r-12345749"})),
		admits(cr+"should succeed when capacity group selector terms is set to nil", nodeClass()), // written as null: dropped
		rejects(cr+"should fail when specifying id with tags in a single term", crt(obj{"id": "cr-12345749", "tags": tags("test", "testvalue")})),
		rejects(cr+"should fail when specifying id with ownerID in a single term", crt(obj{"ownerID": "012345678901", "id": "cr-12345749"})),
		rejects(cr+"should fail when the ownerID is malformed", crt(obj{"ownerID": "01234567890", "tags": tags("test", "testvalue")})),
		rejects(cr+"should fail when the ownerID is set by itself", crt(obj{"ownerID": "012345678901"})),
		admits(cr+"should succeed with a valid instanceMatchCriteria 'open'", crt(obj{"instanceMatchCriteria": "open"})),
		admits(cr+"should succeed with a valid instanceMatchCriteria 'targeted'", crt(obj{"instanceMatchCriteria": "targeted"})),
		admits(cr+"should succeed with instanceMatchCriteria combined with tags", crt(obj{"instanceMatchCriteria": "open", "tags": tags("test", "testvalue")})),
		admits(cr+"should succeed with instanceMatchCriteria combined with ownerID and tags",
			crt(obj{"instanceMatchCriteria": "targeted", "ownerID": "012345678901", "tags": tags("test", "testvalue")})),
		rejects(cr+"should fail with invalid instanceMatchCriteria value", crt(obj{"instanceMatchCriteria": "invalid"})),
		rejects(cr+"should fail when specifying id with instanceMatchCriteria", crt(obj{"id": "cr-12345749", "instanceMatchCriteria": "open"})),
	)

	const am = "AMISelectorTerms/"
	ami := func(ts ...any) obj { return nodeClass(terms("amiSelectorTerms", ts...)) }
	add(
		admits(am+"should succeed with a valid ami selector on alias", ami(obj{"alias": "al2023@latest"})),
		admits(am+"should succeed with a valid ami selector on tags", ami(obj{"tags": tags("test", "testvalue")})),
		admits(am+"should succeed with a valid ami selector on id", ami(obj{"id": "ami-12345749"})),
		admits(am+"should succeed with a valid ami selector on name", ami(obj{"name": "testname"})),
		admits(am+"should succeed with a valid ami selector on name and owner", ami(obj{"name": "testname", "owner": "testowner"})),
		admits(am+"should succeed when an ami selector term has an owner key with tags", ami(obj{"owner": "testowner", "tags": tags("test", "testvalue")})),
		rejects(am+"should fail when a ami selector term has no values", ami(obj{})),
		rejects(am+"should fail when a ami selector term has no tag map values", ami(obj{})), // tags: {} left out
		rejects(am+"should fail when a ami selector term has a tag map key that is empty", ami(obj{"tags": tags("test", "")})),
		rejects(am+"should fail when a ami selector term has a tag map value that is empty", ami(obj{"tags": tags("", "testvalue")})),
		rejects(am+"should fail when the last ami selector is invalid", ami(obj{"tags": tags("test", "testvalue")},
			obj{"tags": tags("test2", "testvalue2")}, obj{"tags": tags("test3", "testvalue3")}, obj{"tags": tags("", "testvalue4")})),
	)
	others := []struct {
		name  string
		field string
		value any
	}{{"tags", "tags", tags("test", "testvalue")}, {"name", "name", "my-custom-ami"}, {"owner", "owner", "123456789"}}
	withOther := func(term obj, field string, v any) obj {
		term = deepCopy(term)
		term[field] = v
		return ami(term)
	}
	add(rejects(am+"should fail when specifying id with other fields/alias", withOther(obj{"id": "ami-1234749"}, "alias", "al2023@latest")))
	for _, o := range others {
		add(rejects(am+"should fail when specifying id with other fields/"+o.name, withOther(obj{"id": "ami-1234749"}, o.field, o.value)))
	}
	add(rejects(am+"should fail when specifying alias with other fields/id", withOther(obj{"alias": "al2023@latest"}, "id", "ami-1234749")))
	for _, o := range others {
		add(rejects(am+"should fail when specifying alias with other fields/"+o.name, withOther(obj{"alias": "al2023@latest"}, o.field, o.value)))
	}
	add(rejects(am+"should fail when specifying alias with other terms", ami(obj{"alias": "al2023@latest"}, obj{"id": "ami-1234749"})))
	for _, e := range []struct{ name, alias, family string }{
		{"al2 (latest)", "al2@latest", awsv1.AMIFamilyAL2}, {"al2 (pinned)", "al2@v20240625", awsv1.AMIFamilyAL2},
		{"al2023 (latest)", "al2023@latest", awsv1.AMIFamilyAL2023}, {"al2023 (pinned)", "al2023@v20240625", awsv1.AMIFamilyAL2023},
		{"bottlerocket (latest)", "bottlerocket@latest", awsv1.AMIFamilyBottlerocket}, {"bottlerocket (pinned)", "bottlerocket@1.10.0", awsv1.AMIFamilyBottlerocket},
		{"windows2019 (latest)", "windows2019@latest", awsv1.AMIFamilyWindows2019}, {"windows2022 (latest)", "windows2022@latest", awsv1.AMIFamilyWindows2022},
		{"windows2025 (latest)", "windows2025@latest", awsv1.AMIFamilyWindows2025},
	} {
		add(admits(am+"should succeed for valid aliases/"+e.name, nodeClass(specSet("amiFamily", e.family), terms("amiSelectorTerms", obj{"alias": e.alias}))))
	}
	for _, e := range []struct {
		name    string
		aliases []string
	}{{"missing family", []string{"@latest"}}, {"missing version", []string{"al2023", "al2023@"}}, {"invalid separator", []string{"al2023-latest"}}} {
		add(rejects(am+"should fail for incorrectly formatted aliases/"+e.name, each(e.aliases, func(a string) obj { return ami(obj{"alias": a}) })...))
	}
	add(rejects(am+"should fail for an alias with an invalid family", ami(obj{"alias": "ubuntu@latest"})))
	for _, e := range []struct{ name, alias string }{{"Windows2019", "windows2019@v1.0.0"}, {"Windows2022", "windows2022@v1.0.0"}, {"Windows2025", "windows2025@v1.0.0"}} {
		add(rejects(am+"should fail when specifying non-latest versions with Windows aliases/"+e.name, ami(obj{"alias": e.alias})))
	}

	const k = "Kubelet/"
	add(
		rejects(k+"should fail on kubeReserved with invalid keys", nodeClass(kubelet(obj{"kubeReserved": tags("pods", "2")}))),
		rejects(k+"should fail on systemReserved with invalid keys", nodeClass(kubelet(obj{"systemReserved": tags("pods", "2")}))),
	)
	const eh = k + "Eviction Signals/Eviction Hard/"
	hard := func(kv ...string) obj { return nodeClass(kubelet(obj{"evictionHard": tags(kv...)})) }
	add(
		admits(eh+"should succeed on evictionHard with valid keys", hard("memory.available", "5%", "nodefs.available", "10%", "nodefs.inodesFree", "15%",
			"imagefs.available", "5%", "imagefs.inodesFree", "5%", "pid.available", "5%")),
		rejects(eh+"should fail on evictionHard with invalid keys", hard("memory", "5%")),
		rejects(eh+"should fail on invalid formatted percentage value in evictionHard", hard("memory.available", "5%3")),
		rejects(eh+"should fail on invalid percentage value (too large) in evictionHard", hard("memory.available", "110%")),
		rejects(eh+"should fail on invalid quantity value in evictionHard", hard("memory.available", "110GB")),
	)
	const es = k + "Eviction Soft/"
	soft := func(key, value string) obj {
		return nodeClass(kubelet(obj{"evictionSoft": tags(key, value), "evictionSoftGracePeriod": tags(key, "1m0s")}))
	}
	add(
		admits(es+"should succeed on evictionSoft with valid keys", nodeClass(validEvictionSoft())),
		rejects(es+"should fail on evictionSoft with invalid keys", soft("memory", "5%")),
		rejects(es+"should fail on invalid formatted percentage value in evictionSoft", soft("memory.available", "5%3")),
		rejects(es+"should fail on invalid percentage value (too large) in evictionSoft", soft("memory.available", "110%")),
		rejects(es+"should fail on invalid quantity value in evictionSoft", soft("memory.available", "110GB")),
		rejects(es+"should fail when eviction soft doesn't have matching grace period", nodeClass(kubelet(obj{"evictionSoft": tags("memory.available", "200Mi")}))),
	)
	const gc = k + "GCThresholdPercent/"
	add(
		admits(gc+"should succeed on a valid imageGCHighThresholdPercent", nodeClass(kubelet(obj{"imageGCHighThresholdPercent": 10}))),
		rejects(gc+"should fail when imageGCHighThresholdPercent is less than imageGCLowThresholdPercent",
			nodeClass(kubelet(obj{"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}))),
		rejects(gc+"should fail when imageGCLowThresholdPercent is greather than imageGCHighThresheldPercent",
			nodeClass(kubelet(obj{"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}))),
	)
	const eg = k + "Eviction Soft Grace Period/"
	add(
		admits(eg+"should succeed on evictionSoftGracePeriod with valid keys", nodeClass(validEvictionSoft())),
		rejects(eg+"should fail on evictionSoftGracePeriod with invalid keys", nodeClass(kubelet(obj{"evictionSoftGracePeriod": tags("memory", "1m0s")}))),
		rejects(eg+"should fail when eviction soft grace period doesn't have matching threshold",
			nodeClass(kubelet(obj{"evictionSoftGracePeriod": tags("memory.available", "1m0s")}))),
	)

	const mo = "MetadataOptions/"
	meta := func(kv ...any) obj { return nodeClass(specSet("metadataOptions", mapOf(kv...))) }
	add(
		admits(mo+"should succeed for valid inputs", meta("httpEndpoint", "disabled", "httpProtocolIPv6", "enabled", "httpPutResponseHopLimit", 34, "httpTokens", "optional")),
		rejects(mo+"should fail for invalid for HTTPEndpoint", meta("httpEndpoint", "test")),
		rejects(mo+"should fail for invalid for HTTPProtocolIPv6", meta("httpProtocolIPv6", "test")),
		rejects(mo+"should fail for invalid for HTTPPutResponseHopLimit", meta("httpPutResponseHopLimit", -5)),
		rejects(mo+"should fail for invalid for HTTPTokens", meta("httpTokens", "test")),
	)

	const bd = "BlockDeviceMappings/"
	bdms := func(ms ...any) obj { return nodeClass(specSet("blockDeviceMappings", ms)) }
	add(
		admits(bd+"should succeed if more than one root volume is specified", bdms(bdm("map-device-1", "500G", true), bdm("map-device-2", "50T", false))),
		admits(bd+"should succeed for valid VolumeSize in G", bdms(bdm("map-device-1", "58G", false))),
		admits(bd+"should succeed for valid VolumeSize in T", bdms(bdm("map-device-1", "45T", false))),
		rejects(bd+"should fail if more than one root volume is specified", bdms(bdm("map-device-1", "50G", true), bdm("map-device-2", "50G", true))),
		rejects(bd+"should fail VolumeSize is less then 1Gi/1G", bdms(bdm("map-device-1", "1m", false))),
		rejects(bd+"should fail VolumeSize is greater then 64T", bdms(bdm("map-device-1", "100T", false))),
		rejects(bd+"should fail for VolumeSize that do not parse into quantity values", bdms(bdm("map-device-1", "0", false))),
		rejects(bd+"should fail if VolumeInitializationRate set but SnapshotID not specified", bdms(bdm("map-device-1", "0", false, "volumeInitializationRate", 100))),
		rejects(bd+"should fail if VolumeInitializationRate too low", bdms(bdm("map-device-1", "0", false, "snapshotID", "snap-1", "volumeInitializationRate", 99))),
		rejects(bd+"should fail if VolumeInitializationRate too high", bdms(bdm("map-device-1", "0", false, "snapshotID", "snap-1", "volumeInitializationRate", 888))),
	)

	const ni = "NetworkInterfaces/"
	nics := func(ns ...any) obj { return nodeClass(specSet("networkInterfaces", ns)) }
	add(
		admits(ni+"should succeed with valid multiple network interfaces", nics(nic(0, 0, "interface"), nic(0, 1, "efa-only"), nic(1, 0, "efa-only"), nic(1, 1, "interface"))),
		admits(ni+"should succeed when network interfaces is empty", nodeClass()), // an empty list is left out (omitempty)
		rejects(ni+"should fail with an invalid interface type", nics(nic(0, 0, "efa"))),
		rejects(ni+"should fail with a negative NetworkCardIndex", nics(nic(0, 0, "interface"), nic(-1, 0, "interface"))),
		rejects(ni+"should fail with a negative DeviceIndex", nics(nic(-1, 0, "interface"), nic(0, -1, "interface"))),
		rejects(ni+"should fail with duplicate Network Interface and Device Index fields",
			nics(nic(0, 0, "interface"), nic(0, 1, "efa-only"), nic(1, 0, "interface"), nic(1, 0, "efa-only"))),
		rejects(ni+"should fail with no primary network interface", nics(nic(0, 1, "interface"))),
		rejects(ni+"should fail when primary network interface is not ENA", nics(nic(0, 0, "efa-only"))),
		rejects(ni+"should fail when multiple EFA devices on one network card", nics(nic(0, 0, "interface"), nic(1, 0, "efa-only"), nic(1, 1, "efa-only"))),
	)

	const ct = "ConnectionTracking/"
	conn := func(kv ...any) obj { return nodeClass(specSet("connectionTracking", mapOf(kv...))) }
	add(
		rejects(ct+"should fail when connectionTracking is specified with no fields set", conn()),
		admits(ct+"should succeed with valid tcpEstablishedTimeout", conn("tcpEstablishedTimeout", 60)),
		admits(ct+"should succeed with valid udpStreamTimeout", conn("udpStreamTimeout", 120)),
		admits(ct+"should succeed with valid udpTimeout", conn("udpTimeout", 45)),
		admits(ct+"should succeed with all valid connection tracking settings", conn("tcpEstablishedTimeout", 432000, "udpStreamTimeout", 180, "udpTimeout", 60)),
		rejects(ct+"should fail when tcpEstablishedTimeout is below minimum (60s)", conn("tcpEstablishedTimeout", 59)),
		rejects(ct+"should fail when tcpEstablishedTimeout is above maximum (432000s)", conn("tcpEstablishedTimeout", 432001)),
		rejects(ct+"should fail when udpStreamTimeout is below minimum (60s)", conn("udpStreamTimeout", 59)),
		rejects(ct+"should fail when udpStreamTimeout is above maximum (180s)", conn("udpStreamTimeout", 181)),
		rejects(ct+"should fail when udpTimeout is below minimum (30s)", conn("udpTimeout", 29)),
		rejects(ct+"should fail when udpTimeout is above maximum (60s)", conn("udpTimeout", 61)),
	)

	const ri = "Role Immutability/"
	add(
		rejects(ri+"should fail if role is not defined", nodeClass(del("spec.role"))),
		admits(ri+"should succeed when updating the role", nodeClass(specSet("role", "test-role"))).updatedBy(specSet("role", "test-role2")),
		admits(ri+"should succeed to switch between an unmanaged and managed instance profile",
			nodeClass(del("spec.role"), specSet("instanceProfile", "test-instance-profile"))).
			updatedBy(func(o obj) { specSet("role", "test-role")(o); del("spec.instanceProfile")(o) }),
		admits(ri+"should succeed to switch between a managed and unmanaged instance profile", nodeClass(specSet("role", "test-role"))).
			updatedBy(func(o obj) { del("spec.role")(o); specSet("instanceProfile", "test-instance-profile")(o) }),
	)

	const co = "CPUOptions/"
	add(
		admits(co+"should succeed with nestedVirtualization enabled", nodeClass(specSet("cpuOptions", tags("nestedVirtualization", "enabled")))),
		admits(co+"should succeed with nestedVirtualization disabled", nodeClass(specSet("cpuOptions", tags("nestedVirtualization", "disabled")))),
		rejects(co+"should fail with invalid nestedVirtualization value", nodeClass(specSet("cpuOptions", tags("nestedVirtualization", "invalid")))),
		admits(co+"should succeed with empty CPUOptions", nodeClass(specSet("cpuOptions", obj{}))),
	)
	return cases
}

// awsPool is the NodePool of the AWS provider suite's BeforeEach.
func awsPool(edits ...edit) obj {
	return corePool(append([]edit{set("spec.template.spec.nodeClassRef", obj{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})}, edits...)...)
}

func awsNodePoolCases() []kcase {
	const r, l = "Requirements/", "Labels/"
	replace := func(values ...string) func(key string) obj {
		return func(key string) obj { return awsPool(poolReqs(req(key, "In", values...))) }
	}
	return []kcase{
		admits(r+"should allow well known label exceptions", each(without(karpv1.WellKnownLabels, karpv1.LabelNodePool, karpv1.LabelCapacityType, karpv1.LabelInstanceTenancy),
			func(key string) obj { return awsPool(poolReqs(req(key, "In", "test"))) })...),
		admits(r+"should fail validation with only invalid capacity types", replace("xspot")(karpv1.LabelCapacityType)).
			runtimeRejects("an In on capacity-type must name a known capacity type"),
		admits(r+"should pass validation with valid capacity types", replace(karpv1.CapacityTypeOnDemand)(karpv1.LabelCapacityType)),
		admits(r+"should fail open if invalid and valid capacity types are present", replace(karpv1.CapacityTypeOnDemand, "xspot")(karpv1.LabelCapacityType)),
		admits(r+"should fail validation with only invalid tenancy types", replace("xdedicated")(karpv1.LabelInstanceTenancy)).
			runtimeRejects("an In on instance-tenancy must name a known tenancy"),
		admits(r+"should pass validation with valid tenancy types", replace(karpv1.TenancyDefault)(karpv1.LabelInstanceTenancy)),
		admits(r+"should fail open if invalid and valid tenancy types are present", replace(karpv1.TenancyDefault, "xdedicated")(karpv1.LabelInstanceTenancy)),
		admits(l+"should allow well known label exceptions", each(without(karpv1.WellKnownLabels, karpv1.LabelNodePool),
			func(key string) obj { return awsPool(poolLabels(key, "test")) })...),
	}
}

func TestKarpenterEC2NodeClassValidationCEL(t *testing.T) {
	runSuite(t, "aws ec2nodeclass_validation_cel_test.go", 200, ec2NodeClassCases())
}

func TestKarpenterAWSNodePoolValidationCEL(t *testing.T) {
	runSuite(t, "aws nodepool_validation_cel_test.go", 8, awsNodePoolCases())
}
