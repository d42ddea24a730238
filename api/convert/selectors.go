package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	awsv1alpha1 "github.com/joiner-dev/joiner/api/legacy/aws/v1alpha1"
)

// maxTerms is the v1 limit on selector terms.
const maxTerms = 30

// parsedSelector is a v1alpha1 selector map taken apart: the special keys
// and the tag filters. Values are comma-separated lists in v1alpha1.
type parsedSelector struct {
	ids, names, owners []string
	// tagTerms is the cartesian product of the tag filters' values: each
	// element is one v1 tags map. v1alpha1 matched any of a key's values and
	// all keys; v1 ANDs the tags of a term and ORs terms.
	tagTerms []map[string]string
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseSelector(path string, m map[string]string, allowAMIKeys bool) (parsedSelector, error) {
	var p parsedSelector
	tags := map[string][]string{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch {
		case k == awsv1alpha1.SelectorIDs || k == awsv1alpha1.SelectorIDsLegacy:
			p.ids = append(p.ids, splitList(v)...)
		case allowAMIKeys && k == awsv1alpha1.SelectorName:
			p.names = append(p.names, splitList(v)...)
		case allowAMIKeys && k == awsv1alpha1.SelectorOwners:
			p.owners = append(p.owners, splitList(v)...)
		case strings.HasPrefix(k, "aws::"):
			return p, fmt.Errorf("%s[%s]: unknown special key (known: aws::ids, aws-ids%s)", path, k, map[bool]string{true: ", aws::name, aws::owners"}[allowAMIKeys])
		default:
			vals := splitList(v)
			if len(vals) == 0 {
				return p, fmt.Errorf("%s[%s]: empty value", path, k)
			}
			tags[k] = vals
		}
	}
	if len(tags) > 0 {
		p.tagTerms = []map[string]string{{}}
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			p.tagTerms = crossTags(p.tagTerms, k, tags[k])
			if len(p.tagTerms) > maxTerms {
				return p, fmt.Errorf("%s: comma-separated tag values expand to more than %d selector terms", path, maxTerms)
			}
		}
	}
	return p, nil
}

// crossTags adds key k to the tag terms, one term per value and term, in
// karpenter-convert's order: the values outside, the terms so far inside
// (a: "1,2" then b: "x,y" give {a:1 b:x} {a:2 b:x} {a:1 b:y} {a:2 b:y}).
func crossTags(terms []map[string]string, k string, values []string) []map[string]string {
	var next []map[string]string
	for _, v := range values {
		for _, t := range terms {
			n := copyMap(t)
			n[k] = v
			next = append(next, n)
		}
	}
	return next
}

// idsWin warns that tag filters next to aws::ids are dropped: the ids name
// the exact set and v1 does not allow tags in an id term.
func (c *converter) idsWin(what, path string, p parsedSelector, others string) {
	if len(p.ids) > 0 && (len(p.tagTerms) > 0 || len(p.names) > 0 || len(p.owners) > 0) {
		c.warnf(what, "%s: %s next to aws::ids have no v1 equivalent (an id term cannot carry other filters); dropped, the ids are kept", path, others)
	}
}

func (c *converter) subnetTerms(what, path string, m map[string]string) ([]awsv1.SubnetSelectorTerm, error) {
	return idOrTagTerms(c, what, path, m, func(id string, tags map[string]string) awsv1.SubnetSelectorTerm {
		return awsv1.SubnetSelectorTerm{ID: id, Tags: tags}
	})
}

func (c *converter) securityGroupTerms(what, path string, m map[string]string) ([]awsv1.SecurityGroupSelectorTerm, error) {
	return idOrTagTerms(c, what, path, m, func(id string, tags map[string]string) awsv1.SecurityGroupSelectorTerm {
		return awsv1.SecurityGroupSelectorTerm{ID: id, Tags: tags}
	})
}

// idOrTagTerms converts a subnet or security group selector: one term per
// id when it names ids, else one per tag combination.
func idOrTagTerms[T any](c *converter, what, path string, m map[string]string, term func(id string, tags map[string]string) T) ([]T, error) {
	p, err := parseSelector(path, m, false)
	if err != nil {
		return nil, err
	}
	var out []T
	c.idsWin(what, path, p, "tag filters")
	if len(p.ids) > 0 {
		for _, id := range p.ids {
			out = append(out, term(id, nil))
		}
	} else {
		for _, t := range p.tagTerms {
			out = append(out, term("", t))
		}
	}
	if len(out) > maxTerms {
		return nil, fmt.Errorf("%s: %d selector terms, v1 allows %d", path, len(out), maxTerms)
	}
	return out, nil
}

// amiTerms converts an amiSelector: ids become one term each; otherwise one
// term per owner, name and tag combination, in karpenter-convert's order
// (owners outside, tags inside).
func (c *converter) amiTerms(what, path string, m map[string]string) ([]awsv1.AMISelectorTerm, error) {
	if len(m) == 0 {
		return nil, nil
	}
	p, err := parseSelector(path, m, true)
	if err != nil {
		return nil, err
	}
	var out []awsv1.AMISelectorTerm
	c.idsWin(what, path, p, "aws::name, aws::owners and tag filters")
	if len(p.ids) > 0 {
		for _, id := range p.ids {
			out = append(out, awsv1.AMISelectorTerm{ID: id})
		}
		return out, nil
	}
	names, owners, tags := p.names, p.owners, p.tagTerms
	if len(names) == 0 {
		names = []string{""}
	}
	if len(owners) == 0 {
		owners = []string{""}
	}
	if len(tags) == 0 {
		tags = []map[string]string{nil}
	}
	for _, o := range owners {
		for _, n := range names {
			for _, t := range tags {
				if n == "" && len(t) == 0 {
					// An owner alone selects nothing in v1: every term needs
					// tags, id, name, alias or ssmParameter.
					return nil, fmt.Errorf("%s: aws::owners without aws::name or tags has no v1 equivalent", path)
				}
				out = append(out, awsv1.AMISelectorTerm{Name: n, Owner: o, Tags: copyMap(t)})
				if len(out) > maxTerms {
					return nil, fmt.Errorf("%s: expands to more than %d selector terms", path, maxTerms)
				}
			}
		}
	}
	return out, nil
}
