package aws

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// NewClients builds the EC2 and SSM clients the provider needs from an SDK
// config; a non-empty endpoint (e.g. `joiner sim`'s http://127.0.0.1:PORT)
// replaces the AWS endpoints of both.
func NewClients(cfg aws.Config, endpoint string) (*ec2.Client, *ssm.Client) {
	e := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	s := ssm.NewFromConfig(cfg, func(o *ssm.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	return e, s
}
