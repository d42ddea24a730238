package userdata

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/userdata/mime"
)

// NodeFacts is what a kubelet started by rendered user data registers with.
type NodeFacts struct {
	Labels  map[string]string
	Taints  []corev1.Taint
	MaxPods int32
	// ClusterDNS is the kube-dns address the kubelet is configured with.
	ClusterDNS string
	// Agent reports whether the Joiner hook is present.
	Agent bool
}

// ErrNoFacts: the family's user data carries no node facts (Custom), or the
// data holds no Joiner bootstrap section.
var ErrNoFacts = errors.New("user data carries no node facts")

var (
	reExtraArgsSh = regexp.MustCompile(`--kubelet-extra-args '((?:[^']|'\\'')*)'`)
	reExtraArgsPS = regexp.MustCompile(`-KubeletExtraArgs '((?:[^']|'')*)'`)
	reDNSSh       = regexp.MustCompile(`--dns-cluster-ip '([^']*)'`)
	reDNSPS       = regexp.MustCompile(`-DNSClusterIP '([^']*)'`)
	reNodeLabels  = regexp.MustCompile(`--node-labels="([^"]*)"`)
	reTaints      = regexp.MustCompile(`--register-with-taints="([^"]*)"`)
	reMaxPods     = regexp.MustCompile(`--max-pods=(\d+)`)
)

// Parse reads rendered user data of the family back into node facts.
func Parse(family string, data []byte) (NodeFacts, error) {
	fam, err := NormaliseFamily(family)
	if err != nil {
		return NodeFacts{}, err
	}
	switch fam {
	case FamilyAL2, FamilyUbuntu:
		return parseAL2(data)
	case FamilyAL2023:
		return parseAL2023(data)
	case FamilyBottlerocket:
		return parseBottlerocket(data)
	case FamilyCustom:
		return NodeFacts{}, fmt.Errorf("family Custom: %w", ErrNoFacts)
	default:
		return parseWindows(data)
	}
}

// parseExtraArgs reads --node-labels, --register-with-taints and --max-pods.
func parseExtraArgs(args string, f *NodeFacts) error {
	if m := reNodeLabels.FindStringSubmatch(args); m != nil {
		labels, err := ParseLabels(m[1])
		if err != nil {
			return err
		}
		for k, v := range labels {
			f.Labels[k] = v
		}
	}
	if m := reTaints.FindStringSubmatch(args); m != nil && m[1] != "" {
		for _, s := range strings.Split(m[1], ",") {
			t, err := ParseTaint(s)
			if err != nil {
				return err
			}
			f.Taints = append(f.Taints, t)
		}
	}
	if m := reMaxPods.FindStringSubmatch(args); m != nil {
		n, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil {
			return fmt.Errorf("--max-pods=%s: %w", m[1], err)
		}
		f.MaxPods = int32(n)
	}
	return nil
}

// ParseLabels reads the kubelet --node-labels form "k1=v1,k2=v2".
func ParseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("node label %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func parseAL2(data []byte) (NodeFacts, error) {
	parts, err := mime.Parse(data)
	if err != nil {
		return NodeFacts{}, err
	}
	f := NodeFacts{Labels: map[string]string{}}
	found := false
	for _, p := range parts {
		body := string(p.Body)
		if strings.Contains(body, "joiner bootstrap") {
			f.Agent = true
		}
		if !strings.Contains(body, "/etc/eks/bootstrap.sh") {
			continue
		}
		m := reExtraArgsSh.FindStringSubmatch(body)
		if m == nil {
			continue
		}
		found = true
		f = NodeFacts{Labels: map[string]string{}, Agent: f.Agent}
		if err := parseExtraArgs(strings.ReplaceAll(m[1], `'\''`, "'"), &f); err != nil {
			return NodeFacts{}, err
		}
		if d := reDNSSh.FindStringSubmatch(body); d != nil {
			f.ClusterDNS = d[1]
		}
	}
	if !found {
		return NodeFacts{}, fmt.Errorf("no bootstrap.sh --kubelet-extra-args: %w", ErrNoFacts)
	}
	return f, nil
}

func parseWindows(data []byte) (NodeFacts, error) {
	s := string(data)
	m := reExtraArgsPS.FindStringSubmatch(s)
	if m == nil {
		return NodeFacts{}, fmt.Errorf("no -KubeletExtraArgs: %w", ErrNoFacts)
	}
	f := NodeFacts{Labels: map[string]string{}}
	if err := parseExtraArgs(strings.ReplaceAll(m[1], "''", "'"), &f); err != nil {
		return NodeFacts{}, err
	}
	if d := reDNSPS.FindStringSubmatch(s); d != nil {
		f.ClusterDNS = d[1]
	}
	return f, nil
}

