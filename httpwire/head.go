package httpwire

// Field is one header or trailer field. Name and Value point into the
// buffer they were parsed from and are valid until that buffer is reused;
// Value has its surrounding SP and HTAB removed. Both are capped at their
// length, so appending to one copies it instead of writing into the buffer.
type Field struct{ Name, Value []byte }

// Limits bound a head (and a chunked body's trailers). Zero or negative
// values mean the defaults.
type Limits struct {
	// MaxHeaderBytes bounds the bytes of a head, from its first byte
	// (leading empty lines included) to the end of its empty line.
	// Default 32 KiB.
	MaxHeaderBytes int
	// MaxFields bounds the number of fields of a head. Default 100.
	MaxFields int
}

// Default limits.
const (
	DefaultMaxHeaderBytes = 32 << 10
	DefaultMaxFields      = 100
)

// maxOptions bounds the Connection options of one message, so that
// HopByHop stays cheap.
const maxOptions = 32

// resolve returns the limits with defaults filled in.
func (l Limits) resolve() (maxBytes, maxFields int) {
	maxBytes, maxFields = l.MaxHeaderBytes, l.MaxFields
	if maxBytes <= 0 {
		maxBytes = DefaultMaxHeaderBytes
	}
	if maxFields <= 0 {
		maxFields = DefaultMaxFields
	}
	return maxBytes, maxFields
}

// Framing says how a message's body is delimited (RFC 9112 section 6.3).
type Framing uint8

const (
	// FramingNone: the message has no body.
	FramingNone Framing = iota
	// FramingLength: the body is ContentLength bytes.
	FramingLength
	// FramingChunked: the body is chunked (read it with a ChunkedReader).
	FramingChunked
	// FramingClose: the body runs until the connection closes (responses
	// only); the connection cannot be reused.
	FramingClose
)

// scan is the outcome of scanning part of a head.
type scan uint8

const (
	scanDone  scan = iota // the part is complete
	scanMore              // the buffer ends before the part does
	scanFault             // the part is malformed
)

// lineEnd checks the line ending at b[i], the first byte after a line's
// content: CRLF is the end, anything else a fault or a need for more.
func lineEnd(b []byte, i int, other fault) (scan, fault) {
	if i >= len(b) {
		return scanMore, faultNone
	}
	switch b[i] {
	case '\r':
		if i+1 >= len(b) {
			return scanMore, faultNone
		}
		if b[i+1] == '\n' {
			return scanDone, faultNone
		}
		return scanFault, faultBareCR
	case '\n':
		return scanFault, faultBareLF
	}
	return scanFault, other
}

// lineFault reports a start line that stops at b[i] before its end: a
// CRLF or SP there is malformed, a bare CR or LF is that, another byte is
// other, and the end of b means more is needed.
func lineFault(b []byte, i int, other, malformed fault) (int, scan, fault) {
	if i < len(b) && b[i] == ' ' {
		return i, scanFault, malformed
	}
	switch st, f := lineEnd(b, i, other); st {
	case scanMore:
		return i, scanMore, faultNone
	case scanDone:
		return i, scanFault, malformed
	default:
		return i, scanFault, f
	}
}

// scanFields parses field lines from b[i:] up to and including the empty
// line, appending them to *fields (at most maxFields). It returns the index
// after the empty line when the result is scanDone.
func scanFields(b []byte, i int, fields *[]Field, maxFields int) (int, scan, fault) {
	for {
		if i >= len(b) {
			return i, scanMore, faultNone
		}
		switch b[i] {
		case '\r', '\n':
			st, f := lineEnd(b, i, faultNone)
			return i + 2, st, f
		case ' ', '\t':
			return i, scanFault, faultObsFold
		}
		start := i
		for i < len(b) && tchar[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, scanMore, faultNone
		}
		if b[i] != ':' || i == start {
			if isOWS(b[i]) && i > start {
				return i, scanFault, faultSpaceBeforeColon
			}
			return i, scanFault, faultFieldName
		}
		name := b[start:i:i]
		for i++; i < len(b) && isOWS(b[i]); i++ {
		}
		vs := i
		i = valueEnd(b, i)
		st, f := lineEnd(b, i, faultFieldValue)
		if st != scanDone {
			return i, st, f
		}
		ve := i
		for ve > vs && isOWS(b[ve-1]) {
			ve--
		}
		if len(*fields) >= maxFields {
			return i, scanFault, faultTooManyFields
		}
		*fields = append(*fields, Field{Name: name, Value: b[vs:ve:ve]})
		i += 2
	}
}

// parseLength parses a Content-Length value: one to nineteen digits, at
// most 2^63-1, nothing else (no sign, no list, no spaces).
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// lastCoding returns the last element of a Transfer-Encoding list, with
// its OWS trimmed, and whether any element before it is "chunked".
func lastCoding(v []byte) (last []byte, chunkedBefore bool) {
	for {
		i := indexByte(v, ',')
		if i < 0 {
			return trimOWS(v), chunkedBefore
		}
		if el := trimOWS(v[:i]); EqualFold(el, "chunked") {
			chunkedBefore = true
		}
		v = v[i+1:]
	}
}

func indexByte(b []byte, c byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// addOptions appends the Connection options listed in v to *opts: a
// comma-separated list of tokens, empty elements skipped.
func addOptions(v []byte, opts *[][]byte) fault {
	for len(v) > 0 {
		i := indexByte(v, ',')
		el := v
		if i >= 0 {
			el, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		el = trimOWS(el)
		if len(el) == 0 {
			continue
		}
		for _, c := range el {
			if !tchar[c] {
				return faultConnection
			}
		}
		if len(*opts) >= maxOptions {
			return faultTooManyOptions
		}
		*opts = append(*opts, el[:len(el):len(el)])
	}
	return faultNone
}

// hasOption reports whether opts lists lower (a lowercase token).
func hasOption(opts [][]byte, lower string) bool {
	for _, o := range opts {
		if EqualFold(o, lower) {
			return true
		}
	}
	return false
}

// hopByHopName reports whether name is a field RFC 9110 section 7.6.1
// tells intermediaries to remove (Connection, Proxy-Connection, Keep-Alive,
// TE, Transfer-Encoding, Upgrade), or Trailer, which announces trailers
// that the engine re-announces when it forwards them.
func hopByHopName(name []byte) bool {
	switch len(name) {
	case 2:
		return EqualFold(name, "te")
	case 7:
		return EqualFold(name, "upgrade") || EqualFold(name, "trailer")
	case 10:
		return EqualFold(name, "connection") || EqualFold(name, "keep-alive")
	case 16:
		return EqualFold(name, "proxy-connection")
	case 17:
		return EqualFold(name, "transfer-encoding")
	}
	return false
}

// listedHopByHop reports whether opts lists name. Options naming Host or
// Content-Length are not honoured: removing those would change where the
// message goes or how it is framed.
func listedHopByHop(opts [][]byte, name []byte) bool {
	for _, o := range opts {
		if equalFoldBytes(o, name) {
			return !EqualFold(name, "host") && !EqualFold(name, "content-length")
		}
	}
	return false
}
