package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/joiner-dev/joiner/cloud/catalog"
)

// This file reads the launch template data the sim honours beyond image,
// user data and security groups, as EC2's Query API names it
// (LaunchTemplateData.NetworkInterface.N.*, .CpuOptions, .Placement,
// .MetadataOptions, .CapacityReservationSpecification), refuses malformed
// values with EC2's error codes, and checks each launch against the
// instance type the way EC2 does.

// netIface is one LaunchTemplateData.NetworkInterface.N.
type netIface struct {
	CardIndex, DeviceIndex int
	hasDevice              bool
	// Type: "" (interface), interface, efa or efa-only.
	Type     string
	SGs      []string
	PublicIP *bool
	// V4Prefixes and V6Prefixes are Ipv4PrefixCount and Ipv6PrefixCount
	// (-1 when unset).
	V4Prefixes, V6Prefixes int
	PrimaryV6              bool
	V6Addresses            int
	ConnTrack              *connTrack
}

// connTrack is a ConnectionTrackingSpecification (0: EC2's default).
type connTrack struct {
	TCPEstablished, UDPStream, UDP int
}

// ltPlacement is LaunchTemplateData.Placement.
type ltPlacement struct {
	GroupID, GroupName string
	Partition          int
	Tenancy            string
}

// ltExtra is what a launch template says beyond image, user data and
// instance-level security groups.
type ltExtra struct {
	NIs          []netIface
	Placement    ltPlacement
	NestedVirt   string // CpuOptions.NestedVirtualization
	MetadataIPv6 string // MetadataOptions.HttpProtocolIpv6
	// CapResPreference is CapacityReservationSpecification.
	// CapacityReservationPreference, CapResTarget its
	// CapacityReservationTarget.CapacityReservationId.
	CapResPreference, CapResTarget string
	// MarketType is InstanceMarketOptions.MarketType.
	MarketType string
}

func oneOf(field, v string, allowed ...string) *apiError {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return badParam("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Valid values: %s", v, field, strings.Join(allowed, ", "))
}

// intParam reads an optional integer parameter (-1 when absent).
func intParam(r Request, key string) (int, *apiError) {
	v := r.Get(key)
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badParam("InvalidParameterValue", "Value (%s) for parameter %s is invalid", v, key)
	}
	return n, nil
}

func inRange(field string, n, lo, hi int) *apiError {
	if n >= 0 && (n < lo || n > hi) {
		return badParam("InvalidParameterValue", "Value (%d) for parameter %s is invalid. It must be between %d and %d", n, field, lo, hi)
	}
	return nil
}

