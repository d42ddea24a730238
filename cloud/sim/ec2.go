package sim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud/catalog"
)

type handler func(*Sim, Request) (response, *apiError)

var ec2Actions map[string]handler

func init() {
	ec2Actions = map[string]handler{
		"DescribeInstanceTypes":         (*Sim).describeInstanceTypes,
		"DescribeInstanceTypeOfferings": (*Sim).describeInstanceTypeOfferings,
		"DescribeSubnets":               (*Sim).describeSubnets,
		"DescribeSecurityGroups":        (*Sim).describeSecurityGroups,
		"DescribeImages":                (*Sim).describeImages,
		"DescribeLaunchTemplates":       (*Sim).describeLaunchTemplates,
		"CreateLaunchTemplate":          (*Sim).createLaunchTemplate,
		"DeleteLaunchTemplate":          (*Sim).deleteLaunchTemplate,
		"CreateFleet":                   (*Sim).createFleet,
		"DescribeInstances":             (*Sim).describeInstances,
		"TerminateInstances":            (*Sim).terminateInstances,
		"CreateTags":                    (*Sim).createTags,
		"DescribeSpotPriceHistory":      (*Sim).describeSpotPriceHistory,
		"DescribePlacementGroups":       (*Sim).describePlacementGroups,
		"DescribeCapacityReservations":  (*Sim).describeCapacityReservations,
	}
}

const (
	vpcID   = "vpc-0sim00000001"
	ownerID = "123456789012"
)

func zoneID(zone string) string {
	return "use1-az" + strconv.Itoa(int(zone[len(zone)-1]-'a')+1)
}

type describeSubnetsResponse struct {
	meta
	Subnets   []xSubnet `xml:"subnetSet>item"`
	NextToken string    `xml:"nextToken,omitempty"`
}

