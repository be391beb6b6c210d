package proxy

import "net/http"

// problemDotSegments refuses a path with "." or ".." segments (also
// percent-encoded): routing compares paths as received, so "/public/../admin"
// would take the /public route and reach a backend that resolves it to
// /admin. Clients resolve dot-segments before sending (RFC 3986 section
// 5.2.4); a request that still has them is refused rather than guessed at.
var problemDotSegments = NewProblem(http.StatusBadRequest, "bad-path", "the path has . or .. segments", "")

// problemConnect refuses CONNECT: the gateway is a reverse proxy, and a
// tunnel to whatever authority a client names is not a route (tcp
// listeners are how the gateway carries raw connections).
var problemConnect = NewProblem(http.StatusNotImplemented, "connect-refused", "CONNECT is not supported: this is a reverse proxy", "")

// dotSegment reports whether path has a segment that is ".", "..", or
// their percent-encoded forms ("%2e", "%2E%2e", …).
func dotSegment(path []byte) bool {
	for i := 0; i < len(path); {
		if path[i] != '/' {
			i++
			continue
		}
		j := i + 1
		for j < len(path) && path[j] != '/' {
			j++
		}
		if isDots(path[i+1 : j]) {
			return true
		}
		i = j
	}
	return false
}

// isDots reports whether a segment is one or two dots, each written as
// "." or "%2e" (any case).
func isDots(seg []byte) bool {
	n := 0
	for len(seg) > 0 {
		switch {
		case seg[0] == '.':
			seg = seg[1:]
		case len(seg) >= 3 && seg[0] == '%' && seg[1] == '2' && (seg[2] == 'e' || seg[2] == 'E'):
			seg = seg[3:]
		default:
			return false
		}
		n++
	}
	return n == 1 || n == 2
}
