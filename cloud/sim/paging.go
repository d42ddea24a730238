package sim

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
)

// pageRule is how one EC2 Describe action pages: the MaxResults range it
// accepts and AWS's refusal of a value outside it, the page size when the
// request sets no MaxResults (0: every item in one page), and the ID list
// MaxResults may not be combined with.
type pageRule struct {
	min, max int // max 0: no upper bound
	code     string
	message  func(n int) string
	// size is the page size without MaxResults (0: all).
	size int
	// ids is the ID list parameter MaxResults may not join; idsMessage
	// AWS's refusal (InvalidParameterCombination).
	ids, idsMessage string
}

// pageRules are the paging of the Describe actions the provider pages.
// The ranges, codes and messages of DescribeInstances,
// DescribeInstanceTypes, DescribeInstanceTypeOfferings,
// DescribeLaunchTemplates and DescribeCapacityReservations are the ones
// AWS answers (each action words them differently); the others are paged
// but their MaxResults is not range-checked (AWS documents no range for
// DescribeSpotPriceHistory, where Karpenter sends 2000, and the refusal
// texts of DescribeSubnets, DescribeSecurityGroups and DescribeImages are
// not modelled). DescribeInstanceTypes pages by 100 and
// DescribeInstanceTypeOfferings and DescribeSpotPriceHistory by 1000 even
// without MaxResults; the rest answer everything in one page then.
var pageRules = map[string]pageRule{
	"DescribeInstances": {min: 5, code: "InvalidParameterValue",
		message: func(n int) string {
			return fmt.Sprintf("Value ( %d ) for parameter maxResults is invalid. Expecting a value greater than 5.", n)
		},
		ids: "InstanceId", idsMessage: "The parameter instancesSet cannot be used with the parameter maxResults"},
	"DescribeInstanceTypes": {min: 5, max: 100, size: 100, code: "InvalidMaxResults", message: func(n int) string {
		return fmt.Sprintf("Value ( %d ) for parameter maxResults is invalid. Expecting a value from ( 5 ) to  ( 100 ).", n)
	}},
	"DescribeInstanceTypeOfferings": {min: 5, max: 1000, size: 1000, code: "InvalidMaxResults", message: func(n int) string {
		return fmt.Sprintf("Value ( %d ) for parameter maxResults is invalid. Expecting a value from ( 5 ) to  ( 1000 ).", n)
	}},
	"DescribeLaunchTemplates": {min: 1, max: 200, code: "InvalidParameterValue",
		message: func(int) string { return "Maximum results allowed are between 1 and 200" }},
	"DescribeCapacityReservations": {min: 1, max: 1000, code: "InvalidParameterValue",
		message: func(n int) string {
			return fmt.Sprintf("%d is an invalid value for MaxResults. MaxResults must be null, or between 1 and 1000.", n)
		},
		ids: "CapacityReservationId", idsMessage: "The parameter CapacityReservationIds cannot be used with the parameter MaxResults"},
	"DescribeSpotPriceHistory": {size: 1000},
	"DescribeSubnets":          {},
	"DescribeSecurityGroups":   {},
	"DescribeImages":           {},
}

// invalidToken is EC2's answer to a NextToken it did not hand out for
// this request.
func invalidToken() *apiError {
	return badParam("InvalidPaginationToken", "The specified pagination token is not valid or is expired.")
}

// pageSize checks r's MaxResults against its action's rule and returns
// the page size (0: every item).
func pageSize(r Request) (int, *apiError) {
	rule := pageRules[r.Action]
	raw := r.Get("MaxResults")
	if raw == "" {
		return rule.size, nil
	}
	if rule.ids != "" && len(r.Strings(rule.ids)) > 0 {
		return 0, badParam("InvalidParameterCombination", "%s", rule.idsMessage)
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return 0, badParam("InvalidParameterValue", "Invalid value '%s' for maxResults", raw)
	}
	if rule.message != nil && (n < rule.min || (rule.max > 0 && n > rule.max)) {
		return 0, badParam(rule.code, "%s", rule.message(n))
	}
	if n < 1 {
		return rule.size, nil
	}
	return n, nil
}

// paginate returns the page of items r asks for (MaxResults, NextToken)
// and the NextToken of the page after it ("" for the last). key names an
// item by its index and value; keys must ascend along items, so a page
// resumes after the last key handed out even when items before it went
// away meanwhile (a deleted launch template).
func paginate[T any](r Request, items []T, key func(int, T) string) ([]T, string, *apiError) {
	return paginateAtMost(r, items, key, 0)
}

// paginateAtMost is paginate with pages of at most limit items (0: no
// limit beyond MaxResults and the action's page size).
func paginateAtMost[T any](r Request, items []T, key func(int, T) string, limit int) ([]T, string, *apiError) {
	size, aerr := pageSize(r)
	if aerr != nil {
		return nil, "", aerr
	}
	if limit > 0 && (size == 0 || limit < size) {
		size = limit
	}
	start := 0
	if tok := r.Get("NextToken"); tok != "" {
		after, ok := tokenKey(r, tok)
		if !ok {
			return nil, "", invalidToken()
		}
		start = len(items)
		for i, it := range items {
			if key(i, it) > after {
				start = i
				break
			}
		}
	}
	rest := items[start:]
	if size == 0 || len(rest) <= size {
		return rest, "", nil
	}
	last := start + size - 1
	return rest[:size], pageToken(r, key(last, items[last])), nil
}

// seqKey is the key of the i-th item of a list that only grows.
func seqKey[T any](i int, _ T) string { return fmt.Sprintf("%09d", i) }

// requestPrint identifies a request apart from its paging.
func requestPrint(r Request) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\n", r.Action)
	for _, k := range slices.Sorted(maps.Keys(r.Params)) {
		if k == "NextToken" || k == "MaxResults" {
			continue
		}
		fmt.Fprintf(h, "%s=%q\n", k, r.Params[k])
	}
	return h.Sum64()
}

// pageToken is the NextToken resuming r after the item keyed after.
func pageToken(r Request, after string) string {
	b := binary.BigEndian.AppendUint64(nil, requestPrint(r))
	return base64.RawURLEncoding.EncodeToString(append(b, after...))
}

// tokenKey reads a NextToken of r: the key it resumes after.
func tokenKey(r Request, tok string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 8 || binary.BigEndian.Uint64(b[:8]) != requestPrint(r) {
		return "", false
	}
	return string(b[8:]), true
}
