package route

import "strings"

// HasPrefix reports whether path matches prefix on segment boundaries, as
// Match.Prefix does: path is prefix, or continues it with "/", or prefix
// ends in "/" and path starts with it.
func HasPrefix(path, prefix string) bool { return hasPrefix(path, prefix) }

func hasPrefix(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || prefix == "" || prefix[len(prefix)-1] == '/' || path[len(prefix)] == '/'
}

// RewritePrefix appends to dst path with prefix replaced by replacement,
// and returns the extended slice. The prefix matches as in HasPrefix; a
// path it does not match is appended unchanged. The two parts are joined by
// exactly one "/" (so "/api" → "/" turns "/api/users" into "/users", not
// "//users", and "/api/" → "/v2" turns "/api/users" into "/v2/users");
// further slashes in the rest of the path are kept as they are. The result
// always begins with "/": the path that is just the prefix becomes
// replacement, or "/" when replacement is empty, and a replacement without a
// leading "/" gets one. It allocates only when dst lacks capacity.
func RewritePrefix(dst []byte, path, prefix, replacement string) []byte {
	if !hasPrefix(path, prefix) {
		return append(dst, path...)
	}
	rest := path[len(prefix):]
	if rest == "" {
		if replacement == "" || replacement[0] != '/' {
			dst = append(dst, '/')
		}
		return append(dst, replacement...)
	}
	head := strings.TrimSuffix(replacement, "/")
	if head != "" && head[0] != '/' {
		dst = append(dst, '/')
	}
	dst = append(dst, head...)
	dst = append(dst, '/')
	return append(dst, strings.TrimPrefix(rest, "/")...)
}
