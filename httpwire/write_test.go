package httpwire

import "testing"

func TestAppendRequestLineAndFields(t *testing.T) {
	dst := AppendRequestLine([]byte("x"), []byte("GET"), []byte("/a?b"))
	dst = AppendField(dst, []byte("Host"), []byte("h"))
	dst = AppendField(dst, []byte("X-Empty"), nil)
	want := "xGET /a?b HTTP/1.1\r\nHost: h\r\nX-Empty: \r\n"
	if string(dst) != want {
		t.Fatalf("got %q, want %q", dst, want)
	}
}

func TestAppendStatusLine(t *testing.T) {
	for _, c := range []struct {
		status int
		reason []byte
		want   string
	}{
		{200, nil, "HTTP/1.1 200 OK\r\n"},
		{431, nil, "HTTP/1.1 431 Request Header Fields Too Large\r\n"},
		{499, nil, "HTTP/1.1 499 Client Closed Request\r\n"},
		{200, []byte("Fine"), "HTTP/1.1 200 Fine\r\n"},
		{200, []byte{}, "HTTP/1.1 200 \r\n"},
		{299, nil, "HTTP/1.1 299 \r\n"},
		{999, nil, "HTTP/1.1 999 \r\n"},
	} {
		if got := string(AppendStatusLine(nil, c.status, c.reason)); got != c.want {
			t.Errorf("AppendStatusLine(%d, %q) = %q, want %q", c.status, c.reason, got, c.want)
		}
	}
}

func TestStatusText(t *testing.T) {
	for code, want := range map[int]string{
		100: "Continue", 204: "No Content", 404: "Not Found", 413: "Content Too Large",
		502: "Bad Gateway", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
	} {
		if got := string(StatusText(code)); got != want {
			t.Errorf("StatusText(%d) = %q, want %q", code, got, want)
		}
	}
	for _, code := range []int{-1, 0, 99, 299, 600, 1000} {
		if got := StatusText(code); got != nil {
			t.Errorf("StatusText(%d) = %q, want nil", code, got)
		}
	}
	if b := StatusText(200); cap(b) != len(b) {
		t.Errorf("StatusText(200) has spare capacity %d: an append would write into the shared table", cap(b))
	}
}

func TestEqualFold(t *testing.T) {
	for _, c := range []struct {
		b, lower string
		want     bool
	}{
		{"Content-Length", "content-length", true}, {"HOST", "host", true}, {"host", "host", true},
		{"hosts", "host", false}, {"hos", "host", false}, {"h0st", "host", false},
		{"", "", true}, {"\xc8ost", "host", false}, {"[", "{", false},
	} {
		if got := EqualFold([]byte(c.b), c.lower); got != c.want {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", c.b, c.lower, got, c.want)
		}
	}
}

func TestValidFieldNameAndValue(t *testing.T) {
	for s, want := range map[string]bool{
		"X-Request-Id": true, "a": true, "!#$%&'*+-.^_`|~09AZaz": true,
		"": false, "X Y": false, "X:": false, "X\x00": false, "é": false, "(x)": false,
	} {
		if got := ValidFieldName(s); got != want {
			t.Errorf("ValidFieldName(%q) = %v, want %v", s, got, want)
		}
	}
	for s, want := range map[string]bool{
		"": true, "a b": true, "a\tb": true, "caf\xc3\xa9": true, "\"quoted\", list;q=1": true,
		" a": false, "a ": false, "\ta": false, "a\r\nX: y": false, "a\nb": false, "a\x00": false, "a\x7f": false,
	} {
		if got := ValidFieldValue(s); got != want {
			t.Errorf("ValidFieldValue(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestWriteParseRoundTrip: a head written with the Append functions
// parses back to the same method, target and fields.
func TestWriteParseRoundTrip(t *testing.T) {
	fields := [][2]string{{"Host", "backend:9001"}, {"X-Forwarded-For", "10.0.0.1, 10.0.0.2"}, {"Content-Length", "42"}, {"X-Empty", ""}}
	dst := AppendRequestLine(nil, []byte("PATCH"), []byte("/items/7?x=1"))
	for _, f := range fields {
		dst = AppendField(dst, []byte(f[0]), []byte(f[1]))
	}
	dst = append(dst, "\r\n"...)
	var h RequestHead
	n, err := ParseRequestHead(dst, &h, Limits{})
	if err != nil || n != len(dst) {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if string(h.Method) != "PATCH" || string(h.Target) != "/items/7?x=1" || h.ContentLength != 42 || len(h.Fields) != len(fields) {
		t.Fatalf("parsed %q %q CL=%d %d fields", h.Method, h.Target, h.ContentLength, len(h.Fields))
	}
	for i, f := range fields {
		if string(h.Fields[i].Name) != f[0] || string(h.Fields[i].Value) != f[1] {
			t.Errorf("field %d = %q: %q, want %q: %q", i, h.Fields[i].Name, h.Fields[i].Value, f[0], f[1])
		}
	}

	dst = AppendStatusLine(dst[:0], 201, nil)
	dst = AppendField(dst, []byte("Transfer-Encoding"), []byte("chunked"))
	dst = append(dst, "\r\n"...)
	var r ResponseHead
	if n, err := ParseResponseHead(dst, &r, Limits{}); err != nil || n != len(dst) || r.Status != 201 ||
		string(r.Reason) != "Created" || !r.Chunked {
		t.Fatalf("response: n=%d err=%v status=%d reason=%q chunked=%v", n, err, r.Status, r.Reason, r.Chunked)
	}
}

// TestFieldsDoNotAliasOnAppend: appending to a parsed value copies it
// instead of overwriting the buffer after it.
func TestFieldsDoNotAliasOnAppend(t *testing.T) {
	buf := []byte("GET / HTTP/1.1\r\nHost: h\r\nX: ab\r\n\r\n")
	var h RequestHead
	if _, err := ParseRequestHead(buf, &h, Limits{}); err != nil {
		t.Fatal(err)
	}
	_ = append(h.Fields[1].Value, "ZZZZ"...)
	_ = append(h.Fields[1].Name, "ZZZZ"...)
	_ = append(h.Method, "ZZZZ"...)
	if string(buf) != "GET / HTTP/1.1\r\nHost: h\r\nX: ab\r\n\r\n" {
		t.Fatalf("buffer changed to %q", buf)
	}
}

func TestRefusalsListsWhatTheParsersReturn(t *testing.T) {
	known := map[*Error]bool{}
	for _, e := range Refusals() {
		if known[e] {
			t.Fatalf("%v listed twice", e)
		}
		known[e] = true
	}
	check := func(what string, err error) {
		e, ok := err.(*Error)
		if !ok || !known[e] {
			t.Errorf("%s: %v is not one of Refusals()", what, err)
		}
	}
	for _, c := range requestRefusals {
		var h RequestHead
		_, err := ParseRequestHead([]byte(crlf(c.head)), &h, Limits{})
		check(c.name, err)
	}
	for _, c := range responseRefusals {
		var h ResponseHead
		_, err := ParseResponseHead([]byte(crlf(c.head)), &h, Limits{})
		check(c.name, err)
	}
	for _, c := range chunkedRefusals {
		_, _, err := readChunked(crlf(c.head), 8192, 4096, Limits{MaxHeaderBytes: 64, MaxFields: 2})
		check(c.name, err)
	}
	if n := len(Refusals()); n != 2*36 {
		t.Errorf("%d refusals, want 72 (36 reasons, for requests and for responses)", n)
	}
}
