// Package v1alpha5 decodes the karpenter.sh/v1alpha5 Provisioner, the API
// Karpenter served before v0.32. Decoding only; api/convert maps it to v1.
package v1alpha5

import (
	"encoding/json"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1alpha1 "github.com/joiner-dev/joiner/api/legacy/aws/v1alpha1"
)

// APIVersion and Kind of the Provisioner.
const (
	APIVersion = "karpenter.sh/v1alpha5"
	Kind       = "Provisioner"
)

// Provisioner is a karpenter.sh/v1alpha5 Provisioner.
type Provisioner struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ProvisionerSpec `json:"spec,omitempty"`
}

// ProvisionerSpec is the spec of a Provisioner.
type ProvisionerSpec struct {
	Annotations            map[string]string                `json:"annotations,omitempty"`
	Labels                 map[string]string                `json:"labels,omitempty"`
	Taints                 []corev1.Taint                   `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                   `json:"startupTaints,omitempty"`
	Requirements           []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	KubeletConfiguration   *KubeletConfiguration            `json:"kubeletConfiguration,omitempty"`
	Provider               *awsv1alpha1.Provider            `json:"provider,omitempty"`
	ProviderRef            *MachineTemplateRef              `json:"providerRef,omitempty"`
	TTLSecondsAfterEmpty   *int64                           `json:"ttlSecondsAfterEmpty,omitempty"`
	TTLSecondsUntilExpired *int64                           `json:"ttlSecondsUntilExpired,omitempty"`
	Limits                 *Limits                          `json:"limits,omitempty"`
	Weight                 *int32                           `json:"weight,omitempty"`
	Consolidation          *Consolidation                   `json:"consolidation,omitempty"`
}

// MachineTemplateRef points at the AWSNodeTemplate of a Provisioner.
type MachineTemplateRef struct {
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// Limits caps the resources a Provisioner may launch.
type Limits struct {
	Resources corev1.ResourceList `json:"resources,omitempty"`
}

// Consolidation turns on consolidation of underutilised nodes.
type Consolidation struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// KubeletConfiguration is the v1alpha5 kubelet block. Durations are kept as
// text and parsed by the converter.
type KubeletConfiguration struct {
	KubeletSettings         `json:",inline"`
	ContainerRuntime        *string           `json:"containerRuntime,omitempty"`
	EvictionSoftGracePeriod map[string]string `json:"evictionSoftGracePeriod,omitempty"`
}

// KubeletSettings are the kubelet fields v1alpha5 and v1beta1 share, the
// same in both.
type KubeletSettings struct {
	ClusterDNS                  []string          `json:"clusterDNS,omitempty"`
	MaxPods                     *int32            `json:"maxPods,omitempty"`
	PodsPerCore                 *int32            `json:"podsPerCore,omitempty"`
	SystemReserved              map[string]Amount `json:"systemReserved,omitempty"`
	KubeReserved                map[string]Amount `json:"kubeReserved,omitempty"`
	EvictionHard                map[string]string `json:"evictionHard,omitempty"`
	EvictionSoft                map[string]string `json:"evictionSoft,omitempty"`
	EvictionMaxPodGracePeriod   *int32            `json:"evictionMaxPodGracePeriod,omitempty"`
	ImageGCHighThresholdPercent *int32            `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32            `json:"imageGCLowThresholdPercent,omitempty"`
	CPUCFSQuota                 *bool             `json:"cpuCFSQuota,omitempty"`
}

// Amount is a kubelet reservation as written. v1alpha5 (and v1beta1 before
// v0.36) typed systemReserved and kubeReserved as a ResourceList, which takes
// a number (cpu: 1) as well as a string (memory: 100Mi); v1 takes strings, so
// a number is kept as its text.
type Amount string

// errAmount is what a value that is neither a string nor a number gets.
var errAmount = errors.New("expected a resource amount such as 100Mi or 1 (a string or a number)")

// UnmarshalJSON reads a string or a number.
func (a *Amount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = Amount(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errAmount
	}
	*a = Amount(n.String())
	return nil
}