// parseLaunchData reads and checks the launch template data's network
// interfaces, CPU, placement, metadata and capacity reservation options.
func (s *Sim) parseLaunchData(data Request) (ltExtra, *apiError) {
	var x ltExtra
	for i, n := range data.Sub("NetworkInterface") {
		field := fmt.Sprintf("LaunchTemplateData.NetworkInterface.%d", i+1)
		ni := netIface{Type: n.Get("InterfaceType"), SGs: n.Strings("SecurityGroupId")}
		if err := oneOf(field+".InterfaceType", ni.Type, "interface", "efa", "efa-only", "trunk"); err != nil {
			return x, err
		}
		var err *apiError
		if ni.DeviceIndex, err = intParam(n, "DeviceIndex"); err != nil {
			return x, err
		}
		ni.hasDevice = ni.DeviceIndex >= 0
		if ni.CardIndex, err = intParam(n, "NetworkCardIndex"); err != nil {
			return x, err
		}
		ni.CardIndex = max(ni.CardIndex, 0)
		if ni.V4Prefixes, err = intParam(n, "Ipv4PrefixCount"); err != nil {
			return x, err
		}
		if ni.V6Prefixes, err = intParam(n, "Ipv6PrefixCount"); err != nil {
			return x, err
		}
		if ni.V6Addresses, err = intParam(n, "Ipv6AddressCount"); err != nil {
			return x, err
		}
		if v := n.Get("AssociatePublicIpAddress"); v != "" {
			b := v == "true"
			ni.PublicIP = &b
		}
		ni.PrimaryV6 = n.Get("PrimaryIpv6") == "true"
		for _, sg := range ni.SGs {
			if _, ok := s.securityGroup(sg); !ok {
				return x, badParam("InvalidGroup.NotFound", "The security group '%s' does not exist", sg)
			}
		}
		if ct := n.Struct("ConnectionTrackingSpecification"); len(ct.Params) > 0 {
			c := &connTrack{}
			for _, f := range []struct {
				key    string
				dst    *int
				lo, hi int
			}{{"TcpEstablishedTimeout", &c.TCPEstablished, 60, 432000}, {"UdpStreamTimeout", &c.UDPStream, 60, 180}, {"UdpTimeout", &c.UDP, 30, 60}} {
				v, err := intParam(ct, f.key)
				if err != nil {
					return x, err
				}
				if err := inRange(field+".ConnectionTrackingSpecification."+f.key, v, f.lo, f.hi); err != nil {
					return x, err
				}
				*f.dst = max(v, 0)
			}
			ni.ConnTrack = c
		}
		x.NIs = append(x.NIs, ni)
	}
	x.NestedVirt = data.Get("CpuOptions.NestedVirtualization")
	if err := oneOf("LaunchTemplateData.CpuOptions.NestedVirtualization", x.NestedVirt, "enabled", "disabled"); err != nil {
		return x, err
	}
	x.MetadataIPv6 = data.Get("MetadataOptions.HttpProtocolIpv6")
	if err := oneOf("LaunchTemplateData.MetadataOptions.HttpProtocolIpv6", x.MetadataIPv6, "enabled", "disabled"); err != nil {
		return x, err
	}
	x.CapResPreference = data.Get("CapacityReservationSpecification.CapacityReservationPreference")
	if err := oneOf("LaunchTemplateData.CapacityReservationSpecification.CapacityReservationPreference", x.CapResPreference,
		"capacity-reservations-only", "open", "none"); err != nil {
		return x, err
	}
	x.CapResTarget = data.Get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId")
	x.MarketType = data.Get("InstanceMarketOptions.MarketType")
	if err := oneOf("LaunchTemplateData.InstanceMarketOptions.MarketType", x.MarketType,
		"spot", "capacity-block", "interruptible-capacity-reservation"); err != nil {
		return x, err
	}
	pl := data.Struct("Placement")
	x.Placement = ltPlacement{GroupID: pl.Get("GroupId"), GroupName: pl.Get("GroupName"), Tenancy: pl.Get("Tenancy")}
	if err := oneOf("LaunchTemplateData.Placement.Tenancy", x.Placement.Tenancy, "default", "dedicated", "host"); err != nil {
		return x, err
	}
	if x.Placement.GroupID != "" && x.Placement.GroupName != "" {
		return x, badParam("InvalidParameterCombination", "The parameters GroupName and GroupId cannot be used together")
	}
	var err *apiError
	if x.Placement.Partition, err = intParam(pl, "PartitionNumber"); err != nil {
		return x, err
	}
	return x, nil
}

func (s *Sim) securityGroup(id string) (SecGroup, bool) {
	return first(s.cfg.SecurityGroups, func(g SecGroup) bool { return g.ID == id })
}

// placementGroup finds a placement group by id or name.
func (s *Sim) placementGroup(id, name string) (PlacementGroup, bool) {
	return first(s.cfg.PlacementGroups, func(g PlacementGroup) bool { return (id != "" && g.ID == id) || (name != "" && g.Name == name) })
}

// typeFacts are what DescribeInstanceTypes says of a type beyond the
// catalogue's columns: network cards (one, or one per EFA interface on
// multi-card EFA types), ENA, EFA, placement strategies (burstable types
// have no cluster placement) and nested virtualization (the 8th-generation
// Intel families that announced it).
type typeFacts struct {
	cards, interfacesPerCard int
	ena                      string
	efaMax                   int
	strategies               []string
	nestedVirt               bool
}

var nestedVirtFamilies = []string{"c8i", "c8i-flex", "m8i", "m8i-flex", "r8i", "r8i-flex"}

