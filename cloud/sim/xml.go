package sim

import (
	"encoding/xml"
	"maps"
	"slices"
)

const ec2NS = "http://ec2.amazonaws.com/doc/2016-11-15/"

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func tagSet(tags map[string]string) []xTag {
	out := make([]xTag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, xTag{Key: k, Value: tags[k]})
	}
	return out
}

type xSubnet struct {
	SubnetID           string `xml:"subnetId"`
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	AvailableIPs       int    `xml:"availableIpAddressCount"`
	VpcID              string `xml:"vpcId"`
	State              string `xml:"state"`
	Tags               []xTag `xml:"tagSet>item"`
}

type xSecurityGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
	VpcID     string `xml:"vpcId"`
	Tags      []xTag `xml:"tagSet>item"`
}

type xImage struct {
	ImageID      string `xml:"imageId"`
	Name         string `xml:"name"`
	OwnerID      string `xml:"imageOwnerId"`
	OwnerAlias   string `xml:"imageOwnerAlias"`
	State        string `xml:"imageState"`
	Architecture string `xml:"architecture"`
	CreationDate string `xml:"creationDate"`
	// DeprecationTime is EC2's deprecationTime (RFC 3339, omitted when
	// the image is not scheduled for deprecation).
	DeprecationTime string `xml:"deprecationTime,omitempty"`
	Tags            []xTag `xml:"tagSet>item"`
}

type xLaunchTemplate struct {
	ID             string `xml:"launchTemplateId"`
	Name           string `xml:"launchTemplateName"`
	CreateTime     string `xml:"createTime"`
	DefaultVersion int64  `xml:"defaultVersionNumber"`
	LatestVersion  int64  `xml:"latestVersionNumber"`
	Tags           []xTag `xml:"tagSet>item"`
}

type xOverrides struct {
	InstanceType     string   `xml:"instanceType,omitempty"`
	SubnetID         string   `xml:"subnetId,omitempty"`
	AvailabilityZone string   `xml:"availabilityZone,omitempty"`
	ImageID          string   `xml:"imageId,omitempty"`
	Priority         *float64 `xml:"priority,omitempty"`
}

type xLTSpec struct {
	ID      string `xml:"launchTemplateId,omitempty"`
	Name    string `xml:"launchTemplateName,omitempty"`
	Version string `xml:"version,omitempty"`
}

type xLTAndOverrides struct {
	Spec      xLTSpec    `xml:"launchTemplateSpecification"`
	Overrides xOverrides `xml:"overrides"`
}

type xFleetError struct {
	LTAndOverrides xLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle      string          `xml:"lifecycle"`
	Code           string          `xml:"errorCode"`
	Message        string          `xml:"errorMessage"`
}

type xFleetInstance struct {
	LTAndOverrides xLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle      string          `xml:"lifecycle"`
	InstanceIDs    []string        `xml:"instanceIds>item"`
	InstanceType   string          `xml:"instanceType"`
}

type xState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xInstance struct {
	InstanceID     string     `xml:"instanceId"`
	ImageID        string     `xml:"imageId"`
	State          xState     `xml:"instanceState"`
	PrivateDNSName string     `xml:"privateDnsName"`
	InstanceType   string     `xml:"instanceType"`
	LaunchTime     string     `xml:"launchTime"`
	Placement      xPlacement `xml:"placement"`
	SubnetID       string     `xml:"subnetId"`
	PrivateIP      string     `xml:"privateIpAddress"`
	Architecture   string     `xml:"architecture"`
	ClientToken    string     `xml:"clientToken,omitempty"`
	Lifecycle      string     `xml:"instanceLifecycle,omitempty"`
	Tags           []xTag     `xml:"tagSet>item"`
	Groups         []xGroup   `xml:"groupSet>item"`
	PublicIP       string     `xml:"ipAddress,omitempty"`
	NetworkIfaces  []xNetIf   `xml:"networkInterfaceSet>item"`
	NestedVirt     string     `xml:"cpuOptions>nestedVirtualization,omitempty"`
	// The capacity reservation it runs in and its launch template's
	// reservation preference.
	CapacityReservationID string `xml:"capacityReservationId,omitempty"`
	CapResPreference      string `xml:"capacityReservationSpecification>capacityReservationPreference,omitempty"`
}

type xPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	GroupName        string `xml:"groupName,omitempty"`
	GroupID          string `xml:"groupId,omitempty"`
	PartitionNumber  int    `xml:"partitionNumber,omitempty"`
	Tenancy          string `xml:"tenancy"`
}

