package httpwire

import (
	"fmt"
	"strings"
	"testing"
)

// responseRefusals: every refusal of an upstream response is a 502.
var responseRefusals = []refusal{
	{"CL with TE", "HTTP/1.1 200 OK|Content-Length: 3|Transfer-Encoding: chunked||", 502, "Content-Length with Transfer-Encoding"},
	{"two CL equal", "HTTP/1.1 200 OK|Content-Length: 3|Content-Length: 3||", 502, "duplicate Content-Length"},
	{"CL list", "HTTP/1.1 200 OK|Content-Length: 3, 3||", 502, "invalid Content-Length"},
	{"CL sign", "HTTP/1.1 200 OK|Content-Length: -3||", 502, "invalid Content-Length"},
	{"two TE", "HTTP/1.1 200 OK|Transfer-Encoding: gzip|Transfer-Encoding: chunked||", 502, "duplicate Transfer-Encoding"},
	{"chunked twice", "HTTP/1.1 200 OK|Transfer-Encoding: chunked, chunked||", 502, "chunked is not the final transfer coding"},
	{"TE on 1.0", "HTTP/1.0 200 OK|Transfer-Encoding: chunked||", 502, "Transfer-Encoding in HTTP/1.0"},
	{"obs-fold", "HTTP/1.1 200 OK|X: 1| 2||", 502, "obsolete line folding"},
	{"bare LF", "HTTP/1.1 200 OK\nX: 1||", 502, "bare LF"},
	{"bare LF in fields", "HTTP/1.1 200 OK|X: 1\n|", 502, "bare LF"},
	{"bare CR", "HTTP/1.1 200 OK|X: 1\r2||", 502, "bare CR"},
	{"NUL", "HTTP/1.1 200 OK|X: \x00||", 502, "invalid character in field value"},
	{"space before colon", "HTTP/1.1 200 OK|X : 1||", 502, "whitespace before colon"},
	{"bad name", "HTTP/1.1 200 OK|X@: 1||", 502, "invalid field name"},
	{"HTTP/2.0", "HTTP/2.0 200 OK||", 502, "HTTP version not supported"},
	{"lowercase", "http/1.1 200 OK||", 502, "malformed status line"},
	{"two-digit status", "HTTP/1.1 20 OK||", 502, "malformed status line"},
	{"four-digit status", "HTTP/1.1 2000 OK||", 502, "malformed status line"},
	{"status 600", "HTTP/1.1 600 X||", 502, "malformed status line"},
	{"status 099", "HTTP/1.1 099 X||", 502, "malformed status line"},
	{"no status", "HTTP/1.1||", 502, "malformed status line"},
	{"leading empty line", "|HTTP/1.1 200 OK||", 502, "malformed status line"},
	{"NUL in reason", "HTTP/1.1 200 O\x00K||", 502, "malformed status line"},
	{"two Upgrades", "HTTP/1.1 101 S|Upgrade: a|Upgrade: b||", 502, "duplicate Upgrade"},
	{"too large", "HTTP/1.1 200 OK|X: " + strings.Repeat("y", DefaultMaxHeaderBytes) + "||", 502, "header section too large"},
	{"too many fields", "HTTP/1.1 200 OK|" + strings.Repeat("X: 1|", 101) + "|", 502, "too many header fields"},
}

func TestParseResponseHeadRefuses(t *testing.T) {
	for _, c := range responseRefusals {
		t.Run(c.name, func(t *testing.T) {
			var h ResponseHead
			n, err := ParseResponseHead([]byte(crlf(c.head)), &h, Limits{})
			checkRefusal(t, n, err, c.status, c.reason)
		})
	}
}

func TestParseResponseHeadIncomplete(t *testing.T) {
	full := crlf("HTTP/1.1 204 No Content|Date: x||")
	var h ResponseHead
	for i := 0; i < len(full); i++ {
		if n, err := ParseResponseHead([]byte(full[:i]), &h, Limits{}); err != ErrIncomplete {
			t.Fatalf("prefix %q: n=%d err=%v, want ErrIncomplete", full[:i], n, err)
		}
	}
}

