package userdata

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v2"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/userdata/mime"
)

// NodeConfig identifiers (nodeadm).
const (
	NodeConfigAPIVersion = "node.eks.aws/v1alpha1"
	NodeConfigKind       = "NodeConfig"
	nodeConfigComment    = "# Joiner generated NodeConfig\n"
)

// nodeConfig builds Joiner's NodeConfig as a generic map (keys are sorted
// when marshalled).
func nodeConfig(r resolved) map[string]any {
	c := r.in.Cluster
	cluster := map[string]any{
		"apiServerEndpoint": c.Endpoint,
		"cidr":              c.ServiceCIDR,
		"name":              c.Name,
	}
	if c.CABundle != "" {
		cluster["certificateAuthority"] = c.CABundle
	}
	localStorage := map[string]any{}
	if r.in.InstanceStorePolicy == string(awsv1.InstanceStorePolicyRAID0) {
		localStorage["strategy"] = "RAID0"
	}
	kubelet := map[string]any{"config": kubeletConfigMap(r)}
	if len(r.labels) > 0 {
		kv := make([]string, 0, len(r.labels))
		for _, k := range slices.Sorted(maps.Keys(r.labels)) {
			kv = append(kv, k+"="+r.labels[k])
		}
		kubelet["flags"] = []any{`--node-labels="` + strings.Join(kv, ",") + `"`}
	}
	return map[string]any{
		"apiVersion": NodeConfigAPIVersion,
		"kind":       NodeConfigKind,
		"metadata":   map[string]any{},
		"spec": map[string]any{
			"cluster":    cluster,
			"containerd": map[string]any{},
			"instance":   map[string]any{"localStorage": localStorage},
			"kubelet":    kubelet,
		},
	}
}

// kubeletConfigMap is the inline KubeletConfiguration (camelCase keys).
func kubeletConfigMap(r resolved) map[string]any {
	k := r.kubelet
	m := map[string]any{"maxPods": int(r.maxPods)}
	if len(r.clusterDNS) > 0 {
		m["clusterDNS"] = toAny(r.clusterDNS)
	}
	if k.PodsPerCore != nil {
		m["podsPerCore"] = int(*k.PodsPerCore)
	}
	putMap := func(key string, v map[string]string) {
		if len(v) > 0 {
			mm := make(map[string]any, len(v))
			for kk, vv := range v {
				mm[kk] = vv
			}
			m[key] = mm
		}
	}
	putMap("systemReserved", k.SystemReserved)
	putMap("kubeReserved", k.KubeReserved)
	putMap("evictionHard", k.EvictionHard)
	putMap("evictionSoft", k.EvictionSoft)
	putMap("evictionSoftGracePeriod", gracePeriods(k.EvictionSoftGracePeriod))
	if k.EvictionMaxPodGracePeriod != nil {
		m["evictionMaxPodGracePeriod"] = int(*k.EvictionMaxPodGracePeriod)
	}
	if k.ImageGCHighThresholdPercent != nil {
		m["imageGCHighThresholdPercent"] = int(*k.ImageGCHighThresholdPercent)
	}
	if k.ImageGCLowThresholdPercent != nil {
		m["imageGCLowThresholdPercent"] = int(*k.ImageGCLowThresholdPercent)
	}
	if k.CPUCFSQuota != nil {
		m["cpuCFSQuota"] = *k.CPUCFSQuota
	}
	taints := make([]any, 0, len(r.taints))
	for _, t := range r.taints {
		tm := map[string]any{"effect": string(t.Effect), "key": t.Key}
		if t.Value != "" {
			tm["value"] = t.Value
		}
		taints = append(taints, tm)
	}
	m["registerWithTaints"] = taints
	return m
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// classifyAL2023 types non-MIME user data: a YAML/JSON map is a NodeConfig
// part, anything else a shell script.
func classifyAL2023(s string) (ct string) {
	if isCloudConfig(s) {
		return mime.ContentTypeCloudConfig
	}
	defer func() {
		if recover() != nil { // the YAML library must not take the renderer down
			ct = mime.ContentTypeShell
		}
	}()
	if strings.HasPrefix(strings.TrimSpace(s), "#!") {
		return mime.ContentTypeShell
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err == nil && len(m) > 0 {
		return mime.ContentTypeNodeadm
	}
	return mime.ContentTypeShell
}

func renderAL2023(r resolved) ([]byte, error) {
	if strings.TrimSpace(r.in.Cluster.ServiceCIDR) == "" {
		return nil, fmt.Errorf("AL2023 NodeConfig needs cluster.cidr: %w", ErrServiceCIDRUnknown)
	}
	parts, err := userParts(r.in.UserData, false, classifyAL2023)
	if err != nil {
		return nil, err
	}
	if r.hook() {
		parts = append(parts, hookPart())
	}
	doc, err := yaml.Marshal(nodeConfig(r))
	if err != nil {
		return nil, fmt.Errorf("marshalling NodeConfig: %w", err)
	}
	parts = append(parts, mime.Part{
		Headers: []mime.Header{{Name: "Content-Type", Value: mime.ContentTypeNodeadm}},
		Body:    append([]byte(nodeConfigComment), doc...),
	})
	out, err := mime.Write(parts)
	if err != nil {
		return nil, fmt.Errorf("%w: spec.userData: %w", ErrInvalidUserData, err)
	}
	return out, nil
}