func factsOf(e catalog.Entry) typeFacts {
	f := typeFacts{cards: 1, interfacesPerCard: max(e.ENIs, 1), ena: "required", efaMax: efaInterfaces[e.Name],
		strategies: []string{"cluster", "partition", "spread"}}
	if f.efaMax > 1 {
		f.cards = f.efaMax
	}
	if e.Hypervisor == "xen" {
		f.ena = "unsupported"
	}
	if e.Category == "t" {
		f.strategies = []string{"partition", "spread"}
	}
	f.nestedVirt = e.Hypervisor == "nitro" && slices.Contains(nestedVirtFamilies, e.Family)
	return f
}

// spreadLimit is the instances a spread placement group holds per zone.
const spreadLimit = 7

// launchCheck is the fleet error EC2 gives when the launch template's
// interfaces, CPU options or placement do not fit the override's instance
// type and zone ("" when the launch may go ahead).
func (s *Sim) launchCheck(lt *launchTemplate, e catalog.Entry, zone string) (code, msg string) {
	f := factsOf(e)
	x := lt.Extra
	if len(x.NIs) > 0 {
		if len(lt.SGs) > 0 {
			return "InvalidParameterCombination", "Network interfaces and an instance-level security groups may not be specified on the same request"
		}
		primary, efas := false, 0
		seen := map[[2]int]bool{}
		for _, ni := range x.NIs {
			if !ni.hasDevice {
				return "InvalidParameterValue", "Each network interface requires a device index."
			}
			k := [2]int{ni.CardIndex, ni.DeviceIndex}
			if seen[k] {
				return "InvalidParameterValue", fmt.Sprintf("Network card index %d and device index %d are specified more than once", ni.CardIndex, ni.DeviceIndex)
			}
			seen[k] = true
			primary = primary || k == [2]int{0, 0}
			if ni.PublicIP != nil && *ni.PublicIP && len(x.NIs) > 1 {
				return "InvalidParameterCombination", "The associatePublicIPAddress parameter cannot be specified when launching with multiple network interfaces."
			}
			if ni.Type == "efa-only" && ((ni.PublicIP != nil && *ni.PublicIP) || ni.V4Prefixes > 0 || ni.V6Prefixes > 0 || ni.ConnTrack != nil || ni.PrimaryV6) {
				return "InvalidParameterValue", "EFA-only network interfaces do not support IP addresses, prefixes or connection tracking"
			}
			if ni.CardIndex >= f.cards {
				return "InvalidParameterValue", fmt.Sprintf("Network card index %d exceeds the %d network card(s) of instance type %s", ni.CardIndex, f.cards, e.Name)
			}
			if ni.DeviceIndex >= f.interfacesPerCard {
				return "InvalidParameterValue", fmt.Sprintf("Device index %d exceeds the %d network interfaces of instance type %s", ni.DeviceIndex, f.interfacesPerCard, e.Name)
			}
			if ni.Type == "efa" || ni.Type == "efa-only" {
				efas++
			}
			if ni.V4Prefixes > max(e.IPv4PerENI-1, 0) {
				return "InvalidParameterValue", fmt.Sprintf("Ipv4PrefixCount %d exceeds the limit of %d for instance type %s", ni.V4Prefixes, e.IPv4PerENI-1, e.Name)
			}
			if ni.ConnTrack != nil && e.Hypervisor != "nitro" {
				return "Unsupported", fmt.Sprintf("Connection tracking configuration is not supported for instance type %s", e.Name)
			}
		}
		if !primary {
			return "InvalidParameterValue", "A primary network interface (network card index 0, device index 0) is required."
		}
		if efas > 0 && f.efaMax == 0 {
			return "InvalidParameterCombination", fmt.Sprintf("EFA interfaces are not supported on %s.", e.Name)
		}
		if efas > f.efaMax && f.efaMax > 0 {
			return "InvalidParameterValue", fmt.Sprintf("%d EFA interfaces exceed the %d of instance type %s", efas, f.efaMax, e.Name)
		}
		// Ordinary interfaces (type interface or unset) need no ENA: EC2
		// launches types without it (t2 and other Xen types) with them.
		// What needs ENA, EFA, is refused above; the sim models neither
		// ENA Express nor the AMIs' ENA flag.
	}
	if x.NestedVirt == "enabled" && !f.nestedVirt {
		return "Unsupported", fmt.Sprintf("Nested virtualization is not supported for instance type %s", e.Name)
	}
	if p := x.Placement; p.GroupID != "" || p.GroupName != "" {
		g, ok := s.placementGroup(p.GroupID, p.GroupName)
		if !ok || g.State != "available" {
			return "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", p.GroupID+p.GroupName)
		}
		if !slices.Contains(f.strategies, g.Strategy) {
			return "Unsupported", fmt.Sprintf("The instance type %s is not supported in %s placement groups.", e.Name, g.Strategy)
		}
		if p.Partition > 0 && (g.Strategy != "partition" || p.Partition > g.PartitionCount) {
			return "InvalidParameterValue", fmt.Sprintf("Partition number %d is invalid for placement group %s", p.Partition, g.Name)
		}
		if g.Strategy == "spread" {
			n := 0
			for _, in := range s.instances {
				if in.PlacementGroup == g.ID && in.Zone == zone && in.State != "terminated" && in.State != "shutting-down" {
					n++
				}
			}
			if n >= spreadLimit {
				return "InsufficientInstanceCapacity", "You've reached the limit of instances in this spread placement group. " +
					"A spread placement group can have up to seven instances per Availability Zone."
			}
		}
	}
	return "", ""
}

