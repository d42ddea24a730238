package userdata

import (
	"errors"
	"fmt"
	"strconv"

	toml "github.com/pelletier/go-toml/v2"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// bottlerocketKubernetesKeys are the settings.kubernetes keys Joiner passes
// through from the user's TOML: exactly the keys of Karpenter's typed
// Bottlerocket kubernetes settings. Karpenter decodes the user's table into
// that type, so any other key (authentication-mode, bootstrap-token,
// provider-id, standalone-mode, ...) is silently dropped; Joiner drops the
// same ones. A key that maps to a table of known fields lists them in
// bottlerocketKubernetesSubKeys.
var bottlerocketKubernetesKeys = map[string]bool{
	"allowed-unsafe-sysctls": true, "api-server": true, "cloud-provider": true,
	"cluster-certificate": true, "cluster-dns-ip": true, "cluster-domain": true,
	"cluster-name": true, "container-log-max-files": true, "container-log-max-size": true,
	"container-log-max-workers": true, "container-log-monitor-interval": true,
	"cpu-cfs-quota-enforced": true, "cpu-manager-policy": true,
	"cpu-manager-policy-options": true, "cpu-manager-reconcile-period": true,
	"credential-providers": true, "device-ownership-from-security-context": true,
	"event-burst": true, "event-qps": true, "eviction-hard": true,
	"eviction-max-pod-grace-period": true, "eviction-soft": true,
	"eviction-soft-grace-period": true, "hostname-override-source": true,
	"ids-per-pod": true, "image-gc-high-threshold-percent": true,
	"image-gc-low-threshold-percent": true, "kube-api-burst": true, "kube-api-qps": true,
	"kube-reserved": true, "log-level": true, "max-pods": true,
	"memory-manager-policy": true, "node-labels": true, "node-taints": true,
	"pod-pids-limit": true, "registry-burst": true, "registry-qps": true,
	"seccomp-default": true, "server-tls-bootstrap": true,
	"shutdown-grace-period": true, "shutdown-grace-period-for-critical-pods": true,
	"single-process-oom-kill": true, "static-pods": true, "system-reserved": true,
	"topology-manager-policy": true, "topology-manager-policy-options": true,
	"topology-manager-scope": true,
}

// bottlerocketKubernetesSubKeys are the fields Karpenter's types know in the
// settings.kubernetes values that are tables of fixed fields; other fields
// are dropped as Karpenter drops them. perEntry: the value is a table of
// named entries (credential-providers.<name>, static-pods.<name>), each
// holding those fields; otherwise the value itself holds them.
var bottlerocketKubernetesSubKeys = map[string]struct {
	perEntry bool
	fields   map[string]bool
}{
	"credential-providers":            {true, map[string]bool{"enabled": true, "cache-duration": true, "image-patterns": true, "environment": true}},
	"static-pods":                     {true, map[string]bool{"enabled": true, "manifest": true}},
	"topology-manager-policy-options": {false, map[string]bool{"prefer-closest-numa-nodes": true, "max-allowable-numa-nodes": true}},
}

// keepFields returns v's fields that are in fields when v is a table, and v
// unchanged otherwise (Bottlerocket reports a value of the wrong type).
func keepFields(v any, fields map[string]bool) any {
	t, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(t))
	for k, fv := range t {
		if fields[k] {
			out[k] = fv
		}
	}
	return out
}

// filterKubernetesValue drops the fields Karpenter's types do not know from
// the value of settings.kubernetes.<key>.
func filterKubernetesValue(key string, v any) any {
	sub, ok := bottlerocketKubernetesSubKeys[key]
	if !ok {
		return v
	}
	if !sub.perEntry {
		return keepFields(v, sub.fields)
	}
	entries, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(entries))
	for name, e := range entries {
		out[name] = keepFields(e, sub.fields)
	}
	return out
}

// BottlerocketBootstrapContainer is the settings.bootstrap-containers entry
// that runs "joiner bootstrap".
const BottlerocketBootstrapContainer = "joiner-bootstrap"

// parseTOML decodes user TOML into a generic map; errors name the line.
// A panic inside the TOML library is turned into an error.
func parseTOML(data string) (m map[string]any, err error) {
	defer func() {
		if p := recover(); p != nil {
			m, err = nil, fmt.Errorf("%w: spec.userData is not valid TOML: %v", ErrInvalidUserData, p)
		}
	}()
	if err := toml.Unmarshal([]byte(data), &m); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%w: spec.userData is not valid TOML: line %d, column %d: %s", ErrInvalidUserData, row, col, de.Error())
		}
		return nil, fmt.Errorf("%w: spec.userData is not valid TOML: %w", ErrInvalidUserData, err)
	}
	return m, nil
}

// subTable returns m[key] as a table, creating it when absent; path names
// the key in errors.
func subTable(m map[string]any, key, path string) (map[string]any, error) {
	v, ok := m[key]
	if !ok {
		t := map[string]any{}
		m[key] = t
		return t, nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: spec.userData %s must be a table, got %T", ErrInvalidUserData, path, v)
	}
	return t, nil
}