func (s *Sim) describeSubnets(r Request) (response, *apiError) {
	ids, filters := r.Strings("SubnetId"), r.Filters()
	out := &describeSubnetsResponse{Subnets: []xSubnet{}}
	for _, id := range ids {
		if _, ok := s.subnet(id); !ok {
			return nil, badParam("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	var listed []Subnet
	for _, sn := range s.cfg.Subnets {
		if inOrAll(ids, sn.ID) {
			listed = append(listed, sn)
		}
	}
	page, next, aerr := pageFiltered(r, s.cfg.PageSizes[r.Action], listed, func(sn Subnet) bool {
		return matchFilters(filters, sn.Tags, map[string]string{"subnet-id": sn.ID, "availability-zone": sn.Zone, "vpc-id": vpcID})
	})
	if aerr != nil {
		return nil, aerr
	}
	for _, sn := range page {
		out.Subnets = append(out.Subnets, xSubnet{
			SubnetID: sn.ID, AvailabilityZone: sn.Zone, AvailabilityZoneID: zoneID(sn.Zone),
			AvailableIPs: sn.AvailableIPs, VpcID: vpcID, State: "available", Tags: tagSet(sn.Tags),
		})
	}
	out.NextToken = next
	return out, nil
}

// pageFiltered answers one page of items that keep accepts. Without a
// Config.PageSizes entry for r's action the items are filtered first and
// the page is MaxResults of those (paginate); with one, the page is cut
// from every item first, at most that many (and MaxResults), and filtered
// after, as EC2 does for these Describe actions: a page may come back
// short or empty with a NextToken.
func pageFiltered[T any](r Request, limit int, items []T, keep func(T) bool) ([]T, string, *apiError) {
	drop := func(it T) bool { return !keep(it) }
	if limit <= 0 {
		return paginate(r, slices.DeleteFunc(slices.Clone(items), drop), seqKey)
	}
	page, next, aerr := paginateAtMost(r, items, seqKey, limit)
	if aerr != nil {
		return nil, "", aerr
	}
	return slices.DeleteFunc(slices.Clone(page), drop), next, nil
}

// first is the first element of list that match accepts.
func first[T any](list []T, match func(T) bool) (T, bool) {
	if i := slices.IndexFunc(list, match); i >= 0 {
		return list[i], true
	}
	var zero T
	return zero, false
}

func (s *Sim) subnet(id string) (Subnet, bool) {
	return first(s.cfg.Subnets, func(sn Subnet) bool { return sn.ID == id })
}

type describeSecurityGroupsResponse struct {
	meta
	Groups    []xSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string           `xml:"nextToken,omitempty"`
}

func (s *Sim) describeSecurityGroups(r Request) (response, *apiError) {
	ids, names, filters := r.Strings("GroupId"), r.Strings("GroupName"), r.Filters()
	out := &describeSecurityGroupsResponse{Groups: []xSecurityGroup{}}
	var listed []SecGroup
	for _, g := range s.cfg.SecurityGroups {
		if inOrAll(ids, g.ID) && inOrAll(names, g.Name) {
			listed = append(listed, g)
		}
	}
	if len(ids) > 0 && len(listed) == 0 {
		return nil, badParam("InvalidGroup.NotFound", "The security group '%s' does not exist", strings.Join(ids, ","))
	}
	page, next, aerr := pageFiltered(r, s.cfg.PageSizes[r.Action], listed, func(g SecGroup) bool {
		return matchFilters(filters, g.Tags, map[string]string{"group-id": g.ID, "group-name": g.Name, "vpc-id": vpcID})
	})
	if aerr != nil {
		return nil, aerr
	}
	for _, g := range page {
		out.Groups = append(out.Groups, xSecurityGroup{GroupID: g.ID, GroupName: g.Name, VpcID: vpcID, Tags: tagSet(g.Tags)})
	}
	out.NextToken = next
	return out, nil
}

type describeImagesResponse struct {
	meta
	Images    []xImage `xml:"imagesSet>item"`
	NextToken string   `xml:"nextToken,omitempty"`
}

func (s *Sim) describeImages(r Request) (response, *apiError) {
	ids, owners, filters := r.Strings("ImageId"), r.Strings("Owner"), r.Filters()
	includeDeprecated := r.Get("IncludeDeprecated") == "true" || len(ids) > 0
	now := s.now()
	out := &describeImagesResponse{Images: []xImage{}}
	var listed []Image
	for _, im := range s.cfg.Images {
		if !inOrAll(ids, im.ID) {
			continue
		}
		if len(owners) > 0 && !anyMatch(owners, []string{im.Owner, ownerOf(im)}) {
			continue
		}
		// EC2 shows deprecated images only when asked, named by ID, or to
		// their owner.
		if !includeDeprecated && ownerOf(im) != ownerID && deprecated(im, now) {
			continue
		}
		listed = append(listed, im)
	}
	page, next, aerr := pageFiltered(r, s.cfg.PageSizes[r.Action], listed, func(im Image) bool {
		fields := map[string]string{"image-id": im.ID, "name": im.Name, "architecture": im.Arch, "state": imageState(im),
			"owner-id": ownerOf(im), "owner-alias": im.Owner}
		return matchFilters(filters, im.Tags, fields)
	})
	if aerr != nil {
		return nil, aerr
	}
	for _, im := range page {
		out.Images = append(out.Images, xImage{
			ImageID: im.ID, Name: im.Name, OwnerID: ownerOf(im), OwnerAlias: im.Owner, State: imageState(im),
			Architecture: im.Arch, CreationDate: im.CreationDate, DeprecationTime: im.DeprecationTime, Tags: tagSet(im.Tags),
		})
	}
	out.NextToken = next
	return out, nil
}

// imageState is an image's state, available unless set.
func imageState(im Image) string {
	if im.State == "" {
		return "available"
	}
	return im.State
}

// deprecated reports whether the image's deprecation time has come.
func deprecated(im Image, now time.Time) bool {
	t, err := time.Parse(time.RFC3339, im.DeprecationTime)
	return err == nil && !t.After(now)
}

func ownerOf(im Image) string {
	if im.Owner == "amazon" {
		return "602401143452"
	}
	if im.Owner == "" || im.Owner == "self" {
		return ownerID
	}
	return im.Owner
}

func (s *Sim) image(id string) (Image, bool) {
	return first(s.cfg.Images, func(im Image) bool { return im.ID == id })
}

type describeLaunchTemplatesResponse struct {
	meta
	Templates []xLaunchTemplate `xml:"launchTemplates>item"`
	NextToken string            `xml:"nextToken,omitempty"`
}

func (lt *launchTemplate) x() xLaunchTemplate {
	return xLaunchTemplate{ID: lt.ID, Name: lt.Name, CreateTime: lt.Created.UTC().Format(time.RFC3339),
		DefaultVersion: 1, LatestVersion: 1, Tags: tagSet(lt.Tags)}
}

func (s *Sim) describeLaunchTemplates(r Request) (response, *apiError) {
	names, ids, filters := r.Strings("LaunchTemplateName"), r.Strings("LaunchTemplateId"), r.Filters()
	out := &describeLaunchTemplatesResponse{Templates: []xLaunchTemplate{}}
	for _, n := range names {
		if _, ok := s.templates[n]; !ok {
			return nil, badParam("InvalidLaunchTemplateName.NotFoundException",
				"At least one of the launch templates specified in the request does not exist.")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.templates)) {
		lt := s.templates[name]
		if !inOrAll(names, lt.Name) || !inOrAll(ids, lt.ID) {
			continue
		}
		if !matchFilters(filters, lt.Tags, map[string]string{"launch-template-name": lt.Name}) {
			continue
		}
		out.Templates = append(out.Templates, lt.x())
	}
	var aerr *apiError
	out.Templates, out.NextToken, aerr = paginate(r, out.Templates, func(_ int, lt xLaunchTemplate) string { return lt.Name })
	return out, aerr
}

// maxUserData is EC2's limit of user data (decoded).
const maxUserData = 16384

// maxTags is EC2's limit of tags on one resource.
const maxTags = 50

// tagLimit is EC2's TagLimitExceeded when a tag specification gives one
// resource type more than maxTags tags, else nil. (The code is EC2's; its
// wording here is the sim's.)
func tagLimit(specs ...map[string]map[string]string) *apiError {
	for _, byType := range specs {
		for _, kind := range slices.Sorted(maps.Keys(byType)) {
			if n := len(byType[kind]); n > maxTags {
				return badParam("TagLimitExceeded", "The tag specification for resource type %s has %d tags; a resource may have at most %d", kind, n, maxTags)
			}
		}
	}
	return nil
}

type launchTemplateResponse struct {
	meta
	Template xLaunchTemplate `xml:"launchTemplate"`
}

func (s *Sim) createLaunchTemplate(r Request) (response, *apiError) {
	name := r.Get("LaunchTemplateName")
	if name == "" {
		return nil, badParam("MissingParameter", "The request must contain the parameter LaunchTemplateName")
	}
	if _, ok := s.templates[name]; ok {
		return nil, badParam("InvalidLaunchTemplateName.AlreadyExistsException",
			"Launch template name already in use.")
	}
	data := r.Struct("LaunchTemplateData")
	if aerr := tagLimit(r.TagSpecs("TagSpecification"), data.TagSpecs("TagSpecification")); aerr != nil {
		return nil, aerr
	}
	imageID := data.Get("ImageId")
	if imageID != "" {
		if _, ok := s.image(imageID); !ok {
			return nil, badParam("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", imageID)
		}
	}
	var ud []byte
	if enc := data.Get("UserData"); enc != "" {
		b, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, badParam("InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
		}
		if len(b) > maxUserData {
			return nil, badParam("InvalidUserData.Malformed", "User data is limited to %d bytes", maxUserData)
		}
		ud = b
	}
	sgs := data.Strings("SecurityGroupId")
	for _, sg := range sgs {
		if _, ok := s.securityGroup(sg); !ok {
			return nil, badParam("InvalidGroup.NotFound", "The security group '%s' does not exist", sg)
		}
	}
	extra, aerr := s.parseLaunchData(data)
	if aerr != nil {
		return nil, aerr
	}
	lt := &launchTemplate{
		ID: s.nextID("lt"), Name: name, Created: s.now(), Tags: r.TagSpecs("TagSpecification")["launch-template"],
		ImageID: imageID, UserData: ud, SGs: sgs, Data: data, Extra: extra,
	}
	if lt.Tags == nil {
		lt.Tags = map[string]string{}
	}
	s.templates[name] = lt
	return &launchTemplateResponse{Template: lt.x()}, nil
}

func (s *Sim) deleteLaunchTemplate(r Request) (response, *apiError) {
	name, id := r.Get("LaunchTemplateName"), r.Get("LaunchTemplateId")
	for n, lt := range s.templates {
		if (name != "" && n == name) || (id != "" && lt.ID == id) {
			delete(s.templates, n)
			return &launchTemplateResponse{Template: lt.x()}, nil
		}
	}
	return nil, badParam("InvalidLaunchTemplateName.NotFoundException",
		"At least one of the launch templates specified in the request does not exist.")
}

type createFleetResponse struct {
	meta
	FleetID   string           `xml:"fleetId"`
	Errors    []xFleetError    `xml:"errorSet>item"`
	Instances []xFleetInstance `xml:"fleetInstanceSet>item"`
}

type fleetOverride struct {
	lt     *launchTemplate
	spec   xLTSpec
	o      xOverrides
	price  float64
	zone   string
	subnet string
	image  string
	itype  string
}

func paramsHash(r Request) string {
	keys := slices.Sorted(maps.Keys(r.Params))
	h := sha256.New()
	for _, k := range keys {
		if k == "ClientToken" {
			continue
		}
		fmt.Fprintf(h, "%s=%q\n", k, r.Params[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Sim) createFleet(r Request) (response, *apiError) {
	token := r.Get("ClientToken")
	ph := paramsHash(r)
	if token != "" {
		if prev, ok := s.fleets[token]; ok {
			if prev.paramsHash != ph {
				return nil, badParam("IdempotentParameterMismatch",
					"The client token %s was used with different parameters", token)
			}
			body := prev.body
			for _, fi := range body.Instances {
				for _, id := range fi.InstanceIDs {
					if in := s.instances[id]; in != nil && in.State == "terminated" {
						return nil, badParam("IdempotentInstanceTerminated",
							"The client token %s was used for instance %s, which is terminated", token, id)
					}
				}
			}
			return &body, nil
		}
		if len(token) > 64 {
			return nil, badParam("InvalidParameterValue", "ClientToken is longer than 64 characters")
		}
	}
	if aerr := tagLimit(r.TagSpecs("TagSpecification")); aerr != nil {
		return nil, aerr
	}
	if t := r.Get("Type"); t != "instant" {
		return nil, badParam("InvalidParameterValue", "only Type instant is simulated, got %q", t)
	}
	capType := r.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	if capType != "spot" && capType != "on-demand" && !slices.Contains(reservedMarkets, capType) {
		return nil, badParam("InvalidParameterValue", "DefaultTargetCapacityType %q is not spot, on-demand, capacity-block or reserved-capacity", capType)
	}
	if n := r.Int("TargetCapacitySpecification.TotalTargetCapacity", 0); n != 1 {
		return nil, badParam("InvalidParameterValue", "only TotalTargetCapacity 1 is simulated, got %d", n)
	}
	var overrides []fleetOverride
	for _, c := range r.Sub("LaunchTemplateConfigs") {
		spec := c.Struct("LaunchTemplateSpecification")
		var lt *launchTemplate
		if n := spec.Get("LaunchTemplateName"); n != "" {
			lt = s.templates[n]
		} else if id := spec.Get("LaunchTemplateId"); id != "" {
			for _, t := range s.templates {
				if t.ID == id {
					lt = t
				}
			}
		}
		if lt == nil {
			return nil, badParam("InvalidLaunchTemplateName.NotFoundException",
				"The specified launch template, with template name %s, does not exist.", spec.Get("LaunchTemplateName"))
		}
		xs := xLTSpec{ID: lt.ID, Name: lt.Name, Version: spec.Get("Version")}
		for _, o := range c.Sub("Overrides") {
			fo := fleetOverride{lt: lt, spec: xs, itype: o.Get("InstanceType"), subnet: o.Get("SubnetId"),
				image: o.Get("ImageId"), zone: o.Get("AvailabilityZone")}
			if fo.image == "" {
				fo.image = lt.ImageID
			}
			sn, ok := s.subnet(fo.subnet)
			if !ok {
				return nil, badParam("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", fo.subnet)
			}
			fo.zone = sn.Zone
			fo.o = xOverrides{InstanceType: fo.itype, SubnetID: fo.subnet, AvailabilityZone: fo.zone, ImageID: o.Get("ImageId")}
			if p := o.Get("Priority"); p != "" {
				if f, err := strconv.ParseFloat(p, 64); err == nil {
					fo.o.Priority = &f
				}
			}
			overrides = append(overrides, fo)
		}
	}
	if len(overrides) == 0 {
		return nil, badParam("InvalidParameterValue", "no launch template overrides")
	}
	for i := range overrides {
		e, ok := s.types[overrides[i].itype]
		switch {
		case !ok:
			overrides[i].price = -1
		case capType == "spot":
			overrides[i].price = catalog.DefaultSpotModel.Price(e, overrides[i].zone)
		default:
			overrides[i].price = e.OnDemandPrice
		}
	}
	// Both lowest-price and price-capacity-optimized pick the cheapest
	// offering that has capacity.
	sort.SliceStable(overrides, func(i, j int) bool { return overrides[i].price < overrides[j].price })
	out := createFleetResponse{FleetID: "fleet-" + s.nextID("x")[2:]}
	lifecycle := capType
	if lifecycle != "spot" {
		lifecycle = "on-demand"
	}
	for _, fo := range overrides {
		lo := xLTAndOverrides{Spec: fo.spec, Overrides: fo.o}
		if fo.price < 0 {
			out.Errors = append(out.Errors, xFleetError{LTAndOverrides: lo, Lifecycle: lifecycle, Code: "InvalidParameterValue",
				Message: fmt.Sprintf("The instance type '%s' is not supported", fo.itype)})
			continue
		}
		if fo.image == "" {
			out.Errors = append(out.Errors, xFleetError{LTAndOverrides: lo, Lifecycle: lifecycle, Code: "InvalidParameterValue",
				Message: "no image id in the launch template or the override"})
			continue
		}
		if code, msg := s.launchAuth(r, fo, capType); code != "" {
			out.Errors = append(out.Errors, xFleetError{LTAndOverrides: lo, Lifecycle: lifecycle, Code: code, Message: msg})
			continue
		}
		if code, msg := s.profileCheck(fo.lt); code != "" {
			out.Errors = append(out.Errors, xFleetError{LTAndOverrides: lo, Lifecycle: lifecycle, Code: code, Message: msg})
			continue
		}
		if capType == "spot" && !s.hasSpotPrice(fo.itype, fo.zone) {
			out.Errors = append(out.Errors, xFleetError{LTAndOverrides: lo, Lifecycle: lifecycle, Code: "Unsupported",
				Message: "The requested configuration is currently not supported. Please check the documentation for supported configurations."})
			continue
		}
		if code, msg := s.launchCheck(fo.lt, s.types[fo.itype], fo.zone); code != "" {
			out.Errors = append(out.Errors, xFleetError{LTAndOverrides: lo, Lifecycle: lifecycle, Code: code, Message: msg})
			continue
		}
		if code, msg := s.reservationCheck(fo.lt, fo.itype, fo.zone, capType); code != "" {
			out.Errors = append(out.Errors, xFleetError{LTAndOverrides: lo, Lifecycle: lifecycle, Code: code, Message: msg})
			continue
		}
		if code, ok := s.capErrors[offeringKey{fo.itype, fo.zone, capType}]; ok && fo.lt.Extra.CapResTarget == "" {
			out.Errors = append(out.Errors, xFleetError{LTAndOverrides: lo, Lifecycle: lifecycle, Code: code,
				Message: fmt.Sprintf("There is no %s capacity available that matches your request (%s in %s).", capType, fo.itype, fo.zone)})
			continue
		}
		in := s.launch(fo, capType, token, r.TagSpecs("TagSpecification")["instance"])
		in.FleetContext = r.Get("Context")
		out.Instances = append(out.Instances, xFleetInstance{LTAndOverrides: lo, Lifecycle: lifecycle,
			InstanceIDs: []string{in.ID}, InstanceType: in.Type})
		break
	}
	if token != "" {
		s.fleets[token] = fleetResult{paramsHash: ph, body: out}
	}
	return &out, nil
}

func (s *Sim) launch(fo fleetOverride, capType, token string, tags map[string]string) *instance {
	arch := "x86_64"
	if im, ok := s.image(fo.image); ok {
		arch = im.Arch
	}
	n := len(s.order) + 1
	ip := fmt.Sprintf("10.0.%d.%d", (n/250)%250, n%250+4)
	in := &instance{
		ID: s.nextID("i"), Type: fo.itype, Zone: fo.zone, SubnetID: fo.subnet, ImageID: fo.image,
		State: "pending", ClientToken: token, PrivateIP: ip, Arch: arch, LaunchTime: s.now().UTC().Truncate(time.Second),
		BootAt: s.now().Add(s.cfg.BootDelay.Duration), Tags: maps.Clone(tags), UserData: fo.lt.UserData,
		NodeName: "ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal",
	}
	s.place(in, fo.lt)
	reserve(in, fo.lt)
	if capType == "spot" {
		in.Lifecycle = "spot"
	}
	s.instances[in.ID] = in
	s.order = append(s.order, in.ID)
	s.emitStateChange(in)
	s.log.Info("launched instance", zap.String("instance-id", in.ID), zap.String("instance-type", in.Type),
		zap.String("zone", in.Zone), zap.String("capacity-type", capType))
	return in
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func (s *Sim) x(in *instance) xInstance {
	return xInstance{
		InstanceID: in.ID, ImageID: in.ImageID, State: xState{Code: stateCodes[in.State], Name: in.State},
		PrivateDNSName: in.NodeName, InstanceType: in.Type, LaunchTime: in.LaunchTime.Format(time.RFC3339),
		Placement: xPlacement{AvailabilityZone: in.Zone, GroupName: in.PlacementGroupName, GroupID: in.PlacementGroup,
			PartitionNumber: in.Partition, Tenancy: "default"},
		SubnetID: in.SubnetID, PrivateIP: in.PrivateIP, Architecture: in.Arch,
		ClientToken: in.ClientToken, Lifecycle: in.Lifecycle, Tags: tagSet(in.Tags), Groups: s.groupSet(in.SGs),
		PublicIP: in.PublicIP, NetworkIfaces: s.netIfaces(in), NestedVirt: in.NestedVirt,
		CapacityReservationID: in.ReservationID, CapResPreference: in.CapResPreference,
	}
}

// netIfaces is an instance's networkInterfaceSet: its launch template's
// interfaces, or the one default interface.
func (s *Sim) netIfaces(in *instance) []xNetIf {
	nis := in.NIs
	if len(nis) == 0 {
		nis = []netIface{{SGs: in.SGs, V4Prefixes: -1}}
	}
	out := make([]xNetIf, 0, len(nis))
	for i, ni := range nis {
		typ := ni.Type
		if typ == "" {
			typ = "interface"
		}
		x := xNetIf{ID: fmt.Sprintf("eni-%s%02d", in.ID[2:], i), SubnetID: in.SubnetID, InterfaceType: typ,
			DeviceIndex: max(ni.DeviceIndex, 0), CardIndex: ni.CardIndex, Groups: s.groupSet(ni.SGs)}
		for p := 0; p < ni.V4Prefixes; p++ {
			x.V4Prefixes = append(x.V4Prefixes, xIPv4Prefix{Prefix: fmt.Sprintf("10.1.%d.%d/28", len(s.order)%250, 16*p)})
		}
		if c := ni.ConnTrack; c != nil {
			x.ConnTrack = &xConnTrack{TCPEstablished: c.TCPEstablished, UDPStream: c.UDPStream, UDP: c.UDP}
		}
		out = append(out, x)
	}
	return out
}

// groupSet is an instance's security groups as DescribeInstances lists
// them (id and name).
func (s *Sim) groupSet(ids []string) []xGroup {
	out := make([]xGroup, 0, len(ids))
	for _, id := range ids {
		sg, _ := s.securityGroup(id)
		out = append(out, xGroup{GroupID: id, GroupName: sg.Name})
	}
	return out
}

// instanceIDRE is the form of an instance ID: i- and 8 (older) or 17
// lowercase hex digits.
var instanceIDRE = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

// knownInstances is InvalidInstanceID.Malformed for the first of ids that
// is not an instance ID, else InvalidInstanceID.NotFound for the first that
// names no instance, nil when all do.
func (s *Sim) knownInstances(ids []string) *apiError {
	for _, id := range ids {
		if !instanceIDRE.MatchString(id) {
			return badParam("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
	}
	for _, id := range ids {
		if _, ok := s.instances[id]; !ok {
			return badParam("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	return nil
}

type describeInstancesResponse struct {
	meta
	Reservations []xReservation `xml:"reservationSet>item"`
	NextToken    string         `xml:"nextToken,omitempty"`
}

func (s *Sim) describeInstances(r Request) (response, *apiError) {
	ids, filters := r.Strings("InstanceId"), r.Filters()
	if _, aerr := pageSize(r); aerr != nil {
		return nil, aerr
	}
	if aerr := s.knownInstances(ids); aerr != nil {
		return nil, aerr
	}
	out := &describeInstancesResponse{Reservations: []xReservation{}}
	for _, id := range s.order {
		in := s.instances[id]
		if !inOrAll(ids, id) {
			continue
		}
		fields := map[string]string{"instance-id": in.ID, "instance-state-name": in.State, "client-token": in.ClientToken,
			"instance-type": in.Type, "availability-zone": in.Zone}
		if !matchFilters(filters, in.Tags, fields) {
			continue
		}
		out.Reservations = append(out.Reservations, xReservation{ReservationID: "r-" + in.ID[2:], OwnerID: ownerID, Instances: []xInstance{s.x(in)}})
	}
	// Instances are never forgotten (terminated ones stay), so their
	// reservation IDs, in launch order, ascend as keys once numbered.
	launched := make(map[string]int, len(s.order))
	for i, id := range s.order {
		launched["r-"+id[2:]] = i
	}
	var aerr *apiError
	out.Reservations, out.NextToken, aerr = paginate(r, out.Reservations, func(_ int, x xReservation) string {
		return seqKey(launched[x.ReservationID], x)
	})
	return out, aerr
}

type terminateInstancesResponse struct {
	meta
	Changes []xStateChange `xml:"instancesSet>item"`
}

func (s *Sim) terminateInstances(r Request) (response, *apiError) {
	ids := r.Strings("InstanceId")
	if len(ids) == 0 {
		return nil, badParam("MissingParameter", "The request must contain the parameter InstanceId")
	}
	if aerr := s.knownInstances(ids); aerr != nil {
		return nil, aerr
	}
	out := &terminateInstancesResponse{}
	for _, id := range ids {
		in := s.instances[id]
		prev := in.State
		if in.State != "terminated" {
			s.setState(in, "shutting-down")
		}
		out.Changes = append(out.Changes, xStateChange{InstanceID: id,
			CurrentState: xState{stateCodes[in.State], in.State}, PreviousState: xState{stateCodes[prev], prev}})
	}
	return out, nil
}

type boolResponse struct {
	meta
	Return bool `xml:"return"`
}

func (s *Sim) createTags(r Request) (response, *apiError) {
	ids, tags := r.Strings("ResourceId"), r.Tags("Tag")
	for _, id := range ids {
		switch {
		case s.instances[id] != nil:
			for k, v := range tags {
				s.instances[id].Tags[k] = v
			}
		default:
			found := false
			for _, lt := range s.templates {
				if lt.ID == id {
					found = true
					for k, v := range tags {
						lt.Tags[k] = v
					}
				}
			}
			if !found && instanceIDRE.MatchString(id) {
				return nil, badParam("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
			}
			if !found {
				return nil, badParam("InvalidID", "The ID '%s' is not valid", id)
			}
		}
	}
	return &boolResponse{Return: true}, nil
}

type describeSpotPriceHistoryResponse struct {
	meta
	Prices    []xSpotPrice `xml:"spotPriceHistorySet>item"`
	NextToken string       `xml:"nextToken,omitempty"`
}

// spotProduct is the product description of the sim's spot prices (its
// instances run Linux in a VPC; EC2 has named those "Linux/UNIX" since
// EC2-Classic was retired).
const spotProduct = "Linux/UNIX"

// describeSpotPriceHistory answers the current spot price of every
// instance type in every zone but the pairs Config.NoSpotPrice leaves out,
// narrowed by InstanceType.N, ProductDescription.N, AvailabilityZone and
// the filters instance-type, availability-zone and product-description;
// paged (pageRules) in type and zone order. The prices are the newest, so
// StartTime and EndTime (up to now) do not narrow them.
func (s *Sim) describeSpotPriceHistory(r Request) (response, *apiError) {
	types, zones, products, filters := r.Strings("InstanceType"), r.Strings("AvailabilityZone"), r.Strings("ProductDescription"), r.Filters()
	if z := r.Get("AvailabilityZone"); z != "" {
		zones = append(zones, z)
	}
	ts := s.now().UTC().Truncate(time.Hour).Format(time.RFC3339)
	out := &describeSpotPriceHistoryResponse{Prices: []xSpotPrice{}}
	var keys []string
	if !inOrAll(products, spotProduct) {
		return out, nil
	}
	for _, name := range slices.Sorted(maps.Keys(s.types)) {
		if !inOrAll(types, name) {
			continue
		}
		e := s.types[name]
		for i, z := range s.cfg.Zones {
			if !inOrAll(zones, z) || !s.hasSpotPrice(name, z) {
				continue
			}
			if !matchFilters(filters, nil, map[string]string{"instance-type": name, "availability-zone": z, "product-description": spotProduct}) {
				continue
			}
			out.Prices = append(out.Prices, xSpotPrice{InstanceType: name, ProductDescription: spotProduct,
				SpotPrice: strconv.FormatFloat(catalog.DefaultSpotModel.Price(e, z), 'f', 6, 64), Timestamp: ts, AvailabilityZone: z})
			keys = append(keys, fmt.Sprintf("%s\x00%03d", name, i))
		}
	}
	var aerr *apiError
	out.Prices, out.NextToken, aerr = paginate(r, out.Prices, func(i int, _ xSpotPrice) string { return keys[i] })
	return out, aerr
}

// hasSpotPrice reports whether the spot price history has a price of
// instanceType in zone (Config.NoSpotPrice).
func (s *Sim) hasSpotPrice(instanceType, zone string) bool {
	for _, o := range s.cfg.NoSpotPrice {
		if o.InstanceType == instanceType && (o.Zone == "" || o.Zone == zone) {
			return false
		}
	}
	return true
}

type describeInstanceTypesResponse struct {
	meta
	Types     []xInstanceType `xml:"instanceTypeSet>item"`
	NextToken string          `xml:"nextToken,omitempty"`
}

func (s *Sim) describeInstanceTypes(r Request) (response, *apiError) {
	names := r.Strings("InstanceType")
	out := &describeInstanceTypesResponse{Types: []xInstanceType{}}
	for _, name := range slices.Sorted(maps.Keys(s.types)) {
		if !inOrAll(names, name) {
			continue
		}
		e := s.types[name]
		arch := "x86_64"
		if e.Arch == "arm64" {
			arch = "arm64"
		}
		f := factsOf(e)
		hw := catalog.HardwareOf(e) // the catalogue's model: see catalog.HardwareOf
		x := xInstanceType{InstanceType: name, CurrentGeneration: true, Hypervisor: e.Hypervisor,
			BareMetal: e.Hypervisor == "", Architectures: []string{arch}, VCPUs: e.VCPU, MemoryMiB: e.MemoryMiB,
			Manufacturer: hw.CPUManufacturer, ClockGHz: hw.SustainedClockGHz,
			Network: xNetInfo{MaxENIs: e.ENIs, IPv4PerENI: e.IPv4PerENI, ENASupport: f.ena, EFASupported: f.efaMax > 0, MaxCards: f.cards,
				EncryptionInTransit: hw.EncryptionInTransit},
			EBS:        xEBSInfo{OptimizedSupport: hw.EBSOptimizedSupport},
			Strategies: f.strategies}
		if hw.EBSMaxBandwidthMbps != nil {
			x.EBS.OptimizedInfo = &xEBSOptimizedInfo{MaxBandwidthMbps: *hw.EBSMaxBandwidthMbps}
		}
		if f.efaMax > 0 {
			x.Network.MaxEFA = &f.efaMax
		}
		for c := 0; c < f.cards; c++ {
			x.Network.Cards = append(x.Network.Cards, xNetCard{Index: c, MaxInterfaces: f.interfacesPerCard})
		}
		if f.nestedVirt {
			x.Features = []string{"nested-virtualization"}
		}
		out.Types = append(out.Types, x)
	}
	var aerr *apiError
	out.Types, out.NextToken, aerr = paginate(r, out.Types, func(_ int, x xInstanceType) string { return x.InstanceType })
	return out, aerr
}

type describeInstanceTypeOfferingsResponse struct {
	meta
	Offerings []xTypeOffering `xml:"instanceTypeOfferingSet>item"`
	NextToken string          `xml:"nextToken,omitempty"`
}

func (s *Sim) describeInstanceTypeOfferings(r Request) (response, *apiError) {
	lt := r.Get("LocationType")
	if lt == "" {
		lt = "region"
	}
	filters := r.Filters()
	out := &describeInstanceTypeOfferingsResponse{Offerings: []xTypeOffering{}}
	locations := []string{s.cfg.Region}
	if lt == "availability-zone" {
		locations = s.cfg.Zones
	}
	for _, name := range slices.Sorted(maps.Keys(s.types)) {
		for _, loc := range locations {
			if !matchFilters(filters, nil, map[string]string{"instance-type": name, "location": loc}) {
				continue
			}
			out.Offerings = append(out.Offerings, xTypeOffering{InstanceType: name, LocationType: lt, Location: loc})
		}
	}
	var aerr *apiError
	out.Offerings, out.NextToken, aerr = paginate(r, out.Offerings, seqKey)
	return out, aerr
}