func TestParseResponseHeadAccepts(t *testing.T) {
	cases := []struct {
		head, method string
		// status reason minor length chunked te keepAlive upgrade framing fields
		want string
	}{
		{"HTTP/1.1 200 OK|Content-Length: 5||", "GET",
			"200 OK 1 5 false <nil> true <nil> 1 Content-Length=5"},
		{"HTTP/1.1 200 OK|Content-Length: 5||", "HEAD",
			"200 OK 1 5 false <nil> true <nil> 0 Content-Length=5"},
		{"HTTP/1.1 200||", "GET",
			"200  1 -1 false <nil> true <nil> 3 "},
		{"HTTP/1.1 404 ||", "GET",
			"404  1 -1 false <nil> true <nil> 3 "},
		{"HTTP/1.1 500 Internal  Error\t!||", "GET",
			"500 Internal  Error\t! 1 -1 false <nil> true <nil> 3 "},
		{"HTTP/1.0 200 OK|Content-Length: 0||", "GET",
			"200 OK 0 0 false <nil> false <nil> 1 Content-Length=0"},
		{"HTTP/1.0 200 OK|Connection: keep-alive|Content-Length: 0||", "GET",
			"200 OK 0 0 false <nil> true <nil> 1 Connection=keep-alive,Content-Length=0"},
		{"HTTP/1.1 200 OK|Transfer-Encoding: chunked|Connection: close||", "GET",
			"200 OK 1 -1 true chunked false <nil> 2 Transfer-Encoding=chunked,Connection=close"},
		{"HTTP/1.1 200 OK|Transfer-Encoding: gzip, CHUNKED||", "POST",
			"200 OK 1 -1 true gzip, CHUNKED true <nil> 2 Transfer-Encoding=gzip, CHUNKED"},
		{"HTTP/1.1 200 OK|Transfer-Encoding: chunked, gzip||", "GET",
			"200 OK 1 -1 false chunked, gzip true <nil> 3 Transfer-Encoding=chunked, gzip"},
		{"HTTP/1.1 200 OK|Transfer-Encoding: identity||", "GET",
			"200 OK 1 -1 false identity true <nil> 3 Transfer-Encoding=identity"},
		{"HTTP/1.1 204 No Content|Content-Length: 7||", "GET",
			"204 No Content 1 7 false <nil> true <nil> 0 Content-Length=7"},
		{"HTTP/1.1 304 Not Modified|Transfer-Encoding: chunked||", "GET",
			"304 Not Modified 1 -1 true chunked true <nil> 0 Transfer-Encoding=chunked"},
		{"HTTP/1.1 100 Continue||", "POST",
			"100 Continue 1 -1 false <nil> true <nil> 0 "},
		{"HTTP/1.1 101 Switching Protocols|Connection: upgrade|Upgrade: websocket||", "GET",
			"101 Switching Protocols 1 -1 false <nil> true websocket 0 Connection=upgrade,Upgrade=websocket"},
		{"HTTP/1.1 200 Connection established||", "CONNECT",
			"200 Connection established 1 -1 false <nil> true <nil> 0 "},
		{"HTTP/1.1 407 Proxy Authentication Required|Content-Length: 0||", "CONNECT",
			"407 Proxy Authentication Required 1 0 false <nil> true <nil> 1 Content-Length=0"},
	}
	var h ResponseHead
	for _, c := range cases {
		head := crlf(c.head)
		n, err := ParseResponseHead([]byte(head+"body"), &h, Limits{})
		if err != nil || n != len(head) {
			t.Fatalf("%q: n=%d err=%v, want %d <nil>", c.head, n, err, len(head))
		}
		var fields []string
		for _, f := range h.Fields {
			fields = append(fields, string(f.Name)+"="+string(f.Value))
		}
		got := fmt.Sprintf("%d %s %d %d %v %s %v %s %d %s", h.Status, h.Reason, h.Minor, h.ContentLength,
			h.Chunked, show(h.TransferEncoding), h.KeepAlive, show(h.Upgrade), h.Framing([]byte(c.method)),
			strings.Join(fields, ","))
		if got != c.want {
			t.Errorf("%q to %s:\n got %q\nwant %q", c.head, c.method, got, c.want)
		}
	}
}

func TestNoBody(t *testing.T) {
	for _, c := range []struct {
		method string
		status int
		want   bool
	}{
		{"GET", 200, false}, {"HEAD", 200, true}, {"HEAD", 404, true}, {"GET", 100, true},
		{"GET", 101, true}, {"GET", 199, true}, {"GET", 204, true}, {"GET", 304, true},
		{"GET", 205, false}, {"CONNECT", 200, true}, {"CONNECT", 299, true},
		{"CONNECT", 407, false}, {"POST", 500, false}, {"head", 200, false},
	} {
		if got := NoBody([]byte(c.method), c.status); got != c.want {
			t.Errorf("NoBody(%s, %d) = %v, want %v", c.method, c.status, got, c.want)
		}
	}
}

func TestResponseHopByHop(t *testing.T) {
	var h ResponseHead
	if _, err := ParseResponseHead([]byte(crlf("HTTP/1.1 200 OK|Connection: x-hop|Content-Length: 0||")), &h, Limits{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"X-Hop": true, "Keep-Alive": true, "Content-Length": false, "Server": false} {
		if got := h.HopByHop([]byte(name)); got != want {
			t.Errorf("HopByHop(%q) = %v, want %v", name, got, want)
		}
	}
}
