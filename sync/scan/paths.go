package scan

import (
	"path"
	"slices"
	"strings"
)

// minimalPaths cleans paths and reduces them to the smallest set covering
// the same subtrees: duplicates and paths under another path of the set are
// dropped. "" (or ".") is the whole folder and covers everything. The
// result is sorted by p+"/" and nil for no paths.
func minimalPaths(paths []string) []string {
	if len(paths) == 0 {
		return nil
	}
	keys := make([]string, 0, len(paths))
	for _, p := range paths {
		p = path.Clean(p)
		if p == "." || p == "/" || p == "" {
			return []string{""}
		}
		keys = append(keys, p+"/")
	}
	// Sorted by p+"/", everything under p directly follows p: the strings
	// with the prefix p+"/" are contiguous.
	slices.Sort(keys)
	out := make([]string, 0, len(keys))
	last := ""
	for _, k := range keys {
		if last != "" && strings.HasPrefix(k, last) {
			continue
		}
		last = k
		out = append(out, strings.TrimSuffix(k, "/"))
	}
	return out
}

// isUnder reports whether name is dir or inside it; every name is under "".
func isUnder(name, dir string) bool {
	return dir == "" || name == dir || strings.HasPrefix(name, dir) && len(name) > len(dir) && name[len(dir)] == '/'
}
