package httpwire

// RequestHead is a parsed request line and header section. Its slices
// point into the buffer it was parsed from. Reuse one head across requests
// (ParseRequestHead resets it) to keep Fields' capacity.
type RequestHead struct {
	// Method is the method as received (a token; methods are case-sensitive).
	Method []byte
	// Target is the request-target as received.
	Target []byte
	// Path and Query are Target split at its first '?': Query is nil when
	// there is no '?'. For absolute-form ("http://h/p?q") they come from
	// the target's path and query, Path "/" when it has none; for
	// asterisk-form Path is "*"; for CONNECT (authority-form) both are nil.
	Path, Query []byte
	// Authority is the target's authority for absolute-form and CONNECT
	// targets, else nil.
	Authority []byte
	// Minor is the minor version: 0 for HTTP/1.0, 1 for HTTP/1.1.
	Minor int
	// Fields holds every field in order, names as received.
	Fields []Field
	// Host is the Host field's value; for an HTTP/1.0 request without one,
	// the target's Authority (nil for origin-form).
	Host []byte
	// ContentLength is the Content-Length, -1 when absent.
	ContentLength int64
	// Chunked is true for Transfer-Encoding: chunked.
	Chunked bool
	// KeepAlive says whether the connection may carry another request after
	// this exchange: HTTP/1.1 unless Connection lists "close", HTTP/1.0 only
	// when it lists "keep-alive" and not "close".
	KeepAlive bool
	// Upgrade is the Upgrade field's value when an HTTP/1.1 request's
	// Connection lists "upgrade", else nil.
	Upgrade []byte
	// Expect100 is true for Expect: 100-continue on HTTP/1.1 (RFC 9110
	// section 10.1.1 says to ignore it on HTTP/1.0). Other expectations
	// stay in Fields for the engine to answer (417) or forward.
	Expect100 bool
	// ConnectionOptions are the options of the Connection fields, as
	// received (at most 32).
	ConnectionOptions [][]byte
}

// maxLeadingLines is how many empty lines may precede a request line.
const maxLeadingLines = 4

// slash is the Path of an absolute-form target without a path.
var slash = []byte("/")

// Reset clears h for reuse without freeing the capacity of Fields and
// ConnectionOptions.
func (h *RequestHead) Reset() {
	// The fields' slices point into the buffer the head was parsed from:
	// cleared, so that a reused head does not keep that buffer alive.
	clear(h.Fields)
	clear(h.ConnectionOptions)
	*h = RequestHead{
		Fields:            h.Fields[:0],
		ConnectionOptions: h.ConnectionOptions[:0],
		ContentLength:     -1,
	}
}

// ParseRequestHead parses the request head at the start of buf: optional
// empty lines, the request line, the fields and the empty line. It returns
// the head's length in bytes; ErrIncomplete when buf holds no complete head
// yet and no error so far; or an *Error. h is reset first; its slices point
// into buf.
//
// Syntax errors are found as soon as the bytes that show them arrive;
// errors that need the whole head (a missing Host, Content-Length with
// Transfer-Encoding) when it is complete.
//
// Each call parses from the start of buf. An engine that called it after
// every read would do quadratic work for a client sending a byte at a
// time (half a billion byte steps for a 32 KiB head); it should parse
// again only when the newly read bytes hold an LF, since only a line's end
// can complete a head or show a new error. Then a head costs at most
// MaxFields + 6 parses, as every further line ends it with a 431.
func ParseRequestHead(buf []byte, h *RequestHead, lim Limits) (int, error) {
	h.Reset()
	maxBytes, maxFields := lim.resolve()
	b, full := buf, len(buf) >= maxBytes
	if full {
		b = buf[:maxBytes]
	}
	i, st, f := h.requestLine(b)
	if st == scanMore {
		if full {
			return 0, requestErrors[faultLineTooLong]
		}
		return 0, ErrIncomplete
	}
	if st == scanDone {
		i, st, f = scanFields(b, i, &h.Fields, maxFields)
	}
	switch {
	case st == scanMore && full:
		return 0, requestErrors[faultHeadTooLarge]
	case st == scanMore:
		return 0, ErrIncomplete
	case st == scanFault:
		return 0, requestErrors[f]
	}
	if f = h.interpret(); f != faultNone {
		return 0, requestErrors[f]
	}
	return i, nil
}

