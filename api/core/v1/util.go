package v1

import "sort"

// sortedKeys returns the keys of m in order, so errors come out
// deterministically.
func sortedKeys[K ~string, V any, M ~map[K]V](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	return keys
}
