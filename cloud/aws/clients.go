package aws

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// Clients are the AWS service clients Joiner calls.
type Clients struct {
	EC2     *ec2.Client
	SSM     *ssm.Client
	EKS     *eks.Client
	IAM     *iam.Client
	SQS     *sqs.Client
	Pricing *pricing.Client
}

// NewClients builds the service clients from an SDK config; a non-empty
// endpoint (e.g. `joiner sim`'s http://127.0.0.1:PORT) replaces the AWS
// endpoints of all of them. The Pricing API is served from a few regions
// only, so its client talks to PricingRegion(cfg.Region) unless endpoint
// is set.
func NewClients(cfg aws.Config, endpoint string) Clients {
	var base *string
	if endpoint != "" {
		base = aws.String(endpoint)
	}
	return Clients{
		EC2: ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = base }),
		SSM: ssm.NewFromConfig(cfg, func(o *ssm.Options) { o.BaseEndpoint = base }),
		EKS: eks.NewFromConfig(cfg, func(o *eks.Options) { o.BaseEndpoint = base }),
		IAM: iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = base }),
		SQS: sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = base }),
		Pricing: pricing.NewFromConfig(cfg, func(o *pricing.Options) {
			o.BaseEndpoint = base
			if base == nil {
				o.Region = PricingRegion(cfg.Region)
			}
		}),
	}
}
