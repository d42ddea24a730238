package convert

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

func isEmptyKubelet(k *awsv1.KubeletConfiguration) bool {
	return reflect.DeepEqual(k, &awsv1.KubeletConfiguration{})
}

// sameKubelet compares two kubelet blocks by their encoded form, so a
// duration written "60s" in one and "1m" in the other still differs only if
// the text differs (the user sees text).
func sameKubelet(a, b *awsv1.KubeletConfiguration) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// finish moves the legacy pools' kubelet blocks onto the EC2NodeClasses they
// reference (v1 keeps kubelet on the node class). Blocks that agree merge
// into one; blocks that disagree are an error, since one class can carry
// only one.
func (c *converter) finish() error {
	classes := map[string]*awsv1.EC2NodeClass{}
	pools := map[string]string{}
	passedClasses := map[string]bool{}
	for _, o := range c.out {
		switch {
		case o.EC2NodeClass != nil:
			n := o.EC2NodeClass.Name
			if _, dup := classes[n]; dup {
				return fmt.Errorf("%w: EC2NodeClass %s is produced twice (second from %s)", ErrConflict, n, o.Source)
			}
			classes[n] = o.EC2NodeClass
		case o.NodePool != nil:
			n := o.NodePool.Name
			if prev, dup := pools[n]; dup {
				return fmt.Errorf("%w: NodePool %s is produced twice (from %s and %s)", ErrConflict, n, prev, o.Source)
			}
			pools[n] = o.Source
		default:
			if tm, ok := rawTypeMeta(o.Raw); ok && tm.APIVersion == awsv1.SchemeGroupVersion.String() && tm.Kind == "EC2NodeClass" {
				passedClasses[tm.Metadata.Name] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.kubelets)) {
		uses := c.kubelets[name]
		first := uses[0]
		for _, u := range uses[1:] {
			if !sameKubelet(first.kubelet, u.kubelet) {
				return fmt.Errorf("%w: %s %s and %s %s give different kubelet settings to EC2NodeClass %s; v1 keeps kubelet on the EC2NodeClass, so split it into one class per pool and convert again",
					ErrConflict, first.from, first.path, u.from, u.path, name)
			}
		}
		nc, ok := classes[name]
		if !ok {
			j, _ := json.Marshal(first.kubelet)
			where := "is not in the input"
			if passedClasses[name] {
				where = "is already v1 and passed through unchanged"
			}
			for _, u := range uses {
				c.warnf(u.from, "%s cannot move: EC2NodeClass %s %s; dropped, add spec.kubelet %s to it by hand", u.path, name, where, j)
			}
			continue
		}
		nc.Spec.Kubelet = first.kubelet
		for _, u := range uses {
			c.warnf(u.from, "%s moved to EC2NodeClass %s spec.kubelet (v1 keeps kubelet on the node class)", u.path, name)
		}
		var without []string
		for _, p := range c.users[name] {
			found := false
			for _, u := range uses {
				found = found || u.from == p
			}
			if !found {
				without = append(without, p)
			}
		}
		if len(without) > 0 {
			c.warnf("EC2NodeClass "+name, "spec.kubelet now also applies to the nodes of %s, which had no kubelet block", strings.Join(without, ", "))
		}
	}
	return nil
}

func rawTypeMeta(raw []byte) (typeMeta, bool) {
	var tm typeMeta
	j, err := yamlToJSON(raw)
	if err != nil {
		return tm, false
	}
	if json.Unmarshal(j, &tm) != nil {
		return tm, false
	}
	return tm, true
}
