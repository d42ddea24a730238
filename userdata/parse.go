package userdata

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
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
	// PodsPerCore is the kubelet's podsPerCore (0 = none); see PodCapacity.
	PodsPerCore int32
	// ClusterDNS is the kube-dns address the kubelet is configured with.
	ClusterDNS string
	// Agent reports whether the Joiner hook is present.
	Agent bool
}

// PodCapacity is the pod capacity the kubelet registers on a machine with
// vcpu vCPUs: MaxPods, capped at PodsPerCore x vcpu when both are set (the
// kubelet takes the lower; the user data gives a NodeClass's maxPods as
// is).
func (f NodeFacts) PodCapacity(vcpu int32) int32 {
	if f.PodsPerCore > 0 && vcpu > 0 && f.PodsPerCore*vcpu < f.MaxPods {
		return f.PodsPerCore * vcpu
	}
	return f.MaxPods
}

// ErrNoFacts: the user data carries no node facts (no bootstrap.sh call,
// NodeConfig, settings.kubernetes or Start-EKSBootstrap.ps1 call).
var ErrNoFacts = errors.New("user data carries no node facts")

// psArg matches one PowerShell argument: '...' (” inside), "..." (backtick
// escapes, "" inside) or a bare word.
const psArg = `('(?:[^']|'')*'|"(?:[^"` + "`" + `]|""|` + "`" + `.)*"|[^\s'"]+)`

var (
	rePSExtraArgs = regexp.MustCompile(`(?i)-KubeletExtraArgs\s+` + psArg)
	rePSDNS       = regexp.MustCompile(`(?i)-DNSClusterIP\s+` + psArg)
)

// Parse reads user data of the family back into what the kubelet registers
// with. It reads what Render writes and the stock forms a platform engineer
// writes for an EKS image (a Custom family's user data, a launch template):
//
//   - AL2, Ubuntu: a shell script, alone or as MIME parts, calling
//     /etc/eks/bootstrap.sh (the last call counts): --dns-cluster-ip and
//     --kubelet-extra-args, quoted either way; kubelet flags as --flag=value
//     or --flag value.
//   - AL2023: NodeConfig documents, MIME parts of type application/node.eks.aws
//     or the whole user data, merged in order as nodeadm does; kubelet.flags
//     win over kubelet.config, as on the kubelet's command line.
//   - Bottlerocket: TOML settings.kubernetes; node-taints values a list or
//     one "value:Effect" string, cluster-dns-ip a string or a list.
//   - Windows: the Start-EKSBootstrap.ps1 call's -KubeletExtraArgs and
//     -DNSClusterIP, quoted either way.
//   - Custom: whichever of the above the data is.
func Parse(family string, data []byte) (NodeFacts, error) {
	fam, err := NormaliseFamily(family)
	if err != nil {
		return NodeFacts{}, err
	}
	if fam == FamilyCustom {
		if fam = sniffFamily(data); fam == "" {
			return NodeFacts{}, fmt.Errorf("family Custom: %w", ErrNoFacts)
		}
	}
	switch fam {
	case FamilyAL2, FamilyUbuntu:
		return parseAL2(data)
	case FamilyAL2023:
		return parseAL2023(data)
	case FamilyBottlerocket:
		return parseBottlerocket(data)
	default:
		return parseWindows(data)
	}
}

// sniffFamily is the family whose stock form data is ("" = none).
func sniffFamily(data []byte) string {
	s := string(data)
	switch {
	case strings.Contains(s, "<powershell>") || strings.Contains(s, "Start-EKSBootstrap.ps1"):
		return FamilyWindows2022
	case mime.LooksLikeMIME(data):
		if parts, err := mime.Parse(data); err == nil && slices.ContainsFunc(parts, func(p mime.Part) bool {
			return p.MediaType() == mime.ContentTypeNodeadm
		}) {
			return FamilyAL2023
		}
		return FamilyAL2
	case strings.Contains(s, "/etc/eks/bootstrap.sh"):
		return FamilyAL2
	case isNodeConfig(data):
		return FamilyAL2023
	}
	if m, err := parseTOML(s); err == nil {
		if _, ok := m["settings"]; ok {
			return FamilyBottlerocket
		}
	}
	return ""
}