// requestLine parses the leading empty lines and the request line,
// returning the index after its CRLF.
func (h *RequestHead) requestLine(b []byte) (int, scan, fault) {
	i := 0
	for n := 0; i < len(b) && (b[i] == '\r' || b[i] == '\n'); n++ {
		if st, f := lineEnd(b, i, faultNone); st != scanDone {
			return i, st, f
		}
		if n == maxLeadingLines {
			return i, scanFault, faultLeadingLines
		}
		i += 2
	}
	start := i
	for i < len(b) && tchar[b[i]] {
		i++
	}
	if i >= len(b) {
		return i, scanMore, faultNone
	}
	if b[i] != ' ' || i == start {
		return lineFault(b, i, faultMethod, faultRequestLine)
	}
	h.Method = b[start:i:i]
	i++
	start = i
	i = targetEnd(b, i)
	if i >= len(b) {
		return i, scanMore, faultNone
	}
	if b[i] != ' ' || i == start {
		return lineFault(b, i, faultTarget, faultRequestLine)
	}
	h.Target = b[start:i:i]
	return h.version(b, i+1)
}

// version parses "HTTP/1.x" CRLF at b[i:].
func (h *RequestHead) version(b []byte, i int) (int, scan, fault) {
	start := i
	for i < len(b) && targetChar[b[i]] {
		i++
	}
	if st, f := lineEnd(b, i, faultRequestLine); st != scanDone {
		return i, st, f
	}
	minor, f := parseVersion(b[start:i], faultRequestLine)
	if f != faultNone {
		return i, scanFault, f
	}
	h.Minor = minor
	if f := h.splitTarget(); f != faultNone {
		return i, scanFault, f
	}
	return i + 2, scanDone, faultNone
}

// parseVersion parses "HTTP/1.0" or "HTTP/1.1"; another "HTTP/d.d" is
// faultVersion, anything else the given fault.
func parseVersion(v []byte, other fault) (int, fault) {
	if len(v) != 8 || string(v[:5]) != "HTTP/" || v[6] != '.' ||
		v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9' {
		return 0, other
	}
	if v[5] != '1' || v[7] > '1' {
		return 0, faultVersion
	}
	return int(v[7] - '0'), faultNone
}

// splitTarget sets Path, Query and Authority from Target by its form
// (RFC 9112 section 3.2).
func (h *RequestHead) splitTarget() fault {
	t := h.Target
	switch {
	case string(h.Method) == "CONNECT":
		if !validHost(t) || !hasPort(t) {
			return faultTarget
		}
		h.Authority = t
		return faultNone
	case t[0] == '/':
		h.Path, h.Query = splitQuery(t)
		return faultNone
	case len(t) == 1 && t[0] == '*':
		if string(h.Method) != "OPTIONS" {
			return faultTarget
		}
		h.Path = t
		return faultNone
	}
	return h.absoluteForm(t)
}

// absoluteForm splits "http://authority/path?query" (or https).
func (h *RequestHead) absoluteForm(t []byte) fault {
	var rest []byte
	switch {
	case len(t) > 7 && EqualFold(t[:7], "http://"):
		rest = t[7:]
	case len(t) > 8 && EqualFold(t[:8], "https://"):
		rest = t[8:]
	default:
		return faultTarget
	}
	end := 0
	for end < len(rest) && rest[end] != '/' && rest[end] != '?' {
		end++
	}
	auth := rest[:end:end]
	if len(auth) == 0 || !validHost(auth) {
		return faultTarget
	}
	h.Authority = auth
	h.Path, h.Query = splitQuery(rest[end:])
	if len(h.Path) == 0 {
		h.Path = slash
	}
	return faultNone
}

// hasPort reports whether the authority t ends in ':' and at least one
// digit after its host (validHost checked the digits).
func hasPort(t []byte) bool {
	colon, bracket := -1, -1
	for i, c := range t {
		switch c {
		case ':':
			colon = i
		case ']':
			bracket = i
		}
	}
	return colon > bracket && colon < len(t)-1
}

// splitQuery splits t at its first '?'.
func splitQuery(t []byte) (path, query []byte) {
	if i := indexByte(t, '?'); i >= 0 {
		return t[:i:i], t[i+1:]
	}
	return t, nil
}
