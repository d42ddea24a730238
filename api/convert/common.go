package convert

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// objectMeta keeps what a user wrote (name, labels, annotations) and drops
// what the API server or a Karpenter controller set.
func objectMeta(in metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: in.Name}
	if len(in.Labels) > 0 {
		out.Labels = copyMap(in.Labels)
	}
	for k, v := range in.Annotations {
		if controllerAnnotation(k) {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	return out
}

// controllerAnnotation reports annotations written by kubectl or Karpenter
// that describe the legacy object and would be wrong on the v1 one.
func controllerAnnotation(k string) bool {
	if k == corev1.LastAppliedConfigAnnotation {
		return true
	}
	if strings.HasPrefix(k, karpv1.Group+"/") || strings.HasPrefix(k, awsv1.Group+"/") {
		return strings.HasSuffix(k, "-hash") || strings.HasSuffix(k, "-hash-version")
	}
	return false
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyTaints(in []corev1.Taint) []corev1.Taint {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Taint, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// legacyLabels maps deprecated label names Karpenter normalised to the
// current ones, beyond karpv1.NormalizedLabels.
var legacyLabels = map[string]string{
	"topology.ebs.csi.aws.com/zone": karpv1.LabelZone,
	"karpenter.sh/provisioner-name": karpv1.LabelNodePool,
}

// normalizeKey returns the current name of a requirement key and whether it
// changed.
func normalizeKey(k string) (string, bool) {
	if n, ok := karpv1.NormalizedLabels[k]; ok {
		return n, true
	}
	if n, ok := legacyLabels[k]; ok {
		return n, true
	}
	return k, false
}

// requirement converts one requirement, normalising its key.
func (c *converter) requirement(what, path, key, op string, values []string, minValues *int) karpv1.NodeSelectorRequirementWithMinValues {
	k, changed := normalizeKey(key)
	if changed {
		c.warnf(what, "%s.key %s is a deprecated label name; written as %s", path, key, k)
	}
	r := karpv1.NodeSelectorRequirementWithMinValues{Key: k, Operator: karpv1.NodeSelectorOperator(op), MinValues: minValues}
	if len(values) > 0 {
		r.Values = append([]string(nil), values...)
	}
	return r
}

// seconds writes a legacy TTL in seconds as a v1 duration, in the largest
// whole unit (3600 -> "1h", 90 -> "90s").
func seconds(n int64) karpv1.Duration {
	var s string
	switch {
	case n != 0 && n%3600 == 0:
		s = strconv.FormatInt(n/3600, 10) + "h"
	case n != 0 && n%60 == 0:
		s = strconv.FormatInt(n/60, 10) + "m"
	default:
		s = strconv.FormatInt(n, 10) + "s"
	}
	d, _ := karpv1.ParseDuration(s)
	return d
}

// nodeClassRef builds a v1 reference from a legacy apiVersion/kind/name.
func nodeClassRef(apiVersion, kind, name string) *karpv1.NodeClassReference {
	group, _, _ := strings.Cut(apiVersion, "/")
	if group == "" {
		group = awsv1.Group
	}
	switch kind {
	case "", "AWSNodeTemplate":
		kind = "EC2NodeClass"
	}
	return &karpv1.NodeClassReference{Group: group, Kind: kind, Name: name}
}