// scriptParts is the user data as MIME parts: its parts when it is an
// archive, else one part holding all of it, a NodeConfig part when it is
// a NodeConfig document (nodeadm reads those), else a shell script.
func scriptParts(data []byte) ([]mime.Part, error) {
	if mime.LooksLikeMIME(data) {
		return mime.Parse(data)
	}
	ct := mime.ContentTypeShell
	if isNodeConfig(data) {
		ct = mime.ContentTypeNodeadm
	}
	return []mime.Part{{Headers: []mime.Header{{Name: "Content-Type", Value: ct}}, Body: data}}, nil
}

// isScript reports whether cloud-init runs a part as a script: a
// text/x-shellscript part (and its -per-boot/-per-instance/-per-once
// kinds), or text/plain starting with "#!" (cloud-init sniffs those).
func isScript(p mime.Part) bool {
	mt := p.MediaType()
	return strings.HasPrefix(mt, "text/x-shellscript") || (mt == "text/plain" && strings.HasPrefix(string(p.Body), "#!"))
}

// isHook reports whether a part is the Joiner hook (a script calling
// joiner bootstrap).
func isHook(p mime.Part) bool {
	return isScript(p) && strings.Contains(string(p.Body), "joiner bootstrap")
}

// ParseLabels reads the kubelet --node-labels form "k1=v1,k2=v2".
func ParseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("node label %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// parseAL2 reads the last /etc/eks/bootstrap.sh call of the shell parts.
func parseAL2(data []byte) (NodeFacts, error) {
	parts, err := scriptParts(data)
	if err != nil {
		return NodeFacts{}, err
	}
	var call []string
	agent := false
	for _, p := range parts {
		agent = agent || isHook(p)
		if !isScript(p) {
			continue
		}
		for _, cmd := range shellCommands(string(p.Body)) {
			if i := slices.IndexFunc(cmd, func(w string) bool { return strings.HasSuffix(w, "/etc/eks/bootstrap.sh") }); i >= 0 {
				call = cmd[i+1:]
			}
		}
	}
	if call == nil {
		return NodeFacts{}, fmt.Errorf("no /etc/eks/bootstrap.sh call: %w", ErrNoFacts)
	}
	f := NodeFacts{Labels: map[string]string{}, Agent: agent}
	var extra []string
	err = flagValues(call, true, func(name, value string) error {
		switch name {
		case "dns-cluster-ip":
			f.ClusterDNS = value
		case "kubelet-extra-args":
			extra = append(extra, shellWords(value)...)
		}
		return nil
	})
	if err != nil {
		return NodeFacts{}, err
	}
	if err := applyKubeletArgs(extra, &f); err != nil {
		return NodeFacts{}, fmt.Errorf("bootstrap.sh --kubelet-extra-args: %w", err)
	}
	return f, nil
}

// psValue unquotes a PowerShell argument: '...' (” is a quote), "..."
// (backtick escapes, "" is a quote) or a bare word.
func psValue(s string) string {
	switch {
	case len(s) >= 2 && s[0] == '\'':
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	case len(s) >= 2 && s[0] == '"':
		var b strings.Builder
		in := s[1 : len(s)-1]
		for i := 0; i < len(in); i++ {
			switch {
			case in[i] == '`' && i+1 < len(in):
				i++
			case in[i] == '"' && i+1 < len(in) && in[i+1] == '"':
				i++
			}
			b.WriteByte(in[i])
		}
		return b.String()
	}
	return s
}

// parseWindows reads the Start-EKSBootstrap.ps1 call.
func parseWindows(data []byte) (NodeFacts, error) {
	s := string(data)
	m := rePSExtraArgs.FindStringSubmatch(s)
	d := rePSDNS.FindStringSubmatch(s)
	if m == nil && d == nil && !strings.Contains(s, "Start-EKSBootstrap.ps1") {
		return NodeFacts{}, fmt.Errorf("no Start-EKSBootstrap.ps1 call: %w", ErrNoFacts)
	}
	f := NodeFacts{Labels: map[string]string{}}
	if d != nil {
		f.ClusterDNS = psValue(d[1])
	}
	if m != nil {
		if err := applyKubeletArgs(shellWords(psValue(m[1])), &f); err != nil {
			return NodeFacts{}, fmt.Errorf("-KubeletExtraArgs: %w", err)
		}
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

// ParseNodeConfig decodes one NodeConfig document (a leading comment is
// fine). A panic inside the YAML library is turned into an error.
func ParseNodeConfig(body []byte) (nc NodeConfig, err error) {
	defer func() {
		if p := recover(); p != nil {
			nc, err = NodeConfig{}, fmt.Errorf("NodeConfig: %v", p)
		}
	}()
	if err := yaml.Unmarshal(body, &nc); err != nil {
		return NodeConfig{}, fmt.Errorf("NodeConfig: %w", err)
	}
	return nc, nil
}

// isNodeConfig reports whether data is one NodeConfig document.
func isNodeConfig(data []byte) bool {
	nc, err := ParseNodeConfig(data)
	return err == nil && nc.Kind == NodeConfigKind
}

// parseAL2023 merges the NodeConfig documents in order, as nodeadm does:
// later documents override kubelet.config keys, kubelet.flags are
// appended; the flags then apply over the config, as on the kubelet's
// command line.
func parseAL2023(data []byte) (NodeFacts, error) {
	parts, err := scriptParts(data)
	if err != nil {
		return NodeFacts{}, err
	}
	f := NodeFacts{Labels: map[string]string{}}
	config := map[string]any{}
	var flags []string
	found := false
	for _, p := range parts {
		f.Agent = f.Agent || isHook(p)
		if p.MediaType() != mime.ContentTypeNodeadm {
			continue
		}
		nc, err := ParseNodeConfig(p.Body)
		if err != nil {
			return NodeFacts{}, err
		}
		found = true
		maps.Copy(config, nc.Spec.Kubelet.Config)
		for _, fl := range nc.Spec.Kubelet.Flags {
			flags = append(flags, shellWords(fl)...)
		}
	}
	if !found {
		return NodeFacts{}, fmt.Errorf("no NodeConfig: %w", ErrNoFacts)
	}
	if err := applyKubeletConfig(config, &f); err != nil {
		return NodeFacts{}, err
	}
	if err := applyKubeletArgs(flags, &f); err != nil {
		return NodeFacts{}, fmt.Errorf("NodeConfig kubelet.flags: %w", err)
	}
	return f, nil
}

// applyKubeletConfig reads maxPods, podsPerCore, clusterDNS and
// registerWithTaints of an inline KubeletConfiguration (as the YAML decoder
// gives it).
func applyKubeletConfig(config map[string]any, f *NodeFacts) error {
	if v, ok := config["maxPods"]; ok {
		n, ok := v.(int)
		if !ok {
			return fmt.Errorf("NodeConfig kubelet.config.maxPods: %v is not an integer", v)
		}
		f.MaxPods = int32(n)
	}
	if v, ok := config["podsPerCore"]; ok {
		n, ok := v.(int)
		if !ok {
			return fmt.Errorf("NodeConfig kubelet.config.podsPerCore: %v is not an integer", v)
		}
		f.PodsPerCore = int32(n)
	}
	if v, ok := config["clusterDNS"].([]any); ok && len(v) > 0 {
		f.ClusterDNS = fmt.Sprint(v[0])
	}
	v, ok := config["registerWithTaints"].([]any)
	if !ok {
		return nil
	}
	for i, t := range v {
		tm, ok := t.(map[any]any)
		if !ok {
			return fmt.Errorf("NodeConfig kubelet.config.registerWithTaints[%d]: not a map", i)
		}
		str := func(k string) string {
			if s, ok := tm[k].(string); ok {
				return s
			}
			return ""
		}
		f.Taints = append(f.Taints, corev1.Taint{Key: str("key"), Value: str("value"), Effect: corev1.TaintEffect(str("effect"))})
	}
	return nil
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
			for _, s := range stringOrList(t[key]) {
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
	if dns := stringOrList(k8s["cluster-dns-ip"]); len(dns) > 0 {
		f.ClusterDNS = dns[0]
	}
	return f, nil
}

// stringOrList reads a TOML value Bottlerocket takes as one string or a
// list of strings (node-taints values, cluster-dns-ip).
func stringOrList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}