// NodeConfig is the subset of nodeadm's NodeConfig Parse reads.
type NodeConfig struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		Cluster struct {
			APIServerEndpoint    string `yaml:"apiServerEndpoint"`
			CertificateAuthority string `yaml:"certificateAuthority"`
			CIDR                 string `yaml:"cidr"`
			Name                 string `yaml:"name"`
		} `yaml:"cluster"`
		Instance struct {
			LocalStorage struct {
				Strategy string `yaml:"strategy"`
			} `yaml:"localStorage"`
		} `yaml:"instance"`
		Kubelet struct {
			Config map[string]any `yaml:"config"`
			Flags  []string       `yaml:"flags"`
		} `yaml:"kubelet"`
	} `yaml:"spec"`
}

// ParseNodeConfig decodes one NodeConfig document (a leading comment is fine).
func ParseNodeConfig(body []byte) (NodeConfig, error) {
	var nc NodeConfig
	if err := yaml.Unmarshal(body, &nc); err != nil {
		return NodeConfig{}, fmt.Errorf("NodeConfig: %w", err)
	}
	return nc, nil
}

// parseAL2023 merges the NodeConfig parts in order, as nodeadm does: later
// documents override config keys, flags are appended (the later
// --node-labels entries win per key).
func parseAL2023(data []byte) (NodeFacts, error) {
	parts, err := mime.Parse(data)
	if err != nil {
		return NodeFacts{}, err
	}
	f := NodeFacts{Labels: map[string]string{}}
	config := map[string]any{}
	found := false
	for _, p := range parts {
		if strings.Contains(string(p.Body), "joiner bootstrap") && p.MediaType() == "text/x-shellscript" {
			f.Agent = true
		}
		if p.MediaType() != mime.ContentTypeNodeadm {
			continue
		}
		nc, err := ParseNodeConfig(p.Body)
		if err != nil {
			return NodeFacts{}, err
		}
		found = true
		for k, v := range nc.Spec.Kubelet.Config {
			config[k] = v
		}
		for _, fl := range nc.Spec.Kubelet.Flags {
			if err := parseExtraArgs(fl, &NodeFacts{Labels: f.Labels}); err != nil {
				return NodeFacts{}, err
			}
		}
	}
	if !found {
		return NodeFacts{}, fmt.Errorf("no NodeConfig part: %w", ErrNoFacts)
	}
	if v, ok := config["maxPods"]; ok {
		n, ok := v.(int)
		if !ok {
			return NodeFacts{}, fmt.Errorf("NodeConfig kubelet.config.maxPods: %v is not an integer", v)
		}
		f.MaxPods = int32(n)
	}
	if v, ok := config["clusterDNS"].([]any); ok && len(v) > 0 {
		f.ClusterDNS = fmt.Sprint(v[0])
	}
	if v, ok := config["registerWithTaints"].([]any); ok {
		for i, t := range v {
			tm, ok := t.(map[any]any)
			if !ok {
				return NodeFacts{}, fmt.Errorf("NodeConfig kubelet.config.registerWithTaints[%d]: not a map", i)
			}
			str := func(k string) string {
				if s, ok := tm[k].(string); ok {
					return s
				}
				return ""
			}
			f.Taints = append(f.Taints, corev1.Taint{Key: str("key"), Value: str("value"), Effect: corev1.TaintEffect(str("effect"))})
		}
	}
	return f, nil
}

func parseBottlerocket(data []byte) (NodeFacts, error) {
	m, err := parseTOML(string(data))
	if err != nil {
		return NodeFacts{}, err
	}
	settings, _ := m["settings"].(map[string]any)
	k8s, _ := settings["kubernetes"].(map[string]any)
	if k8s == nil {
		return NodeFacts{}, fmt.Errorf("no settings.kubernetes: %w", ErrNoFacts)
	}
	f := NodeFacts{Labels: map[string]string{}}
	if bc, ok := settings["bootstrap-containers"].(map[string]any); ok {
		_, f.Agent = bc[BottlerocketBootstrapContainer]
	}
	if l, ok := k8s["node-labels"].(map[string]any); ok {
		for k, v := range l {
			f.Labels[k] = fmt.Sprint(v)
		}
	}
	if t, ok := k8s["node-taints"].(map[string]any); ok {
		for _, key := range slices.Sorted(maps.Keys(t)) {
			vals, _ := t[key].([]any)
			for _, v := range vals {
				s, _ := v.(string)
				val, eff, ok := strings.Cut(s, ":")
				if !ok {
					return NodeFacts{}, fmt.Errorf("settings.kubernetes.node-taints.%s: %q is not value:Effect", key, s)
				}
				f.Taints = append(f.Taints, corev1.Taint{Key: key, Value: val, Effect: corev1.TaintEffect(eff)})
			}
		}
	}
	if v, ok := k8s["max-pods"].(int64); ok {
		f.MaxPods = int32(v)
	}
	if v, ok := k8s["cluster-dns-ip"].(string); ok {
		f.ClusterDNS = v
	}
	return f, nil
}
