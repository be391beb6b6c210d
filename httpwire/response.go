package httpwire

// ResponseHead is a parsed status line and header section. Its slices
// point into the buffer it was parsed from. Reuse one head across responses
// (ParseResponseHead resets it) to keep Fields' capacity.
type ResponseHead struct {
	// Minor is the minor version: 0 for HTTP/1.0, 1 for HTTP/1.1.
	Minor int
	// Status is the three-digit status code, 100 to 599.
	Status int
	// Reason is the reason phrase, possibly empty.
	Reason []byte
	// Fields holds every field in order, names as received.
	Fields []Field
	// ContentLength is the Content-Length, -1 when absent.
	ContentLength int64
	// Chunked is true when the final transfer coding is chunked.
	Chunked bool
	// TransferEncoding is the Transfer-Encoding field's value, nil when
	// absent. When it lists codings besides chunked, the body keeps them
	// after dechunking, so the engine forwards them.
	TransferEncoding []byte
	// KeepAlive says whether the version and the Connection options allow
	// another exchange on the connection; a body delimited by the close
	// (see Framing) ends it regardless.
	KeepAlive bool
	// Upgrade is the Upgrade field's value when an HTTP/1.1 response's
	// Connection lists "upgrade", else nil.
	Upgrade []byte
	// ConnectionOptions are the options of the Connection fields, as
	// received (at most 32).
	ConnectionOptions [][]byte
}

// Reset clears h for reuse without freeing the capacity of Fields and
// ConnectionOptions.
func (h *ResponseHead) Reset() {
	*h = ResponseHead{
		Fields:            h.Fields[:0],
		ConnectionOptions: h.ConnectionOptions[:0],
		ContentLength:     -1,
	}
}

// ParseResponseHead parses the response head at the start of buf: the
// status line, the fields and the empty line. Its contract is
// ParseRequestHead's, except that every *Error it returns has status 502
// (the gateway's answer to a bad upstream response), that a head too large
// is refused with reason "header section too large" whatever its part, and
// that no empty line may precede the status line. How to read the body
// depends on the request: see Framing.
func ParseResponseHead(buf []byte, h *ResponseHead, lim Limits) (int, error) {
	h.Reset()
	maxBytes, maxFields := lim.resolve()
	b, full := buf, len(buf) >= maxBytes
	if full {
		b = buf[:maxBytes]
	}
	i, st, f := h.statusLine(b)
	if st == scanDone {
		i, st, f = scanFields(b, i, &h.Fields, maxFields)
	}
	switch {
	case st == scanMore && full:
		return 0, responseErrors[faultHeadTooLarge]
	case st == scanMore:
		return 0, ErrIncomplete
	case st == scanFault:
		return 0, responseErrors[f]
	}
	if f = h.interpret(); f != faultNone {
		return 0, responseErrors[f]
	}
	return i, nil
}

// statusLine parses "HTTP/1.x SP 3DIGIT [SP reason] CRLF", returning the
// index after its CRLF. A missing SP before an empty reason is accepted.
func (h *ResponseHead) statusLine(b []byte) (int, scan, fault) {
	i := 0
	for i < len(b) && targetChar[b[i]] {
		i++
	}
	if i >= len(b) {
		return i, scanMore, faultNone
	}
	if b[i] != ' ' || i == 0 {
		return lineFault(b, i, faultStatusLine, faultStatusLine)
	}
	minor, f := parseVersion(b[:i], faultStatusLine)
	if f != faultNone {
		return i, scanFault, f
	}
	h.Minor = minor
	i++
	if len(b)-i < 4 {
		return i, scanMore, faultNone
	}
	d0, d1, d2 := b[i]-'0', b[i+1]-'0', b[i+2]-'0'
	if d0 < 1 || d0 > 5 || d1 > 9 || d2 > 9 {
		return i, scanFault, faultStatusLine
	}
	h.Status = int(d0)*100 + int(d1)*10 + int(d2)
	i += 3
	start := i
	if b[i] == ' ' {
		i++
		start = i
		for i < len(b) && valueChar[b[i]] {
			i++
		}
	}
	if st, f := lineEnd(b, i, faultStatusLine); st != scanDone {
		return i, st, f
	}
	h.Reason = b[start:i:i]
	return i + 2, scanDone, faultNone
}
