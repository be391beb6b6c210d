package httpwire

import (
	"fmt"
	"strings"
	"testing"
)

// wantRequest is what a valid head must parse to; fields as "Name=Value"
// joined by "\n", nil slices as "<nil>".
type wantRequest struct {
	method, target, path, query, authority, host string
	minor                                        int
	length                                       int64
	chunked, keepAlive, expect100                bool
	upgrade, options, fields                     string
}

func show(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	return string(b)
}

func describeRequest(h *RequestHead) wantRequest {
	var fields, opts []string
	for _, f := range h.Fields {
		fields = append(fields, string(f.Name)+"="+string(f.Value))
	}
	for _, o := range h.ConnectionOptions {
		opts = append(opts, string(o))
	}
	return wantRequest{
		method: show(h.Method), target: show(h.Target), path: show(h.Path), query: show(h.Query),
		authority: show(h.Authority), host: show(h.Host), minor: h.Minor, length: h.ContentLength,
		chunked: h.Chunked, keepAlive: h.KeepAlive, expect100: h.Expect100,
		upgrade: show(h.Upgrade), options: strings.Join(opts, ","), fields: strings.Join(fields, "\n"),
	}
}

func TestParseRequestHeadAccepts(t *testing.T) {
	cases := []struct {
		name string
		head string
		want wantRequest
	}{
		{"simple GET", "GET /a/b?c=d&e HTTP/1.1|Host: example.com||",
			wantRequest{"GET", "/a/b?c=d&e", "/a/b", "c=d&e", "<nil>", "example.com", 1, -1, false, true, false, "<nil>", "",
				"Host=example.com"}},
		{"OWS trimmed, names as received", "POST /up HTTP/1.1|HOST:\t h:8080 \t|content-LENGTH: 0012|X-Empty:|X-In:  a  b  ||",
			wantRequest{"POST", "/up", "/up", "<nil>", "<nil>", "h:8080", 1, 12, false, true, false, "<nil>", "",
				"HOST=h:8080\ncontent-LENGTH=0012\nX-Empty=\nX-In=a  b"}},
		{"chunked, any case", "PUT /x HTTP/1.1|Host: h|Transfer-Encoding: ChUnKeD||",
			wantRequest{"PUT", "/x", "/x", "<nil>", "<nil>", "h", 1, -1, true, true, false, "<nil>", "",
				"Host=h\nTransfer-Encoding=ChUnKeD"}},
		{"empty query", "GET /? HTTP/1.1|Host: h||",
			wantRequest{"GET", "/?", "/", "", "<nil>", "h", 1, -1, false, true, false, "<nil>", "", "Host=h"}},
		{"second ? stays in the query", "GET /p?a?b HTTP/1.1|Host: h||",
			wantRequest{"GET", "/p?a?b", "/p", "a?b", "<nil>", "h", 1, -1, false, true, false, "<nil>", "", "Host=h"}},
		{"leading empty lines", "||||GET / HTTP/1.1|Host: h||",
			wantRequest{"GET", "/", "/", "<nil>", "<nil>", "h", 1, -1, false, true, false, "<nil>", "", "Host=h"}},
		{"HTTP/1.0 without Host", "GET / HTTP/1.0||",
			wantRequest{"GET", "/", "/", "<nil>", "<nil>", "<nil>", 0, -1, false, false, false, "<nil>", "", ""}},
		{"HTTP/1.0 keep-alive", "GET / HTTP/1.0|Connection: Keep-Alive|Expect: 100-continue||",
			wantRequest{"GET", "/", "/", "<nil>", "<nil>", "<nil>", 0, -1, false, true, false, "<nil>", "Keep-Alive",
				"Connection=Keep-Alive\nExpect=100-continue"}},
		{"close", "GET / HTTP/1.1|Host: h|Connection: keep-alive, close||",
			wantRequest{"GET", "/", "/", "<nil>", "<nil>", "h", 1, -1, false, false, false, "<nil>", "keep-alive,close",
				"Host=h\nConnection=keep-alive, close"}},
		{"absolute-form", "GET HTTP://Example.com:80/p?q HTTP/1.1|Host: example.COM:80||",
			wantRequest{"GET", "HTTP://Example.com:80/p?q", "/p", "q", "Example.com:80", "example.COM:80", 1, -1, false, true, false, "<nil>", "",
				"Host=example.COM:80"}},
		{"absolute-form without path", "GET https://h?q HTTP/1.1|Host: h||",
			wantRequest{"GET", "https://h?q", "/", "q", "h", "h", 1, -1, false, true, false, "<nil>", "", "Host=h"}},
		{"absolute-form on 1.0 gives the Host", "GET http://h/ HTTP/1.0||",
			wantRequest{"GET", "http://h/", "/", "<nil>", "h", "h", 0, -1, false, false, false, "<nil>", "", ""}},
		{"OPTIONS *", "OPTIONS * HTTP/1.1|Host: h||",
			wantRequest{"OPTIONS", "*", "*", "<nil>", "<nil>", "h", 1, -1, false, true, false, "<nil>", "", "Host=h"}},
		{"CONNECT", "CONNECT [::1]:443 HTTP/1.1|Host: [::1]:443||",
			wantRequest{"CONNECT", "[::1]:443", "<nil>", "<nil>", "[::1]:443", "[::1]:443", 1, -1, false, true, false, "<nil>", "",
				"Host=[::1]:443"}},
		{"empty Host", "GET / HTTP/1.1|Host:||",
			wantRequest{"GET", "/", "/", "<nil>", "<nil>", "", 1, -1, false, true, false, "<nil>", "", "Host="}},
		{"upgrade", "GET /ws HTTP/1.1|Host: h|Connection: Upgrade|Upgrade: websocket|Expect: 100-Continue||",
			wantRequest{"GET", "/ws", "/ws", "<nil>", "<nil>", "h", 1, -1, false, true, true, "websocket", "Upgrade",
				"Host=h\nConnection=Upgrade\nUpgrade=websocket\nExpect=100-Continue"}},
		{"Upgrade without the option", "GET / HTTP/1.1|Host: h|Upgrade: websocket|Connection: ,, x-a ,||",
			wantRequest{"GET", "/", "/", "<nil>", "<nil>", "h", 1, -1, false, true, false, "<nil>", "x-a",
				"Host=h\nUpgrade=websocket\nConnection=,, x-a ,"}},
		{"Upgrade ignored on 1.0", "GET / HTTP/1.0|Connection: upgrade|Upgrade: websocket||",
			wantRequest{"GET", "/", "/", "<nil>", "<nil>", "<nil>", 0, -1, false, false, false, "<nil>", "upgrade",
				"Connection=upgrade\nUpgrade=websocket"}},
		{"obs-text in value and target", "GET /caf\xc3\xa9 HTTP/1.1|Host: h|X: caf\xc3\xa9||",
			wantRequest{"GET", "/caf\xc3\xa9", "/caf\xc3\xa9", "<nil>", "<nil>", "h", 1, -1, false, true, false, "<nil>", "",
				"Host=h\nX=caf\xc3\xa9"}},
		{"max length", "POST / HTTP/1.1|Host: h|Content-Length: 9223372036854775807||",
			wantRequest{"POST", "/", "/", "<nil>", "<nil>", "h", 1, 9223372036854775807, false, true, false, "<nil>", "",
				"Host=h\nContent-Length=9223372036854775807"}},
	}
	var h RequestHead
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			head := crlf(c.head)
			n, err := ParseRequestHead([]byte(head+"BODY"), &h, Limits{})
			if err != nil || n != len(head) {
				t.Fatalf("n=%d err=%v, want %d <nil>", n, err, len(head))
			}
			if got := describeRequest(&h); got != c.want {
				t.Fatalf("got  %s\nwant %s", fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", c.want))
			}
		})
	}
}

