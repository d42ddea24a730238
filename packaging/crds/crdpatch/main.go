// Command crdpatch adds to the CRDs controller-gen wrote what markers cannot
// express: rules on types Joiner does not own (corev1.Taint,
// metav1.Condition), on map values, on a list rather than its items, and
// rules that differ between two CRDs sharing a Go type. They are the rules
// Karpenter v1.14's hack/validation scripts (core: taint.sh,
// requirements.sh, labels.sh, status.sh; AWS provider: kubelet.sh,
// requirements.sh, labels.sh) add to its CRDs after generation, word for
// word, so the CRDs give Karpenter's verdicts. Patching is idempotent.
//
// Usage: go run ./packaging/crds/crdpatch packaging/crds
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Patterns Karpenter's scripts set.
const (
	// QualifiedNamePattern: taint keys and values (a value with a "/" is
	// accepted, as in Karpenter), requirement keys.
	QualifiedNamePattern = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// LabelValuePattern: template label values and (on the list, where the
	// API server does not apply it) requirement values.
	LabelValuePattern = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// QuantityPattern: kubelet kubeReserved and systemReserved values.
	QuantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
	// EvictionPattern: kubelet evictionHard and evictionSoft values, a
	// percentage or a quantity (or, through its empty alternative, "").
	EvictionPattern = `^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$`
	// ConditionReasonPattern: a NodeClaim condition's reason may be empty.
	ConditionReasonPattern = `^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$`
)

// The karpenter.k8s.aws labels a NodePool template label (AWSLabelsForLabels,
// with Karpenter's repeated capacity-reservation-interruptible) or a
// requirement key (AWSLabelsForRequirements) may use, in the order of the
// AWS provider's hack/validation scripts. packaging/crds tests check them
// against api/core/v1's AWSProviderLabels.
var (
	AWSLabelsForLabels = []string{
		"instance-tenancy", "capacity-reservation-type", "capacity-reservation-id", "capacity-reservation-interruptible",
		"capacity-reservation-interruptible", "ec2nodeclass", "instance-encryption-in-transit-supported", "instance-category",
		"instance-hypervisor", "instance-family", "instance-generation", "instance-local-nvme", "instance-size", "instance-cpu",
		"instance-cpu-manufacturer", "instance-cpu-sustained-clock-speed-mhz", "instance-memory", "instance-ebs-bandwidth",
		"instance-network-bandwidth", "instance-gpu-name", "instance-gpu-manufacturer", "instance-gpu-count", "instance-gpu-memory",
		"instance-accelerator-name", "instance-accelerator-manufacturer", "instance-accelerator-count", "instance-capability-flex",
		"placement-group-id", "placement-group-partition",
	}
	AWSLabelsForRequirements = []string{
		"instance-tenancy", "capacity-reservation-type", "capacity-reservation-id", "capacity-reservation-interruptible",
		"ec2nodeclass", "instance-encryption-in-transit-supported", "instance-category", "instance-hypervisor", "instance-family",
		"instance-generation", "instance-local-nvme", "instance-size", "instance-cpu", "instance-cpu-manufacturer",
		"instance-cpu-sustained-clock-speed-mhz", "instance-memory", "instance-ebs-bandwidth", "instance-network-bandwidth",
		"instance-gpu-name", "instance-gpu-manufacturer", "instance-gpu-count", "instance-gpu-memory", "instance-accelerator-name",
		"instance-accelerator-manufacturer", "instance-accelerator-count", "instance-capability-flex", "placement-group-id",
		"placement-group-partition",
	}
)

const awsDomain = "karpenter.k8s.aws"

func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", awsDomain+"/"+n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func rule(message, rule string) map[string]any {
	return map[string]any{"message": message, "rule": rule}
}

// labelRules are the NodePool template label rules (labels.sh).
func labelRules() []any {
	return []any{
		rule(`label domain "karpenter.sh" is restricted`, `self.all(x, x in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !x.find("^([^/]+)").endsWith("karpenter.sh"))`),
		rule(`label "karpenter.sh/nodepool" is restricted`, `self.all(x, x != "karpenter.sh/nodepool")`),
		rule(`label "kubernetes.io/hostname" is restricted`, `self.all(x, x != "kubernetes.io/hostname")`),
		rule(`label domain "karpenter.k8s.aws" is restricted`, `self.all(x, x in `+quotedList(AWSLabelsForLabels)+` || !x.find("^([^/]+)").endsWith("karpenter.k8s.aws"))`),
	}
}