// mergeBottlerocket merges the user's TOML with Joiner's settings.
func mergeBottlerocket(r resolved) (map[string]any, error) {
	user := map[string]any{}
	if r.in.UserData != "" {
		var err error
		if user, err = parseTOML(r.in.UserData); err != nil {
			return nil, err
		}
		if user == nil {
			user = map[string]any{}
		}
	}
	// Only the settings table survives at the top level.
	out := map[string]any{}
	if s, ok := user["settings"]; ok {
		out["settings"] = s
	}
	settings, err := subTable(out, "settings", "settings")
	if err != nil {
		return nil, err
	}
	userK8s, err := subTable(settings, "kubernetes", "settings.kubernetes")
	if err != nil {
		return nil, err
	}
	k8s := map[string]any{}
	for k, v := range userK8s {
		if bottlerocketKubernetesKeys[k] {
			k8s[k] = filterKubernetesValue(k, v)
		}
	}
	settings["kubernetes"] = k8s

	c := r.in.Cluster
	k8s["cluster-name"] = c.Name
	k8s["api-server"] = c.Endpoint
	if c.CABundle != "" {
		k8s["cluster-certificate"] = c.CABundle
	}
	k8s["max-pods"] = int64(r.maxPods)
	if len(r.clusterDNS) > 0 {
		k8s["cluster-dns-ip"] = r.clusterDNS[0]
	}

	// node-labels: the user's merged with Joiner's, Joiner wins.
	labels := map[string]any{}
	if v, ok := k8s["node-labels"]; ok {
		ul, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: spec.userData settings.kubernetes.node-labels must be a table, got %T", ErrInvalidUserData, v)
		}
		for k, lv := range ul {
			labels[k] = lv
		}
	}
	for k, v := range r.labels {
		labels[k] = v
	}
	k8s["node-labels"] = labels

	// node-taints: replaced by Joiner's, key -> ["value:Effect", ...].
	taints := map[string]any{}
	for _, t := range r.taints {
		list, _ := taints[t.Key].([]any)
		taints[t.Key] = append(list, t.Value+":"+string(t.Effect))
	}
	k8s["node-taints"] = taints

	k := r.kubelet
	strMap := func(m map[string]string) map[string]any {
		out := make(map[string]any, len(m))
		for kk, vv := range m {
			out[kk] = vv
		}
		return out
	}
	if len(k.SystemReserved) > 0 {
		k8s["system-reserved"] = strMap(k.SystemReserved)
	}
	if len(k.KubeReserved) > 0 {
		k8s["kube-reserved"] = strMap(k.KubeReserved)
	}
	if len(k.EvictionHard) > 0 {
		k8s["eviction-hard"] = strMap(k.EvictionHard)
	}
	if len(k.EvictionSoft) > 0 {
		k8s["eviction-soft"] = strMap(k.EvictionSoft)
	}
	if len(k.EvictionSoftGracePeriod) > 0 {
		k8s["eviction-soft-grace-period"] = strMap(gracePeriods(k.EvictionSoftGracePeriod))
	}
	if k.EvictionMaxPodGracePeriod != nil {
		k8s["eviction-max-pod-grace-period"] = int64(*k.EvictionMaxPodGracePeriod)
	}
	if k.ImageGCHighThresholdPercent != nil {
		k8s["image-gc-high-threshold-percent"] = strconv.Itoa(int(*k.ImageGCHighThresholdPercent))
	}
	if k.ImageGCLowThresholdPercent != nil {
		k8s["image-gc-low-threshold-percent"] = strconv.Itoa(int(*k.ImageGCLowThresholdPercent))
	}
	if k.CPUCFSQuota != nil {
		k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
	}

	if r.in.InstanceStorePolicy == string(awsv1.InstanceStorePolicyRAID0) {
		cmds, err := subTable(settings, "bootstrap-commands", "settings.bootstrap-commands")
		if err != nil {
			return nil, err
		}
		bind := []any{"apiclient", "ephemeral-storage", "bind"}
		if !SupportsDefaultBind(r.in.BottlerocketVersion) {
			bind = append(bind, "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")
		}
		cmds["000-mount-instance-storage"] = map[string]any{
			"commands": []any{
				[]any{"apiclient", "ephemeral-storage", "init"},
				bind,
			},
			"mode":      "always",
			"essential": true,
		}
	}
	if r.hook() {
		bcs, err := subTable(settings, "bootstrap-containers", "settings.bootstrap-containers")
		if err != nil {
			return nil, err
		}
		image := r.in.BootstrapImage
		if image == "" {
			image = DefaultBootstrapImage
		}
		bcs[BottlerocketBootstrapContainer] = map[string]any{
			"source":    image,
			"mode":      "always",
			"essential": true,
		}
	}
	return out, nil
}

func renderBottlerocket(r resolved) (b []byte, err error) {
	doc, err := mergeBottlerocket(r)
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			b, err = nil, fmt.Errorf("%w: cannot re-encode the merged TOML: %v", ErrInvalidUserData, p)
		}
	}()
	out, err := toml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot re-encode the merged TOML: %w", ErrInvalidUserData, err)
	}
	return out, nil
}
