package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/upstream"
)

// TestEnginesAgree sends each request of diffCases once over HTTP/1.1 and
// once over h2c to the same proxy and HTTP/1.1 backend, and requires the
// same upstream request and the same client-visible response from both
// engines.
//
// The HTTP/1.1 client sends Host first and the other fields in the order
// of their canonical names (names canonical, a name's values in order),
// which is the normalisation the HTTP/2 engine applies to the map
// x/net/http2 gives it: with that, the upstream heads are byte-identical.
// Every difference allowed, and why:
//
//	what                          where        why
//	X-Request-Id value            upstream     generated per request (compared as <id>)
//	chunk boundaries              upstream     framing: the engines re-chunk what they read
//	                                           (compared: decoded body and trailers)
//	field order, name case        upstream     an HTTP/2 request is a map to x/net/http2; the
//	                                           h2 engine sorts canonical names, Host first
//	                                           (the h1 client here sends that order; a client
//	                                           sending another order gets it kept over h1)
//	Date                          client       x/net/http2's server adds one when the upstream
//	                                           sent none (RFC 9110 6.6.1 asks a proxy to); the
//	                                           h1 engine forwards what the upstream sent
//	Connection, Keep-Alive,       client       hop-by-hop and HTTP/1.1 framing; HTTP/2 has none
//	Transfer-Encoding
//	Content-Length on a           client       the h1 engine re-chunks; x/net/http2 may or may
//	chunked upstream answer                    not set one (it does for a short body written
//	                                           before the handler's first flush)
//
// Nothing else may differ: status, 1xx heads (103 Early Hints), header
// fields and values, body and trailers.
func TestEnginesAgree(t *testing.T) { forEachH2Engine(t, testEnginesAgree) }

func testEnginesAgree(t *testing.T, engine string) {
	noLeaks(t)
	rec := newRecorder(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, rec.addr)}
	addr, _ := startProxy(t, Config{HTTP2: true, H2Engine: engine}, one(rt))
	h2 := h2cClient(t)
	for _, tc := range diffCases() {
		t.Run(tc.name, func(t *testing.T) {
			r1 := sendH1(t, addr, &tc)
			u1 := rec.next(t)
			r2 := sendH2(t, h2, addr, &tc)
			u2 := rec.next(t)
			if u1.head != u2.head {
				t.Errorf("upstream heads differ\nh1: %q\nh2: %q", u1.head, u2.head)
			}
			if u1.body != u2.body || !slices.Equal(u1.trailers, u2.trailers) {
				t.Errorf("upstream bodies differ\nh1: %q %q\nh2: %q %q", u1.body, u1.trailers, u2.body, u2.trailers)
			}
			if tc.wantUp != "" && !strings.Contains(u1.head, tc.wantUp) {
				t.Errorf("upstream head lacks %q:\n%s", tc.wantUp, u1.head)
			}
			r1.normalise(r1.chunked)
			r2.normalise(r1.chunked)
			if !reflect.DeepEqual(r1, r2) {
				t.Errorf("responses differ\nh1: %+v\nh2: %+v", r1, r2)
			}
			if r1.status != tc.wantStatus {
				t.Errorf("status %d, want %d", r1.status, tc.wantStatus)
			}
		})
	}
}

// diffCase is one logical request: the fields besides Host, in the order
// of their canonical names, and its body, sent with a Content-Length or,
// when chunked, as chunks over HTTP/1.1 and with no length over HTTP/2.
type diffCase struct {
	name, method, target string
	fields               [][2]string
	body                 []string // the chunks; joined for a Content-Length
	chunked              bool
	trailers             [][2]string
	wantStatus           int
	wantUp               string // a line the upstream head must hold
}

