package httpwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// readChunked decodes body with a ChunkedReader over a bufio.Reader of the
// given size, reading through a buffer of readSize bytes.
func readChunked(body string, bufSize, readSize int, lim Limits) (string, []Field, error) {
	var c ChunkedReader
	c.Reset(bufio.NewReaderSize(strings.NewReader(body), bufSize), lim)
	var out bytes.Buffer
	p := make([]byte, readSize)
	for {
		n, err := c.Read(p)
		out.Write(p[:n])
		if err == io.EOF {
			return out.String(), c.Trailers(), nil
		}
		if err != nil {
			return out.String(), nil, err
		}
	}
}

func TestChunkedReaderAccepts(t *testing.T) {
	cases := []struct {
		name, body, want, trailers string
	}{
		{"one chunk", "5|hello|0||", "hello", ""},
		{"two chunks, upper hex", "A|0123456789|1|!|0||", "0123456789!", ""},
		{"leading zeros", "0005|hello|000||", "hello", ""},
		{"16 digits", "0000000000000003|abc|0||", "abc", ""},
		{"extensions", "3;name=value;x|abc|3 ; q=\"a b\"|def|0;last||", "abcdef", ""},
		{"trailers", "2|ab|0|Checksum: abc|X-T:  1 ||", "ab", "Checksum=abc,X-T=1"},
		{"empty body", "0||", "", ""},
		{"binary data with CRLF inside", "4|\r\n\r\n|0||", "\r\n\r\n", ""},
	}
	for _, c := range cases {
		for _, readSize := range []int{1, 3, 4096} {
			got, tr, err := readChunked(crlfBody(c.body), 32, readSize, Limits{})
			if err != nil || got != c.want {
				t.Fatalf("%s, reads of %d: got %q err=%v, want %q", c.name, readSize, got, err, c.want)
			}
			var names []string
			for _, f := range tr {
				names = append(names, string(f.Name)+"="+string(f.Value))
			}
			if s := strings.Join(names, ","); s != c.trailers {
				t.Fatalf("%s: trailers %q, want %q", c.name, s, c.trailers)
			}
		}
	}
}

// crlfBody is crlf for chunked bodies, except inside chunk data written
// literally with \r\n.
func crlfBody(s string) string { return crlf(s) }

// chunkedRefusals are malformed chunked bodies with the *Error each gets.
var chunkedRefusals = []refusal{
	{"no size", "|abc|0||", 400, "invalid chunk size"},
	{"sign", "+3|abc|0||", 400, "invalid chunk size"},
	{"minus", "-3|abc|0||", 400, "invalid chunk size"},
	{"0x prefix", "0x3|abc|0||", 400, "invalid chunk size"},
	{"space before size", " 3|abc|0||", 400, "invalid chunk size"},
	{"space after size", "3 |abc|0||", 400, "invalid chunk size"},
	{"garbage after size", "3x|abc|0||", 400, "invalid chunk size"},
	{"17 digits", "00000000000000003|abc|0||", 400, "chunk size too large"},
	{"2^63", "8000000000000000|", 400, "chunk size too large"},
	{"bare LF after size", "3\nabc|0||", 400, "bare LF"},
	{"bare CR in extension", "3;a\rb|abc|0||", 400, "bare CR"},
	{"NUL in extension", "3;a\x00|abc|0||", 400, "invalid chunk size"},
	{"long extension", "3;" + strings.Repeat("x", 5000) + "|abc|0||", 400, "chunk line too long"},
	{"data longer than size", "3|abcd|0||", 400, "chunk data not followed by CRLF"},
	{"LF only after data", "3|abc\n0||", 400, "chunk data not followed by CRLF"},
	{"bare LF trailer end", "0|\n", 400, "bare LF"},
	{"bare LF in trailer", "0|X: 1\n|", 400, "bare LF"},
	{"obs-fold trailer", "0|X: 1| 2||", 400, "obsolete line folding"},
	{"bad trailer name", "0|X Y: 1||", 400, "whitespace before colon"},
	{"Content-Length trailer", "0|Content-Length: 3||", 400, "forbidden trailer field"},
	{"Transfer-Encoding trailer", "0|Transfer-Encoding: chunked||", 400, "forbidden trailer field"},
	{"Host trailer", "0|host: a||", 400, "forbidden trailer field"},
	{"trailers too large", "0|X: " + strings.Repeat("y", 100) + "||", 400, "trailer section too large"},
	{"too many trailers", "0|A: 1|B: 2|C: 3||", 400, "too many trailer fields"},
}

func TestChunkedReaderRefuses(t *testing.T) {
	lim := Limits{MaxHeaderBytes: 64, MaxFields: 2}
	for _, c := range chunkedRefusals {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := readChunked(crlfBody(c.head), 8192, 4096, lim)
			var e *Error
			if !errors.As(err, &e) || e.Status != c.status || e.Reason != c.reason {
				t.Fatalf("err = %v, want %d %q", err, c.status, c.reason)
			}
		})
	}
}

