package catalog

import awsv1 "github.com/joiner-dev/joiner/api/aws/v1"

// The catalogue CSV counts GPUs only; AWS Neuron devices (Inferentia,
// Trainium) are not in it. These figures are EC2's
// (InstanceTypeInfo.NeuronInfo), as listed in Karpenter's generated
// instance-type reference, the same source the CSV was taken from. A test
// checks that every inf/trn row of the catalogue has an entry here.
type neuronInfo struct {
	name           string // karpenter.k8s.aws/instance-accelerator-name
	devices        int64  // aws.amazon.com/neuron
	coresPerDevice int64  // aws.amazon.com/neuroncore = devices × coresPerDevice
}

var neuronDevices = map[string]neuronInfo{
	"inf1.xlarge":    {"inferentia", 1, 4},
	"inf1.2xlarge":   {"inferentia", 1, 4},
	"inf1.6xlarge":   {"inferentia", 4, 4},
	"inf1.24xlarge":  {"inferentia", 16, 4},
	"inf2.xlarge":    {"inferentia2", 1, 2},
	"inf2.8xlarge":   {"inferentia2", 1, 2},
	"inf2.24xlarge":  {"inferentia2", 6, 2},
	"inf2.48xlarge":  {"inferentia2", 12, 2},
	"trn1.2xlarge":   {"trainium", 1, 2},
	"trn1.32xlarge":  {"trainium", 16, 2},
	"trn1n.32xlarge": {"trainium", 16, 2},
	"trn2.48xlarge":  {"trainium2", 16, 8},
}

// Labels and resources of Neuron accelerators that api/aws/v1 does not name.
const (
	labelInstanceAcceleratorManufacturer = awsv1.Group + "/instance-accelerator-manufacturer"
	resourceAWSNeuronCore                = "aws.amazon.com/neuroncore"
	// resourceHabanaGaudi: no catalogued type has Gaudi accelerators
	// (dl1); the exotic filter names it as Karpenter's does.
	resourceHabanaGaudi = "habana.ai/gaudi"
)