func diffCases() []diffCase {
	large := strings.Repeat("L", 8000)
	many := make([][2]string, 0, 40)
	for i := range 40 {
		many = append(many, [2]string{fmt.Sprintf("X-Field-%02d", i), fmt.Sprintf("value %d", i)})
	}
	ua := [2]string{"User-Agent", "diff/1"}
	return []diffCase{
		{name: "GET with query", method: "GET", target: "/search?q=a%20b&lang=fr&empty=",
			fields: [][2]string{{"Accept", "text/html"}, ua}, wantStatus: 200, wantUp: "GET /search?q=a%20b&lang=fr&empty= HTTP/1.1\r\n"},
		{name: "POST with length", method: "POST", target: "/submit",
			fields: [][2]string{{"Content-Type", "application/json"}, ua}, body: []string{`{"a":1}`}, wantStatus: 200,
			wantUp: "Content-Length: 7\r\n"},
		{name: "POST chunked with trailers", method: "POST", target: "/upload",
			fields: [][2]string{ua}, body: []string{"hello ", "chunked ", "world"}, chunked: true,
			trailers: [][2]string{{"X-Checksum", "abc123"}}, wantStatus: 200, wantUp: "Transfer-Encoding: chunked\r\n"},
		{name: "large header", method: "GET", target: "/large",
			fields: [][2]string{ua, {"X-Large", large}}, wantStatus: 200},
		{name: "many headers", method: "GET", target: "/many", fields: append([][2]string{ua}, many...), wantStatus: 200},
		{name: "repeated headers", method: "GET", target: "/repeat",
			fields:     [][2]string{{"Accept", "text/html"}, {"Accept", "application/json"}, ua, {"X-Multi", "a"}, {"X-Multi", "b, c"}},
			wantStatus: 200},
		{name: "103 Early Hints", method: "GET", target: "/early", fields: [][2]string{ua}, wantStatus: 200},
		{name: "HEAD", method: "HEAD", target: "/head", fields: [][2]string{ua}, wantStatus: 200},
		{name: "204", method: "DELETE", target: "/204", fields: [][2]string{ua}, wantStatus: 204},
		{name: "304", method: "GET", target: "/304", fields: [][2]string{{"If-None-Match", `"v1"`}, ua}, wantStatus: 304},
		{name: "chunked answer with trailer", method: "GET", target: "/chunked", fields: [][2]string{ua}, wantStatus: 200},
		{name: "answer without Content-Type", method: "GET", target: "/untyped", fields: [][2]string{ua}, wantStatus: 200},
		{name: "502 from the upstream", method: "GET", target: "/502", fields: [][2]string{ua}, wantStatus: 502},
	}
}

// diffAnswers are the backend's answers by path; the default echoes
// nothing and says ok. None sends Date (see the table above).
var diffAnswers = map[string]string{
	"/early": "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nearly",
	"/head":    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 42\r\nEtag: \"h\"\r\n\r\n",
	"/204":     "HTTP/1.1 204 No Content\r\nX-Deleted: yes\r\n\r\n",
	"/304":     "HTTP/1.1 304 Not Modified\r\nEtag: \"v1\"\r\nCache-Control: max-age=60\r\n\r\n",
	"/chunked": "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: X-Digest\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\nX-Digest: d1\r\n\r\n",
	"/untyped": "HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n<html>hi</html>\n",
	"/502":     "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 4\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nnope",
	"":         "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nX-Multi: 1\r\nX-Multi: 2\r\nServer: rec\r\n\r\nok",
}

// upReq is one request as the backend received it: the head byte for byte
// (the request id replaced), the decoded body and the trailers.
type upReq struct {
	head     string
	body     string
	trailers []string
}

// recorder is a raw HTTP/1.1 backend that records every request it gets.
type recorder struct {
	addr string
	got  chan upReq
}

var requestID = regexp.MustCompile(`(?m)^X-Request-Id: [0-9a-f]{32}\r$`)

func newRecorder(t *testing.T) *recorder {
	r := &recorder{got: make(chan upReq, 16)}
	r.addr = rawServer(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReaderSize(c, 64<<10)
		var h httpwire.RequestHead
		for {
			n, err := readHeadFrom(br, &h)
			if err != nil {
				return
			}
			raw, _ := br.Peek(n)
			u := upReq{head: requestID.ReplaceAllString(string(raw), "X-Request-Id: <id>\r")}
			_, _ = br.Discard(n)
			if !u.readBody(br, h.Chunked, h.ContentLength) {
				return
			}
			r.got <- u
			ans, ok := diffAnswers[string(h.Path)]
			if !ok {
				ans = diffAnswers[""]
			}
			if _, err := io.WriteString(c, ans); err != nil {
				return
			}
		}
	})
	return r
}

func (u *upReq) readBody(br *bufio.Reader, chunked bool, length int64) bool {
	var b []byte
	var err error
	switch {
	case chunked:
		var cr httpwire.ChunkedReader
		cr.Reset(br, httpwire.Limits{})
		if b, err = io.ReadAll(&cr); err == nil {
			for _, f := range cr.Trailers() {
				u.trailers = append(u.trailers, string(f.Name)+": "+string(f.Value))
			}
		}
	case length > 0:
		b = make([]byte, length)
		_, err = io.ReadFull(br, b)
	}
	u.body = string(b)
	return err == nil
}