type xNetIf struct {
	ID            string        `xml:"networkInterfaceId"`
	SubnetID      string        `xml:"subnetId"`
	InterfaceType string        `xml:"interfaceType"`
	DeviceIndex   int           `xml:"attachment>deviceIndex"`
	CardIndex     int           `xml:"attachment>networkCardIndex"`
	Groups        []xGroup      `xml:"groupSet>item"`
	V4Prefixes    []xIPv4Prefix `xml:"ipv4PrefixSet>item"`
	ConnTrack     *xConnTrack   `xml:"connectionTrackingConfiguration,omitempty"`
}

type xIPv4Prefix struct {
	Prefix string `xml:"ipv4Prefix"`
}

type xConnTrack struct {
	TCPEstablished int `xml:"tcpEstablishedTimeout,omitempty"`
	UDPStream      int `xml:"udpStreamTimeout,omitempty"`
	UDP            int `xml:"udpTimeout,omitempty"`
}

type xPlacementGroup struct {
	GroupName      string `xml:"groupName"`
	GroupID        string `xml:"groupId"`
	GroupArn       string `xml:"groupArn"`
	State          string `xml:"state"`
	Strategy       string `xml:"strategy"`
	PartitionCount int    `xml:"partitionCount,omitempty"`
	SpreadLevel    string `xml:"spreadLevel,omitempty"`
	Tags           []xTag `xml:"tagSet>item"`
}

type xGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName,omitempty"`
}

type xReservation struct {
	ReservationID string      `xml:"reservationId"`
	OwnerID       string      `xml:"ownerId"`
	Instances     []xInstance `xml:"instancesSet>item"`
}

type xStateChange struct {
	InstanceID    string `xml:"instanceId"`
	CurrentState  xState `xml:"currentState"`
	PreviousState xState `xml:"previousState"`
}

type xSpotPrice struct {
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
	AvailabilityZone   string `xml:"availabilityZone"`
}

type xInstanceType struct {
	InstanceType      string   `xml:"instanceType"`
	CurrentGeneration bool     `xml:"currentGeneration"`
	Hypervisor        string   `xml:"hypervisor,omitempty"`
	BareMetal         bool     `xml:"bareMetal"`
	Architectures     []string `xml:"processorInfo>supportedArchitectures>item"`
	Features          []string `xml:"processorInfo>supportedFeatures>item"`
	Manufacturer      string   `xml:"processorInfo>manufacturer"`
	ClockGHz          float64  `xml:"processorInfo>sustainedClockSpeedInGhz"`
	VCPUs             int      `xml:"vCpuInfo>defaultVCpus"`
	MemoryMiB         int64    `xml:"memoryInfo>sizeInMiB"`
	Network           xNetInfo `xml:"networkInfo"`
	EBS               xEBSInfo `xml:"ebsInfo"`
	Strategies        []string `xml:"placementGroupInfo>supportedStrategies>item"`
}

// xEBSInfo is EbsInfo: EbsOptimizedInfo only for types that can be
// EBS-optimized, as EC2's.
type xEBSInfo struct {
	OptimizedSupport string             `xml:"ebsOptimizedSupport"`
	OptimizedInfo    *xEBSOptimizedInfo `xml:"ebsOptimizedInfo,omitempty"`
}

type xEBSOptimizedInfo struct {
	MaxBandwidthMbps int32 `xml:"maximumBandwidthInMbps"`
}

type xNetInfo struct {
	MaxENIs      int        `xml:"maximumNetworkInterfaces"`
	IPv4PerENI   int        `xml:"ipv4AddressesPerInterface"`
	ENASupport   string     `xml:"enaSupport"`
	EFASupported bool       `xml:"efaSupported"`
	MaxEFA       *int       `xml:"efaInfo>maximumEfaInterfaces,omitempty"`
	MaxCards     int        `xml:"maximumNetworkCards"`
	Cards        []xNetCard `xml:"networkCards>item"`
	// EncryptionInTransit is encryptionInTransitSupported.
	EncryptionInTransit bool `xml:"encryptionInTransitSupported"`
}

type xNetCard struct {
	Index         int `xml:"networkCardIndex"`
	MaxInterfaces int `xml:"maximumNetworkInterfaces"`
}

type xTypeOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

// xErrorResponse is EC2's error body.
type xErrorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}