func TestChunkedReaderTruncated(t *testing.T) {
	body := crlfBody("5|hello|0|X: 1||")
	for i := 0; i < len(body); i++ {
		_, _, err := readChunked(body[:i], 16, 7, Limits{})
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("body cut at %d (%q): err = %v, want io.ErrUnexpectedEOF", i, body[:i], err)
		}
	}
}

// TestChunkedReaderStopsAtBodyEnd: the bytes after the body stay in the
// bufio.Reader for the next message.
func TestChunkedReaderStopsAtBodyEnd(t *testing.T) {
	br := bufio.NewReader(strings.NewReader(crlfBody("3|abc|0|T: v||NEXT")))
	var c ChunkedReader
	c.Reset(br, Limits{})
	got, err := io.ReadAll(&c)
	if err != nil || string(got) != "abc" {
		t.Fatalf("ReadAll = %q %v", got, err)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "NEXT" {
		t.Fatalf("left in the reader: %q, want \"NEXT\"", rest)
	}
	if n, err := c.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the end = %d %v, want 0 EOF", n, err)
	}
}

func TestChunkedReaderErrorIsSticky(t *testing.T) {
	var c ChunkedReader
	c.Reset(bufio.NewReader(strings.NewReader("zz\r\n")), Limits{})
	p := make([]byte, 8)
	_, err1 := c.Read(p)
	_, err2 := c.Read(p)
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors %v then %v, want the same error twice", err1, err2)
	}
	if c.Trailers() != nil {
		t.Fatal("Trailers before the end of the body are not nil")
	}
}

func TestChunkedWriter(t *testing.T) {
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	var c ChunkedWriter
	c.Reset(bw)
	for _, s := range []string{"hello", "", strings.Repeat("x", 26)} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d %v", s, n, err)
		}
	}
	if err := c.Close([]Field{{[]byte("Grpc-Status"), []byte("0")}}); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	want := "5\r\nhello\r\n1a\r\nxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n0\r\nGrpc-Status: 0\r\n\r\n"
	if out.String() != want {
		t.Fatalf("wrote %q\nwant  %q", out.String(), want)
	}
	if _, err := c.Write([]byte("late")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	if err := c.Close(nil); err == nil {
		t.Fatal("second Close succeeded")
	}
}

// TestChunkedRoundTrip: what ChunkedWriter writes, ChunkedReader reads
// back, with the trailers.
func TestChunkedRoundTrip(t *testing.T) {
	var out bytes.Buffer
	bw := bufio.NewWriterSize(&out, 64)
	var w ChunkedWriter
	w.Reset(bw)
	var want bytes.Buffer
	for i := 0; i < 50; i++ {
		chunk := bytes.Repeat([]byte{byte('a' + i%26)}, i*7)
		want.Write(chunk)
		w.Write(chunk)
	}
	w.Close([]Field{{[]byte("A"), []byte("1")}, {[]byte("B"), []byte("")}})
	bw.Flush()
	got, tr, err := readChunked(out.String(), 32, 100, Limits{})
	if err != nil || got != want.String() {
		t.Fatalf("round trip: %d bytes err=%v, want %d bytes", len(got), err, want.Len())
	}
	if len(tr) != 2 || string(tr[0].Name) != "A" || string(tr[0].Value) != "1" || string(tr[1].Name) != "B" || len(tr[1].Value) != 0 {
		t.Fatalf("trailers %q", tr)
	}
}

type failing struct{ err error }

func (f failing) Read([]byte) (int, error)  { return 0, f.err }
func (f failing) Write([]byte) (int, error) { return 0, f.err }

// TestChunkedErrorsPassThrough: the underlying reader's and writer's own
// errors reach the caller unchanged.
func TestChunkedErrorsPassThrough(t *testing.T) {
	boom := errors.New("connection reset")
	var c ChunkedReader
	c.Reset(bufio.NewReader(io.MultiReader(strings.NewReader("5\r\nhe"), failing{boom})), Limits{})
	if got, err := io.ReadAll(&c); err != boom || string(got) != "he" {
		t.Fatalf("ReadAll = %q %v, want \"he\" and the reader's error", got, err)
	}
	c.Reset(bufio.NewReader(failing{boom}), Limits{})
	if _, err := c.Read(make([]byte, 1)); err != boom {
		t.Fatalf("Read of a failing size line = %v, want the reader's error", err)
	}
	var w ChunkedWriter
	w.Reset(bufio.NewWriterSize(failing{boom}, 16))
	if _, err := w.Write(bytes.Repeat([]byte("x"), 40)); err != boom {
		t.Fatalf("Write = %v, want the writer's error", err)
	}
}