func TestRequestFraming(t *testing.T) {
	for _, c := range []struct {
		head string
		want Framing
	}{
		{"GET / HTTP/1.1|Host: h||", FramingNone},
		{"POST / HTTP/1.1|Host: h|Content-Length: 0||", FramingLength},
		{"POST / HTTP/1.1|Host: h|Transfer-Encoding: chunked||", FramingChunked},
	} {
		var h RequestHead
		if _, err := ParseRequestHead([]byte(crlf(c.head)), &h, Limits{}); err != nil {
			t.Fatal(err)
		}
		if got := h.Framing(); got != c.want {
			t.Errorf("%q: Framing = %d, want %d", c.head, got, c.want)
		}
	}
}

func TestRequestHopByHop(t *testing.T) {
	var h RequestHead
	head := crlf("GET / HTTP/1.1|Host: h|Connection: X-Secret, host, Content-Length|X-Secret: 1|X-Kept: 2||")
	if _, err := ParseRequestHead([]byte(head), &h, Limits{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"Connection": true, "keep-alive": true, "Proxy-Connection": true, "TE": true, "Trailer": true,
		"Transfer-Encoding": true, "UPGRADE": true, "x-secret": true,
		"X-Kept": false, "Host": false, "Content-Length": false, "Proxy-Authorization": false,
		"Proxy-Authenticate": false, "T": false, "Te-X": false,
	} {
		if got := h.HopByHop([]byte(name)); got != want {
			t.Errorf("HopByHop(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestPipelinedRequests: heads and bodies on one connection split where
// the framing says, each head parsed from where the last message ended.
func TestPipelinedRequests(t *testing.T) {
	stream := []byte(crlf("POST /1 HTTP/1.1|Host: h|Content-Length: 3||abc" +
		"GET /2 HTTP/1.1|Host: h|Connection: Upgrade|Upgrade: websocket||" +
		"PUT /3 HTTP/1.1|Host: h|Transfer-Encoding: chunked||"))
	var h RequestHead
	var got []string
	for off := 0; off < len(stream); {
		n, err := ParseRequestHead(stream[off:], &h, Limits{})
		if err != nil {
			t.Fatalf("at %d: %v", off, err)
		}
		got = append(got, fmt.Sprintf("%s %s CL=%d chunked=%v upgrade=%s", h.Method, h.Path, h.ContentLength, h.Chunked, show(h.Upgrade)))
		off += n
		if h.ContentLength > 0 {
			off += int(h.ContentLength)
		}
	}
	want := "POST /1 CL=3 chunked=false upgrade=<nil>|GET /2 CL=-1 chunked=false upgrade=websocket|PUT /3 CL=-1 chunked=true upgrade=<nil>"
	if s := strings.Join(got, "|"); s != want {
		t.Fatalf("got  %s\nwant %s", s, want)
	}
}
