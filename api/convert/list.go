package convert

import (
	"encoding/json"
	"fmt"
)

// list handles a `kind: List` (kubectl get -o yaml): when it holds legacy
// Karpenter items, directly or in a List among its items, each item becomes
// its own document (converted, split again if it is such a List, or
// re-encoded); otherwise the list passes through unchanged. So no document
// of the output is a List holding legacy items, and the output converts to
// itself. An item that does not convert is reported on its own.
func (c *converter) list(d document, where string, j []byte) {
	items, ok, tooDeep := listItems(j, 1)
	if !ok || !holdsLegacy(items) {
		c.pass(d.raw, where)
		return
	}
	if tooDeep {
		// a List past the depth, once its own document, could be split
		// on the next conversion
		c.failf(where, "List", fmt.Errorf("%w: a List nested more than %d Lists deep in a List holding legacy Karpenter objects; flatten it", ErrMalformed, maxListDepth))
		return
	}
	c.splitList(where, items)
}

// maxListDepth bounds how deep Lists nested in a List are looked into.
const maxListDepth = 8

// listItem is one item of a v1 List.
type listItem struct {
	raw json.RawMessage
	tm  typeMeta
	// items are the item's own items when it is a List (ok) nested at most
	// maxListDepth deep.
	items []listItem
	ok    bool
}

// listItems decodes the items of the List j, nested depth deep, and the
// Lists among them; ok is false when j has no items array. tooDeep reports
// a List among them nested deeper than maxListDepth (not looked into).
func listItems(j []byte, depth int) (items []listItem, ok, tooDeep bool) {
	if depth > maxListDepth {
		return nil, false, true
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(j, &l); err != nil {
		return nil, false, false
	}
	items = make([]listItem, len(l.Items))
	for i, it := range l.Items {
		items[i].raw = it
		// apiVersion/kind/name of the wrong type leave them empty
		_ = json.Unmarshal(it, &items[i].tm)
		if isList(items[i].tm) {
			var deep bool
			items[i].items, items[i].ok, deep = listItems(it, depth+1)
			tooDeep = tooDeep || deep
		}
	}
	return items, true, tooDeep
}

// holdsLegacy reports whether items, or the items of a List among them,
// hold a legacy Karpenter object.
func holdsLegacy(items []listItem) bool {
	for _, it := range items {
		if isLegacy(it.tm) || it.ok && holdsLegacy(it.items) {
			return true
		}
	}
	return false
}

// splitList makes one document of each item of a List holding legacy items.
func (c *converter) splitList(where string, items []listItem) {
	c.warnf(where, "List split into one document per item")
	for i, it := range items {
		w := fmt.Sprintf("%s items[%d]", where, i)
		if it.ok && holdsLegacy(it.items) {
			c.splitList(w, it.items)
			continue
		}
		objs, err := c.object(w, it.tm, it.raw)
		if err != nil {
			c.failf(w, it.tm.what(), err)
			continue
		}
		if objs == nil {
			y, err := toYAML(it.raw)
			if err != nil {
				c.failf(w, "", err)
				continue
			}
			c.pass(y, w)
			continue
		}
		c.out = append(c.out, objs...)
	}
}
