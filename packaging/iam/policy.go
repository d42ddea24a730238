// Package iam embeds the controller's IAM policy (controller-policy.json,
// the document README tells operators to attach) so that `joiner sim`
// enforces exactly the shipped document without reading files at run time.
package iam

import (
	_ "embed"
	"strings"
)

//go:embed controller-policy.json
var controllerPolicy string

// The placeholders of the shipped policy, which the operator replaces
// (README, "IAM: the controller role").
const (
	PlaceholderRegion   = "REGION"
	PlaceholderAccount  = "ACCOUNT"
	PlaceholderCluster  = "CLUSTER"
	PlaceholderNodeRole = "NODEROLE"
)

// Values replace the placeholders.
type Values struct {
	Region, Account, Cluster string
	// NodeRole is the node role's name (a pattern such as "*" works too:
	// it lands in a resource ARN).
	NodeRole string
}

// ControllerPolicy is the shipped policy document with its placeholders
// as written.
func ControllerPolicy() []byte { return []byte(controllerPolicy) }

// Fill replaces the placeholders of a policy document written with them.
func Fill(doc []byte, v Values) []byte {
	return []byte(strings.NewReplacer(PlaceholderRegion, v.Region, PlaceholderAccount, v.Account,
		PlaceholderCluster, v.Cluster, PlaceholderNodeRole, v.NodeRole).Replace(string(doc)))
}
