package aws

import ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

// TagFilters are the EC2 filters of a selector term's tags, in key order:
// tag:K with the value, or tag-key K for the wildcard "*" (as Karpenter
// builds them). test/karpenterstate seeds Karpenter's state with them.
func TagFilters(tags map[string]string) []ec2types.Filter { return tagFilters(tags) }
