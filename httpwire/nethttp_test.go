package httpwire

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"slices"
	"testing"
)

// crossCheckRequests are valid requests that both this package and
// net/http accept; both must read them alike.
var crossCheckRequests = []string{
	string(browserRequest),
	string(wrkRequest),
	string(tenFieldRequest),
	"GET /a?b=c HTTP/1.0||",
	"GET /a HTTP/1.0|Host: h:81|Connection: keep-alive||",
	"POST /upload HTTP/1.1|Host: h|Transfer-Encoding: chunked|Content-Type: text/plain||",
	"PUT /x HTTP/1.1|Host: h|Content-Length: 0||",
	"DELETE /x/y%20z?q= HTTP/1.1|Host: [::1]:8080|X-A: 1|X-A: 2|x-a: 3||",
	"GET http://example.com/p?q=1 HTTP/1.1|Host: example.com||",
	"OPTIONS * HTTP/1.1|Host: h||",
	"CONNECT example.com:443 HTTP/1.1|Host: example.com:443||",
	"GET / HTTP/1.1|Host: h|X-Ows: \t padded \t|X-Empty:|X-Quote: \"a, b\"; q=1||",
	"GET / HTTP/1.1|Host: h|Upgrade: websocket|Connection: Upgrade|Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==|Sec-WebSocket-Version: 13||",
	"PATCH /p HTTP/1.1|Host: h|Content-Length: 9223372036854775807||",
}

func TestCrossCheckNetHTTP(t *testing.T) {
	for _, raw := range crossCheckRequests {
		req := crlf(raw)
		var h RequestHead
		n, err := ParseRequestHead([]byte(req), &h, Limits{})
		if err != nil || n != len(req) {
			t.Fatalf("%q: ours n=%d err=%v", req, n, err)
		}
		std, err := http.ReadRequest(bufio.NewReader(bytes.NewReader([]byte(req))))
		if err != nil {
			t.Fatalf("%q: net/http refuses: %v", req, err)
		}
		compareWithNetHTTP(t, req, &h, std)
	}
}

// compareWithNetHTTP checks that ours and net/http agree on method,
// target, host, framing and every field value.
func compareWithNetHTTP(t *testing.T, req string, h *RequestHead, std *http.Request) {
	t.Helper()
	if string(h.Method) != std.Method || string(h.Target) != std.RequestURI {
		t.Errorf("%q: ours %s %s, net/http %s %s", req, h.Method, h.Target, std.Method, std.RequestURI)
	}
	if string(h.Host) != std.Host {
		t.Errorf("%q: Host ours %q, net/http %q", req, h.Host, std.Host)
	}
	// net/http: -1 for chunked, 0 for an absent length; ours -1 for both.
	wantLength := h.ContentLength
	if wantLength < 0 && !h.Chunked {
		wantLength = 0
	}
	if wantLength != std.ContentLength || h.Chunked != slices.Equal(std.TransferEncoding, []string{"chunked"}) {
		t.Errorf("%q: ours CL=%d chunked=%v, net/http CL=%d TE=%q", req, h.ContentLength, h.Chunked, std.ContentLength, std.TransferEncoding)
	}
	if h.KeepAlive == std.Close {
		t.Errorf("%q: ours KeepAlive=%v, net/http Close=%v", req, h.KeepAlive, std.Close)
	}
	ours := http.Header{}
	for _, f := range h.Fields {
		name := textproto.CanonicalMIMEHeaderKey(string(f.Name))
		if name != "Host" && name != "Transfer-Encoding" { // net/http moves these out of Header
			ours[name] = append(ours[name], string(f.Value))
		}
	}
	for name, vs := range ours {
		if !slices.Equal(vs, std.Header[name]) {
			t.Errorf("%q: %s ours %q, net/http %q", req, name, vs, std.Header[name])
		}
	}
	for name := range std.Header {
		if _, ok := ours[name]; !ok {
			t.Errorf("%q: net/http has %s, ours has not", req, name)
		}
	}
}