// next returns the next request the backend received.
func (r *recorder) next(t *testing.T) upReq {
	t.Helper()
	select {
	case u := <-r.got:
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("the backend received no request")
		return upReq{}
	}
}

// clientView is a response as a client sees it.
type clientView struct {
	interim  []string // 1xx: "103 Link=[...]"
	status   int
	header   http.Header
	body     string
	trailer  http.Header
	chunked  bool // HTTP/1.1: the response came chunked
	protocol int
}

// normalise drops what the engines may frame differently (see the table
// of TestEnginesAgree); chunked is the HTTP/1.1 response's framing.
func (v *clientView) normalise(chunked bool) {
	for _, k := range []string{"Date", "Connection", "Keep-Alive", "Transfer-Encoding"} {
		delete(v.header, k)
	}
	if chunked {
		delete(v.header, "Content-Length")
	}
	if len(v.trailer) == 0 {
		v.trailer = nil
	}
	v.chunked, v.protocol = false, 0
}

// sendH1 sends tc over HTTP/1.1 on a fresh connection.
func sendH1(t *testing.T, addr string, tc *diffCase) clientView {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: diff.example\r\n", tc.method, tc.target)
	fields := tc.fields
	if len(tc.trailers) > 0 {
		fields = append(slices.Clone(fields), [2]string{"Trailer", tc.trailers[0][0]})
	}
	for _, f := range fields {
		fmt.Fprintf(&b, "%s: %s\r\n", f[0], f[1])
	}
	switch {
	case tc.chunked:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		for _, c := range tc.body {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(c), c)
		}
		b.WriteString("0\r\n")
		for _, f := range tc.trailers {
			fmt.Fprintf(&b, "%s: %s\r\n", f[0], f[1])
		}
		b.WriteString("\r\n")
	case tc.body != nil:
		body := strings.Join(tc.body, "")
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	default:
		b.WriteString("\r\n")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var v clientView
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: tc.method})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode < 200 {
			v.interim = append(v.interim, fmt.Sprintf("%d %v", resp.StatusCode, resp.Header))
			continue
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		v.status, v.header, v.body, v.trailer = resp.StatusCode, resp.Header, string(body), resp.Trailer
		v.chunked, v.protocol = slices.Equal(resp.TransferEncoding, []string{"chunked"}), 1
		return v
	}
}

// unsized hides a body's length, so the client sends it without one.
type unsized struct{ io.Reader }

// sendH2 sends tc over h2c through the client.
func sendH2(t *testing.T, cl *http.Client, addr string, tc *diffCase) clientView {
	t.Helper()
	var v clientView
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		v.interim = append(v.interim, fmt.Sprintf("%d %v", code, http.Header(h)))
		return nil
	}}
	ctx, cancel := context.WithTimeout(httptrace.WithClientTrace(context.Background(), trace), 10*time.Second)
	defer cancel()
	var body io.Reader
	if tc.body != nil {
		body = bytes.NewReader([]byte(strings.Join(tc.body, "")))
		if tc.chunked {
			body = unsized{body}
		}
	}
	req, err := http.NewRequestWithContext(ctx, tc.method, "http://"+addr+tc.target, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "diff.example"
	for _, f := range tc.fields {
		req.Header.Add(f[0], f[1])
	}
	if len(tc.trailers) > 0 {
		req.Trailer = http.Header{}
		for _, f := range tc.trailers {
			req.Trailer.Add(f[0], f[1])
		}
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("h2c client spoke HTTP/%d", resp.ProtoMajor)
	}
	v.status, v.header, v.body, v.trailer, v.protocol = resp.StatusCode, resp.Header, string(b), resp.Trailer, 2
	return v
}

