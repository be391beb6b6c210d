package httpwire

// Field names the parsers interpret, by length, for a cheap first test.
const (
	lenHost       = len("host")
	lenExpect     = len("expect")
	lenUpgrade    = len("upgrade")
	lenConnection = len("connection")
	lenLength     = len("content-length")
	lenCoding     = len("transfer-encoding")
)

// framingFields is what both heads learn from their fields.
type framingFields struct {
	lengths, codings, upgrades int
	length                     int64
	coding, upgrade            []byte
}

// note records field f if it is one of the framing or connection fields
// that requests and responses share.
func (ff *framingFields) note(f *Field, opts *[][]byte) fault {
	n := f.Name
	switch len(n) {
	case lenUpgrade:
		if EqualFold(n, "upgrade") {
			if ff.upgrades++; ff.upgrades > 1 {
				return faultTwoUpgrades
			}
			ff.upgrade = f.Value
		}
	case lenConnection:
		if EqualFold(n, "connection") {
			return addOptions(f.Value, opts)
		}
	case lenLength:
		if EqualFold(n, "content-length") {
			if ff.lengths++; ff.lengths > 1 {
				return faultTwoLengths
			}
			l, ok := parseLength(f.Value)
			if !ok {
				return faultLength
			}
			ff.length = l
		}
	case lenCoding:
		if EqualFold(n, "transfer-encoding") {
			if ff.codings++; ff.codings > 1 {
				return faultTwoCodings
			}
			ff.coding = f.Value
		}
	}
	return faultNone
}

// keepAlive decides connection reuse from the version and the options.
func keepAlive(minor int, opts [][]byte) bool {
	if hasOption(opts, "close") {
		return false
	}
	return minor == 1 || hasOption(opts, "keep-alive")
}

// interpret reads the request's fields: framing, Host, Connection,
// Upgrade and Expect, and checks how they fit together.
func (h *RequestHead) interpret() fault {
	var ff framingFields
	hosts := 0
	for k := range h.Fields {
		f := &h.Fields[k]
		switch {
		case len(f.Name) == lenHost && EqualFold(f.Name, "host"):
			if hosts++; hosts > 1 {
				return faultTwoHosts
			}
			h.Host = f.Value
		case len(f.Name) == lenExpect && EqualFold(f.Name, "expect"):
			h.Expect100 = h.Minor == 1 && EqualFold(f.Value, "100-continue")
		default:
			if ft := ff.note(f, &h.ConnectionOptions); ft != faultNone {
				return ft
			}
		}
	}
	if ft := h.checkHost(hosts); ft != faultNone {
		return ft
	}
	if ff.coding != nil {
		if ft := requestCoding(h.Minor, ff); ft != faultNone {
			return ft
		}
		h.Chunked = true
	}
	if ff.lengths > 0 {
		h.ContentLength = ff.length
	}
	h.KeepAlive = keepAlive(h.Minor, h.ConnectionOptions)
	if h.Minor == 1 && hasOption(h.ConnectionOptions, "upgrade") {
		h.Upgrade = ff.upgrade
	}
	return faultNone
}

// checkHost checks the Host field: one for HTTP/1.1, valid, and equal to
// the target's authority when it has one.
func (h *RequestHead) checkHost(hosts int) fault {
	if hosts == 0 {
		if h.Minor == 1 {
			return faultNoHost
		}
		h.Host = h.Authority
		return faultNone
	}
	if !validHost(h.Host) {
		return faultHost
	}
	if h.Authority != nil && !equalFoldBytes(h.Host, h.Authority) {
		return faultHostMismatch
	}
	return faultNone
}

// requestCoding accepts exactly "chunked" as a request's
// Transfer-Encoding, on HTTP/1.1 and without Content-Length.
func requestCoding(minor int, ff framingFields) fault {
	switch {
	case minor == 0:
		return faultCoding10
	case ff.lengths > 0:
		return faultLengthAndCoding
	case EqualFold(ff.coding, "chunked"):
		return faultNone
	}
	last, chunkedBefore := lastCoding(ff.coding)
	if chunkedBefore || !EqualFold(last, "chunked") {
		return faultChunkedNotLast
	}
	return faultCoding
}

// interpret reads the response's fields: framing, Connection and Upgrade.
func (h *ResponseHead) interpret() fault {
	var ff framingFields
	for k := range h.Fields {
		if ft := ff.note(&h.Fields[k], &h.ConnectionOptions); ft != faultNone {
			return ft
		}
	}
	if ff.coding != nil {
		switch {
		case h.Minor == 0:
			return faultCoding10
		case ff.lengths > 0:
			return faultLengthAndCoding
		}
		last, chunkedBefore := lastCoding(ff.coding)
		isChunked := EqualFold(last, "chunked")
		if isChunked && chunkedBefore {
			return faultChunkedNotLast
		}
		h.Chunked = isChunked
		h.TransferEncoding = ff.coding
	}
	if ff.lengths > 0 {
		h.ContentLength = ff.length
	}
	h.KeepAlive = keepAlive(h.Minor, h.ConnectionOptions)
	if h.Minor == 1 && hasOption(h.ConnectionOptions, "upgrade") {
		h.Upgrade = ff.upgrade
	}
	return faultNone
}

// HopByHop reports whether the field name must not be forwarded: one of
// Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding
// and Upgrade, or a name the request's Connection field lists (except Host
// and Content-Length, which are never removed that way).
//
// Proxy-Authenticate and Proxy-Authorization are not in RFC 9110 section
// 7.6.1's list and are reported end-to-end; an engine that consumes them
// removes them itself.
func (h *RequestHead) HopByHop(name []byte) bool {
	return hopByHopName(name) || listedHopByHop(h.ConnectionOptions, name)
}

// HopByHop is RequestHead.HopByHop for a response.
func (h *ResponseHead) HopByHop(name []byte) bool {
	return hopByHopName(name) || listedHopByHop(h.ConnectionOptions, name)
}

// Framing says how the request's body is delimited: FramingChunked,
// FramingLength when it has a Content-Length, else FramingNone (RFC 9112
// section 6.3, rule 6).
func (h *RequestHead) Framing() Framing {
	switch {
	case h.Chunked:
		return FramingChunked
	case h.ContentLength >= 0:
		return FramingLength
	}
	return FramingNone
}

// Framing says how the body of this response to a request with the given
// method is delimited (RFC 9112 section 6.3): none when NoBody says so,
// then chunked, then Content-Length; a Transfer-Encoding that does not end
// in chunked, or neither field, means until the connection closes.
func (h *ResponseHead) Framing(method []byte) Framing {
	switch {
	case NoBody(method, h.Status):
		return FramingNone
	case h.Chunked:
		return FramingChunked
	case h.TransferEncoding == nil && h.ContentLength >= 0:
		return FramingLength
	}
	return FramingClose
}

// NoBody reports whether a response with this status to a request with
// this method has no body: responses to HEAD, 1xx, 204 and 304, and 2xx
// responses to CONNECT (RFC 9112 section 6.3, rules 1 and 2).
func NoBody(method []byte, status int) bool {
	switch {
	case string(method) == "HEAD":
		return true
	case status >= 100 && status < 200, status == 204, status == 304:
		return true
	case status >= 200 && status < 300 && string(method) == "CONNECT":
		return true
	}
	return false
}
