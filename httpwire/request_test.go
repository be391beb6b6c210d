package httpwire

import (
	"errors"
	"strings"
	"testing"
)

// crlf turns "|" into CRLF so that test heads fit on a line.
func crlf(s string) string { return strings.ReplaceAll(s, "|", "\r\n") }

// refusal is a head and the *Error it must get.
type refusal struct {
	name   string
	head   string // "|" stands for CRLF
	status int
	reason string
}

// requestRefusals are the malformed requests of issue 11 and RFC 9112,
// each with its expected answer written by hand.
var requestRefusals = []refusal{
	// framing
	{"CL with TE", "POST / HTTP/1.1|Host: a|Content-Length: 3|Transfer-Encoding: chunked||", 400, "Content-Length with Transfer-Encoding"},
	{"TE with CL", "POST / HTTP/1.1|Host: a|Transfer-Encoding: chunked|Content-Length: 3||", 400, "Content-Length with Transfer-Encoding"},
	{"two CL equal", "POST / HTTP/1.1|Host: a|Content-Length: 3|Content-Length: 3||", 400, "duplicate Content-Length"},
	{"two CL differ", "POST / HTTP/1.1|Host: a|Content-Length: 3|Content-Length: 4||", 400, "duplicate Content-Length"},
	{"CL list", "POST / HTTP/1.1|Host: a|Content-Length: 3, 3||", 400, "invalid Content-Length"},
	{"CL sign", "POST / HTTP/1.1|Host: a|Content-Length: +3||", 400, "invalid Content-Length"},
	{"CL negative", "POST / HTTP/1.1|Host: a|Content-Length: -1||", 400, "invalid Content-Length"},
	{"CL hex", "POST / HTTP/1.1|Host: a|Content-Length: 0x10||", 400, "invalid Content-Length"},
	{"CL empty", "POST / HTTP/1.1|Host: a|Content-Length: ||", 400, "invalid Content-Length"},
	{"CL inner space", "POST / HTTP/1.1|Host: a|Content-Length: 1 2||", 400, "invalid Content-Length"},
	{"CL 2^63", "POST / HTTP/1.1|Host: a|Content-Length: 9223372036854775808||", 400, "invalid Content-Length"},
	{"CL 20 digits", "POST / HTTP/1.1|Host: a|Content-Length: 00000000000000000001||", 400, "invalid Content-Length"},
	{"TE chunked, identity", "POST / HTTP/1.1|Host: a|Transfer-Encoding: chunked, identity||", 400, "chunked is not the final transfer coding"},
	{"TE identity", "POST / HTTP/1.1|Host: a|Transfer-Encoding: identity||", 400, "chunked is not the final transfer coding"},
	{"TE chunked twice", "POST / HTTP/1.1|Host: a|Transfer-Encoding: chunked, chunked||", 400, "chunked is not the final transfer coding"},
	{"TE chunkedx", "POST / HTTP/1.1|Host: a|Transfer-Encoding: chunkedx||", 400, "chunked is not the final transfer coding"},
	{"TE gzip, chunked", "POST / HTTP/1.1|Host: a|Transfer-Encoding: gzip, chunked||", 501, "transfer coding not implemented"},
	{"two TE fields", "POST / HTTP/1.1|Host: a|Transfer-Encoding: chunked|Transfer-Encoding: chunked||", 400, "duplicate Transfer-Encoding"},
	{"TE on 1.0", "POST / HTTP/1.0|Transfer-Encoding: chunked||", 400, "Transfer-Encoding in HTTP/1.0"},
	// line syntax
	{"obs-fold SP", "GET / HTTP/1.1|Host: a|X-A: 1| 2||", 400, "obsolete line folding"},
	{"obs-fold HTAB", "GET / HTTP/1.1|Host: a|X-A: 1|\t2||", 400, "obsolete line folding"},
	{"space before first field", "GET / HTTP/1.1| Host: a||", 400, "obsolete line folding"},
	{"bare LF after field", "GET / HTTP/1.1|Host: a\nX: 1||", 400, "bare LF"},
	{"bare LF request line", "GET / HTTP/1.1\nHost: a||", 400, "bare LF"},
	{"bare LF end of head", "GET / HTTP/1.1|Host: a|\n", 400, "bare LF"},
	{"bare LF leading line", "\nGET / HTTP/1.1|Host: a||", 400, "bare LF"},
	{"bare CR in value", "GET / HTTP/1.1|Host: a|X: 1\r2||", 400, "bare CR"},
	{"bare CR end of head", "GET / HTTP/1.1|Host: a|\rX||", 400, "bare CR"},
	{"bare CR request line", "GET /\r HTTP/1.1|Host: a||", 400, "bare CR"},
	{"NUL in value", "GET / HTTP/1.1|Host: a|X: 1\x002||", 400, "invalid character in field value"},
	{"DEL in value", "GET / HTTP/1.1|Host: a|X: 1\x7f||", 400, "invalid character in field value"},
	{"VT in value", "GET / HTTP/1.1|Host: a|X: \x0b||", 400, "invalid character in field value"},
	{"space before colon", "GET / HTTP/1.1|Host : a||", 400, "whitespace before colon"},
	{"tab before colon", "GET / HTTP/1.1|Host\t: a||", 400, "whitespace before colon"},
	{"name with slash", "GET / HTTP/1.1|Host: a|X/Y: 1||", 400, "invalid field name"},
	{"empty name", "GET / HTTP/1.1|Host: a|: 1||", 400, "invalid field name"},
	{"no colon", "GET / HTTP/1.1|Host: a|XY||", 400, "invalid field name"},
	{"NUL in name", "GET / HTTP/1.1|Host: a|X\x00: 1||", 400, "invalid field name"},
	// request line
	{"lowercase version", "GET / http/1.1|Host: a||", 400, "malformed request line"},
	{"HTTP/2.0", "GET / HTTP/2.0|Host: a||", 505, "HTTP version not supported"},
	{"h2 preface", "PRI * HTTP/2.0||SM||", 505, "HTTP version not supported"},
	{"HTTP/1.2", "GET / HTTP/1.2|Host: a||", 505, "HTTP version not supported"},
	{"HTTP/0.9", "GET / HTTP/0.9||", 505, "HTTP version not supported"},
	{"HTTP/1.10", "GET / HTTP/1.10|Host: a||", 400, "malformed request line"},
	{"no version", "GET /||", 400, "malformed request line"},
	{"two spaces", "GET  / HTTP/1.1|Host: a||", 400, "malformed request line"},
	{"trailing space", "GET / HTTP/1.1 |Host: a||", 400, "malformed request line"},
	{"leading space", " GET / HTTP/1.1|Host: a||", 400, "malformed request line"},
	{"method with slash", "GE/T / HTTP/1.1|Host: a||", 400, "invalid method"},
	{"tab separator", "GET\t/ HTTP/1.1|Host: a||", 400, "invalid method"},
	{"NUL in target", "GET /a\x00b HTTP/1.1|Host: a||", 400, "invalid request target"},
	{"tab in target", "GET /a\tb HTTP/1.1|Host: a||", 400, "invalid request target"},
	{"relative target", "GET a/b HTTP/1.1|Host: a||", 400, "invalid request target"},
	{"asterisk with GET", "GET * HTTP/1.1|Host: a||", 400, "invalid request target"},
	{"ftp target", "GET ftp://a/ HTTP/1.1|Host: a||", 400, "invalid request target"},
	{"userinfo", "GET http://u@a/ HTTP/1.1|Host: a||", 400, "invalid request target"},
	{"empty authority", "GET http:///p HTTP/1.1|Host: a||", 400, "invalid request target"},
	{"CONNECT origin-form", "CONNECT / HTTP/1.1|Host: a||", 400, "invalid request target"},
	{"CONNECT no port", "CONNECT a HTTP/1.1|Host: a||", 400, "invalid request target"},
	{"CONNECT empty port", "CONNECT a: HTTP/1.1|Host: a:||", 400, "invalid request target"},
	{"CONNECT IPv6 no port", "CONNECT [::1] HTTP/1.1|Host: [::1]||", 400, "invalid request target"},
	{"CONNECT userinfo", "CONNECT u@a:1 HTTP/1.1|Host: a:1||", 400, "invalid request target"},
	{"five empty lines", "|||||GET / HTTP/1.1|Host: a||", 400, "too many empty lines before the request line"},
	// Host
	{"missing Host", "GET / HTTP/1.1|X: 1||", 400, "missing Host"},
	{"two Hosts", "GET / HTTP/1.1|Host: a|Host: a||", 400, "duplicate Host"},
	{"Host with space", "GET / HTTP/1.1|Host: a b||", 400, "invalid Host"},
	{"Host with slash", "GET / HTTP/1.1|Host: a/b||", 400, "invalid Host"},
	{"Host with userinfo", "GET / HTTP/1.1|Host: u@a||", 400, "invalid Host"},
	{"Host bad port", "GET / HTTP/1.1|Host: a:8x||", 400, "invalid Host"},
	{"Host open bracket", "GET / HTTP/1.1|Host: [::1||", 400, "invalid Host"},
	{"Host empty brackets", "GET / HTTP/1.1|Host: []||", 400, "invalid Host"},
	{"Host junk after bracket", "GET / HTTP/1.1|Host: [::1]x||", 400, "invalid Host"},
	{"Host mismatch", "GET http://a/ HTTP/1.1|Host: b||", 400, "Host differs from the target's authority"},
	{"CONNECT Host mismatch", "CONNECT a:443 HTTP/1.1|Host: b:443||", 400, "Host differs from the target's authority"},
	// Connection and Upgrade
	{"Connection not tokens", "GET / HTTP/1.1|Host: a|Connection: a b||", 400, "invalid Connection field"},
	{"33 Connection options", "GET / HTTP/1.1|Host: a|Connection: " + strings.Repeat("x,", 16) + "|Connection: " + strings.Repeat("y,", 17) + "||", 400, "too many Connection options"},
	{"two Upgrades", "GET / HTTP/1.1|Host: a|Connection: upgrade|Upgrade: a|Upgrade: b||", 400, "duplicate Upgrade"},
}