// TestHTTP10WithoutHostGetsOne: an HTTP/1.0 request without Host goes
// upstream as HTTP/1.1, which requires one: the absolute-form target's
// authority, else an empty Host (RFC 9112 section 3.2). (The engine sent
// none until FuzzH1Engine's seed corpus found it.)
func TestHTTP10WithoutHostGetsOne(t *testing.T) {
	noLeaks(t)
	rec := newRecorder(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, rec.addr)}
	addr, _ := startProxy(t, Config{}, one(rt))
	for req, want := range map[string]string{
		"GET /old HTTP/1.0\r\n\r\n":                 "GET /old HTTP/1.1\r\nHost: \r\n",
		"GET http://h.example/abs HTTP/1.0\r\n\r\n": "GET /abs HTTP/1.1\r\nHost: h.example\r\n",
	} {
		if got := statusOf(raw(t, addr, req)); got != "HTTP/1.1 200 OK" {
			t.Errorf("%q: %q, want 200", req, got)
		}
		u := rec.next(t)
		if !strings.HasPrefix(u.head, want) {
			t.Errorf("%q went upstream as\n%s\nwant it to start %q", req, u.head, want)
		}
		var h httpwire.RequestHead
		if _, err := httpwire.ParseRequestHead([]byte(u.head), &h, httpwire.Limits{}); err != nil {
			t.Errorf("%q went upstream as a head httpwire refuses (%v):\n%s", req, err, u.head)
		}
	}
}

// TestEnginesRefuseMalformed sends each malformed case of the issue once
// over HTTP/1.1 (bytes as written) and once over h2c (the same fields in
// an HPACK block, which can carry any byte): the HTTP/1.1 engine answers
// 400, the HTTP/2 engine (x/net/http2's checks) resets the stream or
// answers 400, and the backend receives nothing from either. Cases with
// no HTTP/2 form (bare LF, obs-fold: line syntax) are HTTP/1.1 only, in
// TestMalformedRefused.
func TestEnginesRefuseMalformed(t *testing.T) { forEachH2Engine(t, testEnginesRefuseMalformed) }

func testEnginesRefuseMalformed(t *testing.T, engine string) {
	noLeaks(t)
	var hits atomic.Int32
	be := backend(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{HTTP2: true, H2Engine: engine}, one(rt))
	post := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":authority", Value: "a"}, {Name: ":path", Value: "/"}}
	with := func(fs ...string) []hpack.HeaderField {
		out := slices.Clone(post)
		for i := 0; i < len(fs); i += 2 {
			out = append(out, hpack.HeaderField{Name: fs[i], Value: fs[i+1]})
		}
		return out
	}
	cases := []struct {
		name string
		h1   string
		h2   []hpack.HeaderField
	}{
		{"CL+TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
			with("content-length", "3", "transfer-encoding", "chunked")},
		{"TE chunked,identity", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
			with("te", "chunked, identity")},
		{"CR in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", with("x-a", "b\rc")},
		{"LF in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\nX-B: c\r\n\r\n", with("x-a", "b\nx-b: c")},
		{"NUL in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n", with("x-a", "b\x00c")},
		{"space in name", "GET / HTTP/1.1\r\nHost: a\r\nX A: b\r\n\r\n", with("x a", "b")},
		{"duplicate CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
			with("content-length", "3", "content-length", "4")},
		{"connection field", "GET / HTTP/1.1\r\nHost: a\r\nConnection: x\r\nConnection: \x01\r\n\r\n", with("connection", "close")},
	}
	// The control: the same helper sees a valid request answered.
	if got := h2Refusal(t, addr, with("x-a", "b")); got != "" {
		t.Fatalf("a valid request over h2c: %s", got)
	}
	for _, tc := range cases {
		if got := statusOf(raw(t, addr, tc.h1)); !strings.HasPrefix(got, "HTTP/1.1 400 ") {
			t.Errorf("%s over HTTP/1.1: %q, want 400", tc.name, got)
		}
		if got := h2Refusal(t, addr, tc.h2); got == "" {
			t.Errorf("%s over h2c: accepted", tc.name)
		} else {
			t.Logf("%s over h2c: %s", tc.name, got)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the backend received %d requests, want 1 (the control)", n)
	}
}

// h2Refusal opens an h2c connection, sends one HEADERS frame (end of
// stream) with fields, and returns how the proxy refused it: "RST_STREAM
// <code>", "GOAWAY <code>", "status <4xx>", or "" for an answer of 1xx-3xx.
func h2Refusal(t *testing.T, addr string, fields []hpack.HeaderField) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range fields {
		_ = enc.WriteField(f)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "connection closed: " + err.Error()
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			return "RST_STREAM " + f.ErrCode.String()
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String()
		case *http2.HeadersFrame:
			hf, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hf {
				if h.Name == ":status" && h.Value >= "400" {
					return "status " + h.Value
				}
			}
			return ""
		}
	}
}
