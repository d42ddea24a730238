package v1

import corev1 "k8s.io/api/core/v1"

// ResourceNodes counts nodes in NodePool limits and status.resources, as
// in Karpenter.
const ResourceNodes corev1.ResourceName = "nodes"
