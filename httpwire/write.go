package httpwire

import "strconv"

// AppendRequestLine appends "method SP target SP HTTP/1.1 CRLF" to dst.
// Like every Append function it does not validate: the engine writes only
// what it parsed or what validated configuration produced.
func AppendRequestLine(dst, method, target []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, target...)
	return append(dst, " HTTP/1.1\r\n"...)
}

// AppendStatusLine appends "HTTP/1.1 SP status SP reason CRLF" to dst. A
// nil reason means StatusText(status).
func AppendStatusLine(dst []byte, status int, reason []byte) []byte {
	if reason == nil && status >= 0 && status < len(statusLines) && statusLines[status] != "" {
		return append(dst, statusLines[status]...)
	}
	if reason == nil {
		reason = StatusText(status)
	}
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	dst = append(dst, reason...)
	return append(dst, "\r\n"...)
}

// AppendField appends "name: value CRLF" to dst.
func AppendField(dst, name, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// StatusText returns the reason phrase registered for status (RFC 9110 and
// the IANA registry, plus nginx's 499 Client Closed Request), or nil for an
// unregistered status. The slice is shared: do not modify it.
func StatusText(status int) []byte {
	if status < 0 || status >= len(statusTexts) {
		return nil
	}
	return statusTexts[status]
}

// statusTexts holds the reason phrases; statusLines the whole
// "HTTP/1.1 code reason\r\n" line for each of them.
var (
	statusTexts [600][]byte
	statusLines [600]string
)

func init() {
	for code, text := range map[int]string{
		100: "Continue", 101: "Switching Protocols", 102: "Processing", 103: "Early Hints",
		200: "OK", 201: "Created", 202: "Accepted", 203: "Non-Authoritative Information",
		204: "No Content", 205: "Reset Content", 206: "Partial Content", 207: "Multi-Status",
		208: "Already Reported", 226: "IM Used",
		300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other",
		304: "Not Modified", 305: "Use Proxy", 307: "Temporary Redirect", 308: "Permanent Redirect",
		400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
		404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
		407: "Proxy Authentication Required", 408: "Request Timeout", 409: "Conflict",
		410: "Gone", 411: "Length Required", 412: "Precondition Failed", 413: "Content Too Large",
		414: "URI Too Long", 415: "Unsupported Media Type", 416: "Range Not Satisfiable",
		417: "Expectation Failed", 418: "I'm a teapot", 421: "Misdirected Request",
		422: "Unprocessable Content", 423: "Locked", 424: "Failed Dependency", 425: "Too Early",
		426: "Upgrade Required", 428: "Precondition Required", 429: "Too Many Requests",
		431: "Request Header Fields Too Large", 451: "Unavailable For Legal Reasons",
		499: "Client Closed Request",
		500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
		503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
		506: "Variant Also Negotiates", 507: "Insufficient Storage", 508: "Loop Detected",
		510: "Not Extended", 511: "Network Authentication Required",
	} {
		b := []byte(text)
		statusTexts[code] = b[:len(b):len(b)]
		statusLines[code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n"
	}
}
