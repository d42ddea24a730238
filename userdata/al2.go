package userdata

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/userdata/mime"
)

// hookScript is the Joiner hook part (see the package doc).
const hookScript = `#!/bin/bash
# Joiner hook: prepare data volumes and start the Joiner agent before the kubelet starts.
set -euo pipefail
exec > >(tee -a /var/log/joiner-bootstrap.log | logger -t joiner-bootstrap -s 2>/dev/console) 2>&1
export PATH="/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin:${PATH:-}"
joiner bootstrap
`

func hookPart() mime.Part {
	return mime.Part{
		Headers: []mime.Header{{Name: "Content-Type", Value: mime.ContentTypeShell}},
		Body:    []byte(hookScript),
	}
}

// shellQuote single-quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// kubeletExtraArgs is the --kubelet-extra-args content shared by AL2, Ubuntu
// and Windows, in Karpenter's order; map entries sorted by key.
func kubeletExtraArgs(r resolved) string {
	var args []string
	if len(r.labels) > 0 {
		kv := make([]string, 0, len(r.labels))
		for _, k := range slices.Sorted(maps.Keys(r.labels)) {
			kv = append(kv, k+"="+r.labels[k])
		}
		args = append(args, `--node-labels="`+strings.Join(kv, ",")+`"`)
	}
	ts := make([]string, 0, len(r.taints))
	for _, t := range r.taints {
		ts = append(ts, taintString(t))
	}
	args = append(args, `--register-with-taints="`+strings.Join(ts, ",")+`"`)
	k := r.kubelet
	args = append(args, "--max-pods="+strconv.Itoa(int(r.maxPods)))
	if k.PodsPerCore != nil {
		args = append(args, "--pods-per-core="+strconv.Itoa(int(*k.PodsPerCore)))
	}
	joinMap := func(flag string, m map[string]string, sep string) {
		if len(m) == 0 {
			return
		}
		kv := make([]string, 0, len(m))
		for _, key := range slices.Sorted(maps.Keys(m)) {
			kv = append(kv, key+sep+m[key])
		}
		args = append(args, flag+`="`+strings.Join(kv, ",")+`"`)
	}
	joinMap("--system-reserved", k.SystemReserved, "=")
	joinMap("--kube-reserved", k.KubeReserved, "=")
	joinMap("--eviction-hard", k.EvictionHard, "<")
	joinMap("--eviction-soft", k.EvictionSoft, "<")
	joinMap("--eviction-soft-grace-period", gracePeriods(k.EvictionSoftGracePeriod), "=")
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, "--eviction-max-pod-grace-period="+strconv.Itoa(int(*k.EvictionMaxPodGracePeriod)))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, "--image-gc-high-threshold="+strconv.Itoa(int(*k.ImageGCHighThresholdPercent)))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, "--image-gc-low-threshold="+strconv.Itoa(int(*k.ImageGCLowThresholdPercent)))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, "--cpu-cfs-quota="+strconv.FormatBool(*k.CPUCFSQuota))
	}
	return strings.Join(args, " ")
}

// gracePeriods renders durations as Go duration strings ("1m0s").
func gracePeriods(m map[string]karpv1.Duration) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, d := range m {
		if d.Duration != nil {
			out[k] = d.Duration.String()
		} else {
			out[k] = d.String()
		}
	}
	return out
}

// bootstrapSh renders the AL2/Ubuntu bootstrap.sh script.
func bootstrapSh(r resolved) string {
	c := r.in.Cluster
	var b strings.Builder
	b.WriteString("#!/bin/bash -xe\n")
	b.WriteString("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	b.WriteString("/etc/eks/bootstrap.sh " + shellQuote(c.Name) + " --apiserver-endpoint " + shellQuote(c.Endpoint))
	if c.CABundle != "" {
		b.WriteString(" --b64-cluster-ca " + shellQuote(c.CABundle))
	}
	flag := func(s string) { b.WriteString(" \\\n" + s) }
	if len(r.clusterDNS) > 0 {
		if a, err := netip.ParseAddr(r.clusterDNS[0]); err == nil && !a.Is4() {
			flag("--ip-family ipv6")
		}
		flag("--dns-cluster-ip " + shellQuote(r.clusterDNS[0]))
	} else if strings.EqualFold(c.IPFamily, "ipv6") {
		flag("--ip-family ipv6")
	}
	flag("--use-max-pods false")
	flag("--kubelet-extra-args " + shellQuote(kubeletExtraArgs(r)))
	if r.in.InstanceStorePolicy == string(awsv1.InstanceStorePolicyRAID0) {
		flag("--local-disks raid0")
	}
	b.WriteString("\n")
	return b.String()
}

// userParts turns the user's userData into MIME parts. keepHeaders keeps
// every part header (AL2); otherwise only Content-Type survives (AL2023).
// classify decides the content type of non-MIME user data.
func userParts(userData string, keepHeaders bool, classify func(string) string) ([]mime.Part, error) {
	if strings.TrimSpace(userData) == "" {
		return nil, nil
	}
	if !mime.LooksLikeMIME([]byte(userData)) {
		return []mime.Part{{
			Headers: []mime.Header{{Name: "Content-Type", Value: classify(userData)}},
			Body:    []byte(userData),
		}}, nil
	}
	parts, err := mime.Parse([]byte(userData))
	if err != nil {
		return nil, fmt.Errorf("%w: spec.userData: %w", ErrInvalidUserData, err)
	}
	if !keepHeaders {
		for i, p := range parts {
			parts[i].Headers = []mime.Header{{Name: "Content-Type", Value: p.ContentType()}}
		}
	}
	return parts, nil
}

// shellType types non-MIME AL2/Ubuntu user data: a #cloud-config document
// keeps its type (cloud-init would not run it as a script), anything else is
// a shell script (Karpenter wraps everything as a script).
func shellType(s string) string {
	if isCloudConfig(s) {
		return mime.ContentTypeCloudConfig
	}
	return mime.ContentTypeShell
}

func isCloudConfig(s string) bool {
	return strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "#cloud-config")
}

// renderAL2 renders AL2 and Ubuntu user data.
func renderAL2(r resolved) ([]byte, error) {
	parts, err := userParts(r.in.UserData, true, shellType)
	if err != nil {
		return nil, err
	}
	if r.hook() {
		parts = append(parts, hookPart())
	}
	parts = append(parts, mime.Part{
		Headers: []mime.Header{{Name: "Content-Type", Value: mime.ContentTypeShell}},
		Body:    []byte(bootstrapSh(r)),
	})
	out, err := mime.Write(parts)
	if err != nil {
		return nil, fmt.Errorf("%w: spec.userData: %w", ErrInvalidUserData, err)
	}
	return out, nil
}
