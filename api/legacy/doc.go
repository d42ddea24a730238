// Package legacy groups the pre-v1 Karpenter API types Joiner can read and
// convert: karpenter.sh/v1alpha5 Provisioner, karpenter.k8s.aws/v1alpha1
// AWSNodeTemplate, karpenter.sh/v1beta1 NodePool and NodeClaim, and
// karpenter.k8s.aws/v1beta1 EC2NodeClass. They exist for decoding only: no
// CRDs, no deep copies, no defaulting. See api/convert for the mapping to v1.
package legacy
