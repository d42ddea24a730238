package cloudadapter

import (
	"maps"
	"slices"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// Freeze returns spec with the EC2NodeClass inputs of a launch filled in:
// subnets (one per zone, chosen by the caller, e.g. Provider.SubnetsByZone),
// security groups and instance profile from the resolution r, block devices,
// metadata options, detailed monitoring and tags from nc, and the rendered
// user data. The provisioner calls it once, before PlanCommit; everything is
// copied, so later changes to nc do not reach the frozen spec.
func Freeze(spec fsm.LaunchSpec, nc *awsv1.EC2NodeClass, r joineraws.Resolved, subnets map[string]string, userData []byte) fsm.LaunchSpec {
	spec.NodeClass = nc.Name
	spec.Subnets = maps.Clone(subnets)
	spec.SecurityGroupIDs = nil
	for _, g := range r.SecurityGroups {
		spec.SecurityGroupIDs = append(spec.SecurityGroupIDs, g.ID)
	}
	slices.Sort(spec.SecurityGroupIDs)
	spec.InstanceProfile = r.InstanceProfile
	spec.UserData = slices.Clone(userData)
	spec.BlockDevices = nil
	for _, m := range nc.Spec.BlockDeviceMappings {
		spec.BlockDevices = append(spec.BlockDevices, m.DeepCopy())
	}
	spec.MetadataOptions = nc.Spec.MetadataOptions.DeepCopy()
	spec.DetailedMonitoring = nc.Spec.DetailedMonitoring != nil && *nc.Spec.DetailedMonitoring
	spec.Tags = maps.Clone(nc.Spec.Tags)
	return spec
}
