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

// finish does what needs the whole stream: it drops objects produced twice,
// moves the legacy pools' kubelet blocks to their EC2NodeClasses and gives
// converted NodeClaims their NodePool's expireAfter. Each problem fails the
// document it is in.
func (c *converter) finish() {
	c.dropDuplicates()
	c.moveKubelets()
	c.claimExpiry()
}

// dropDuplicates fails every document that produces an object of a kind
// and name an earlier document produced.
func (c *converter) dropDuplicates() {
	first := map[string]string{}
	failed := map[string]bool{}
	for _, o := range c.out {
		_, kind, name := o.converted()
		if kind == "" || failed[o.Source] {
			continue
		}
		key := kind + " " + name
		if src, dup := first[key]; dup && src != o.Source {
			c.errs = append(c.errs, o.fail(fmt.Errorf("%w: %s is produced twice (first from %s)", ErrConflict, key, src)))
			failed[o.Source] = true
			continue
		}
		first[key] = o.Source
	}
	for _, s := range slices.Sorted(maps.Keys(failed)) {
		c.drop(s)
	}
}

// moveKubelets moves the legacy pools' kubelet blocks onto the
// EC2NodeClasses they reference (v1 keeps kubelet on the node class), as
// Karpenter's v1 migration guide asks. Blocks that agree merge into one; a
// pool whose block differs from the first one for its class fails, since
// one class carries one block.
func (c *converter) moveKubelets() {
	classes := map[string]*awsv1.EC2NodeClass{}
	passed := map[string]bool{}
	pools := map[string][]Object{}
	for _, o := range c.out {
		switch {
		case o.EC2NodeClass != nil:
			classes[o.EC2NodeClass.Name] = o.EC2NodeClass
		case o.NodePool != nil:
			ref := o.NodePool.Spec.Template.Spec.NodeClassRef.Name
			pools[ref] = append(pools[ref], o)
		case o.Raw != nil:
			if tm, ok := rawTypeMeta(o.Raw); ok && tm.APIVersion == awsv1.SchemeGroupVersion.String() && tm.Kind == "EC2NodeClass" {
				passed[tm.Metadata.Name] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		uses := c.agreeingKubelets(name, pools[name])
		if len(uses) == 0 {
			continue
		}
		nc, ok := classes[name]
		if !ok {
			c.kubeletStays(name, uses, passed[name])
			continue
		}
		nc.Spec.Kubelet = uses[0].kubelet
		for _, u := range uses {
			c.warnf(u.what, "%s moved to EC2NodeClass %s spec.kubelet (v1 keeps kubelet on the node class)", u.kubeletPath, name)
		}
		var without []string
		for _, p := range pools[name] {
			if p.kubelet == nil {
				without = append(without, p.what)
			}
		}
		if len(without) > 0 {
			c.warnf("EC2NodeClass "+name, "spec.kubelet now also applies to the nodes of %s, which had no kubelet block", strings.Join(without, ", "))
		}
	}
}

// agreeingKubelets returns the pools of class name that carry a kubelet
// block equal to the first one; the others fail.
func (c *converter) agreeingKubelets(name string, pools []Object) []Object {
	var uses []Object
	for _, p := range pools {
		if p.kubelet == nil {
			continue
		}
		if len(uses) > 0 && !sameKubelet(uses[0].kubelet, p.kubelet) {
			first := uses[0]
			c.errs = append(c.errs, p.fail(fmt.Errorf("%w: %s gives EC2NodeClass %s other kubelet settings than %s %s; v1 keeps kubelet on the EC2NodeClass, so point this pool at a class of its own and convert again",
				ErrConflict, p.kubeletPath, name, first.what, first.kubeletPath)))
			c.drop(p.Source)
			continue
		}
		uses = append(uses, p)
	}
	return uses
}

// kubeletStays warns that the kubelet blocks for class name have nowhere to
// go: the class is not converted here.
func (c *converter) kubeletStays(name string, uses []Object, passed bool) {
	j, _ := json.Marshal(uses[0].kubelet)
	where := "is not in the input"
	if passed {
		where = "is already v1 and passed through unchanged"
	}
	for _, u := range uses {
		c.warnf(u.what, "%s cannot move: EC2NodeClass %s %s; dropped, add spec.kubelet %s to it by hand", u.kubeletPath, name, where, j)
	}
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