// place records on a new instance what its launch template puts there:
// security groups (the primary interface's when interfaces are given, as
// EC2 requires them there), public IP, interfaces, placement group and
// partition (EC2 picks one when none is asked), nested virtualization.
func (s *Sim) place(in *instance, lt *launchTemplate) {
	x := lt.Extra
	in.SGs = slices.Clone(lt.SGs)
	for i, ni := range x.NIs {
		if ni.CardIndex == 0 && ni.DeviceIndex == 0 {
			in.SGs = slices.Clone(ni.SGs)
			if ni.PublicIP != nil && *ni.PublicIP {
				in.PublicIP = fmt.Sprintf("54.%d.%d.%d", len(s.order)/250%250, len(s.order)%250, 10+i)
			}
		}
		in.NIs = append(in.NIs, ni)
	}
	in.NestedVirt = x.NestedVirt
	if p := x.Placement; p.GroupID != "" || p.GroupName != "" {
		g, _ := s.placementGroup(p.GroupID, p.GroupName)
		in.PlacementGroup, in.PlacementGroupName = g.ID, g.Name
		switch {
		case g.Strategy != "partition":
		case p.Partition > 0:
			in.Partition = p.Partition
		default:
			n := 0
			for _, o := range s.instances {
				if o.PlacementGroup == g.ID {
					n++
				}
			}
			in.Partition = n%max(g.PartitionCount, 1) + 1
		}
	}
}

type describePlacementGroupsResponse struct {
	meta
	Groups []xPlacementGroup `xml:"placementGroupSet>item"`
}

// describePlacementGroups: GroupName.N and GroupId.N (an unknown one is
// InvalidPlacementGroup.Unknown) and the filters group-name, group-id,
// state, strategy, spread-level and tags.
func (s *Sim) describePlacementGroups(r Request) (response, *apiError) {
	names, ids, filters := r.Strings("GroupName"), r.Strings("GroupId"), r.Filters()
	for _, n := range names {
		if _, ok := s.placementGroup("", n); !ok {
			return nil, badParam("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", n)
		}
	}
	for _, id := range ids {
		if _, ok := s.placementGroup(id, ""); !ok {
			return nil, badParam("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", id)
		}
	}
	out := &describePlacementGroupsResponse{Groups: []xPlacementGroup{}}
	for _, g := range s.cfg.PlacementGroups {
		if !inOrAll(names, g.Name) || !inOrAll(ids, g.ID) {
			continue
		}
		fields := map[string]string{"group-name": g.Name, "group-id": g.ID, "state": g.State, "strategy": g.Strategy,
			"spread-level": g.SpreadLevel}
		if !matchFilters(filters, g.Tags, fields) {
			continue
		}
		x := xPlacementGroup{GroupName: g.Name, GroupID: g.ID, State: g.State, Strategy: g.Strategy, SpreadLevel: g.SpreadLevel,
			GroupArn: "arn:aws:ec2:" + s.cfg.Region + ":" + ownerID + ":placement-group/" + g.Name, Tags: tagSet(g.Tags)}
		if g.Strategy == "partition" {
			x.PartitionCount = g.PartitionCount
		}
		out.Groups = append(out.Groups, x)
	}
	return out, nil
}