func TestParseRequestHeadRefuses(t *testing.T) {
	for _, c := range requestRefusals {
		t.Run(c.name, func(t *testing.T) {
			var h RequestHead
			n, err := ParseRequestHead([]byte(crlf(c.head)), &h, Limits{})
			checkRefusal(t, n, err, c.status, c.reason)
		})
	}
}

func checkRefusal(t *testing.T, n int, err error, status int, reason string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got n=%d err=%v, want *Error %d %q", n, err, status, reason)
	}
	if e.Status != status || e.Reason != reason {
		t.Fatalf("got %d %q, want %d %q", e.Status, e.Reason, status, reason)
	}
	if n != 0 {
		t.Fatalf("n = %d with an error, want 0", n)
	}
}

// TestParseRequestHeadRefusesEarly: a syntax error is reported as soon as
// its bytes arrive, without waiting for the rest of the head.
func TestParseRequestHeadRefusesEarly(t *testing.T) {
	for _, c := range []refusal{
		{"bare LF", "GET / HTTP/1.1|Host: a\nX", 400, "bare LF"},
		{"obs-fold", "GET / HTTP/1.1|X: 1| 2", 400, "obsolete line folding"},
		{"NUL", "GET / HTTP/1.1|X: 1\x00", 400, "invalid character in field value"},
		{"version", "GET / HTTP/3.0|", 505, "HTTP version not supported"},
		{"method", "G(T", 400, "invalid method"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h RequestHead
			n, err := ParseRequestHead([]byte(crlf(c.head)), &h, Limits{})
			checkRefusal(t, n, err, c.status, c.reason)
		})
	}
}