// keyRules are the requirement key rules (requirements.sh); a NodePool's
// also forbid karpenter.sh/nodepool.
func keyRules(nodePool bool) []any {
	out := []any{rule(`label domain "karpenter.sh" is restricted`, `self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")`)}
	if nodePool {
		out = append(out, rule(`label "karpenter.sh/nodepool" is restricted`, `self != "karpenter.sh/nodepool"`))
	}
	return append(out,
		rule(`label "kubernetes.io/hostname" is restricted`, `self != "kubernetes.io/hostname"`),
		rule(`label domain "karpenter.k8s.aws" is restricted`, `self in `+quotedList(AWSLabelsForRequirements)+` || !self.find("^([^/]+)").endsWith("karpenter.k8s.aws")`),
	)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "karpenter.*.yaml"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no CRDs in %s", os.Args[1])
	}
	for _, f := range files {
		if err == nil {
			err = patchFile(f)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdpatch:", err)
		os.Exit(1)
	}
}

func patchFile(name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := Patch(doc); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	out = append([]byte("---\n"), out...)
	if bytes.Equal(out, b) {
		return nil
	}
	return os.WriteFile(name, out, 0o644)
}

// Patch applies the patches of the CRD doc (by its metadata.name).
func Patch(doc map[string]any) error {
	name, _ := get(doc, "metadata", "name").(string)
	versions, _ := get(doc, "spec", "versions").([]any)
	if len(versions) != 1 {
		return fmt.Errorf("want one version, got %d", len(versions))
	}
	root, _ := get(versions[0], "schema", "openAPIV3Schema").(map[string]any)
	if root == nil {
		return fmt.Errorf("no openAPIV3Schema")
	}
	p := &patcher{root: root}
	switch name {
	case "nodepools.karpenter.sh":
		p.claimSpec("spec", "template", "spec")
		p.set(keyRules(true), "x-kubernetes-validations", "spec", "template", "spec", "requirements", "[]", "key")
		labels := []string{"spec", "template", "metadata", "labels"}
		p.set(labelRules(), "x-kubernetes-validations", labels...)
		p.set(int64(63), "maxLength", append(labels, "{}")...)
		p.set(LabelValuePattern, "pattern", append(labels, "{}")...)
	case "nodeclaims.karpenter.sh":
		p.claimSpec("spec")
		p.set(keyRules(false), "x-kubernetes-validations", "spec", "requirements", "[]", "key")
		cond := []string{"status", "conditions", "[]"}
		if reason := p.schema(append(cond, "reason")...); reason != nil {
			delete(reason, "minLength")
		}
		p.set(ConditionReasonPattern, "pattern", append(cond, "reason")...)
		p.set([]any{"lastTransitionTime", "status", "type"}, "required", cond...)
	case "ec2nodeclasses.karpenter.k8s.aws":
		kubelet := []string{"spec", "kubelet"}
		for _, f := range []string{"kubeReserved", "systemReserved"} {
			p.set(QuantityPattern, "pattern", append(kubelet, f, "{}")...)
		}
		for _, f := range []string{"evictionHard", "evictionSoft"} {
			p.set(EvictionPattern, "pattern", append(kubelet, f, "{}")...)
		}
	default:
		return fmt.Errorf("unknown CRD %q", name)
	}
	return p.err
}

// claimSpec patches the taints and requirement values of a NodeClaim spec
// (or a NodePool's template spec) at path.
func (p *patcher) claimSpec(path ...string) {
	at := func(more ...string) []string { return append(append([]string{}, path...), more...) }
	for _, f := range []string{"taints", "startupTaints"} {
		p.set([]any{"NoSchedule", "PreferNoSchedule", "NoExecute"}, "enum", at(f, "[]", "effect")...)
		p.set(int64(1), "minLength", at(f, "[]", "key")...)
		p.set(QualifiedNamePattern, "pattern", at(f, "[]", "key")...)
		p.set(QualifiedNamePattern, "pattern", at(f, "[]", "value")...)
	}
	values := at("requirements", "[]", "values")
	p.set(int64(63), "maxLength", values...)
	p.set(LabelValuePattern, "pattern", values...)
}

type patcher struct {
	root map[string]any
	err  error
}

// schema returns the schema at path: property names, "[]" for items and
// "{}" for additionalProperties.
func (p *patcher) schema(path ...string) map[string]any {
	s := p.root
	for _, step := range path {
		var next any
		switch step {
		case "[]":
			next = s["items"]
		case "{}":
			next = s["additionalProperties"]
		default:
			next = get(s, "properties", step)
		}
		m, ok := next.(map[string]any)
		if !ok {
			if p.err == nil {
				p.err = fmt.Errorf("no schema at %s", strings.Join(path, "."))
			}
			return nil
		}
		s = m
	}
	return s
}

func (p *patcher) set(v any, key string, path ...string) {
	if s := p.schema(path...); s != nil {
		s[key] = v
	}
}

func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