// TestParseRequestHeadIncomplete: every proper prefix of a valid head is
// ErrIncomplete.
func TestParseRequestHeadIncomplete(t *testing.T) {
	full := crlf("||POST /a?b HTTP/1.1|Host: x|Content-Length: 5|X-Empty:|X: 1 ||")
	var h RequestHead
	for i := 0; i < len(full); i++ {
		if n, err := ParseRequestHead([]byte(full[:i]), &h, Limits{}); err != ErrIncomplete {
			t.Fatalf("prefix %q: n=%d err=%v, want ErrIncomplete", full[:i], n, err)
		}
	}
	n, err := ParseRequestHead([]byte(full+"hello"), &h, Limits{})
	if err != nil || n != len(full) {
		t.Fatalf("whole head: n=%d err=%v, want %d <nil>", n, err, len(full))
	}
}

func TestParseRequestHeadLimits(t *testing.T) {
	long := "GET /" + strings.Repeat("a", 100) + " HTTP/1.1|Host: a||"
	cases := []struct {
		name   string
		head   string
		lim    Limits
		status int
		reason string
	}{
		{"request line longer than the limit", long, Limits{MaxHeaderBytes: 64}, 414, "request line too long"},
		{"request line without end beyond the limit", "GET /" + strings.Repeat("a", 100), Limits{MaxHeaderBytes: 64}, 414, "request line too long"},
		{"head longer than the limit", "GET / HTTP/1.1|Host: a|X: " + strings.Repeat("b", 60) + "||", Limits{MaxHeaderBytes: 64}, 431, "header section too large"},
		{"head one byte longer", "GET / HTTP/1.1|Host: a||", Limits{MaxHeaderBytes: 26}, 431, "header section too large"},
		{"too many fields", "GET / HTTP/1.1|Host: a|A: 1|B: 2|C: 3||", Limits{MaxFields: 3}, 431, "too many header fields"},
		{"default field limit", "GET / HTTP/1.1|Host: a|" + strings.Repeat("X: 1|", 100) + "|", Limits{}, 431, "too many header fields"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h RequestHead
			n, err := ParseRequestHead([]byte(crlf(c.head)), &h, c.lim)
			checkRefusal(t, n, err, c.status, c.reason)
		})
	}
	// At the limits exactly: accepted.
	var h RequestHead
	head := crlf("GET / HTTP/1.1|Host: a||") // 16 + 9 + 2 bytes
	if n, err := ParseRequestHead([]byte(head), &h, Limits{MaxHeaderBytes: 27, MaxFields: 1}); err != nil || n != 27 {
		t.Fatalf("head of exactly the limit: n=%d err=%v", n, err)
	}
	// Below the limit, an unfinished head is incomplete.
	if _, err := ParseRequestHead([]byte(head[:20]), &h, Limits{MaxHeaderBytes: 27}); err != ErrIncomplete {
		t.Fatalf("unfinished head below the limit: err=%v, want ErrIncomplete", err)
	}
}
