package httpwire_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spillwayhq/spillway/httpwire"
)

// A gateway reads a request head, refuses it or rewrites it for the
// upstream without its hop-by-hop fields, then streams a chunked body.
func Example() {
	in := "POST /orders?id=7 HTTP/1.1\r\nHost: shop\r\nConnection: keep-alive, X-Hop\r\n" +
		"X-Hop: 1\r\nTransfer-Encoding: chunked\r\nAccept: */*\r\n\r\n" +
		"5\r\nhello\r\n0\r\n\r\n"
	var h httpwire.RequestHead
	n, err := httpwire.ParseRequestHead([]byte(in), &h, httpwire.Limits{})
	var refusal *httpwire.Error
	if errors.As(err, &refusal) {
		fmt.Println("answer", refusal.Status, refusal.Reason)
		return
	}
	out := httpwire.AppendRequestLine(nil, h.Method, h.Target)
	for _, f := range h.Fields {
		if !h.HopByHop(f.Name) {
			out = httpwire.AppendField(out, f.Name, f.Value)
		}
	}
	out = httpwire.AppendField(out, []byte("Transfer-Encoding"), []byte("chunked"))
	out = append(out, "\r\n"...)
	fmt.Print(strings.ReplaceAll(string(out), "\r\n", "|\n"))

	var body httpwire.ChunkedReader
	body.Reset(bufio.NewReader(strings.NewReader(in[n:])), httpwire.Limits{})
	var upstream strings.Builder
	w := bufio.NewWriter(&upstream)
	var chunks httpwire.ChunkedWriter
	chunks.Reset(w)
	io.Copy(&chunks, &body)
	chunks.Close(body.Trailers())
	w.Flush()
	fmt.Print(strings.ReplaceAll(upstream.String(), "\r\n", "|\n"))
	// Output:
	// POST /orders?id=7 HTTP/1.1|
	// Host: shop|
	// Accept: */*|
	// Transfer-Encoding: chunked|
	// |
	// 5|
	// hello|
	// 0|
	// |
}

// A head that arrives in pieces parses once it is whole; a smuggling
// attempt is refused with the status and reason to answer.
func ExampleParseRequestHead() {
	var h httpwire.RequestHead
	_, err := httpwire.ParseRequestHead([]byte("GET / HTTP/1.1\r\nHo"), &h, httpwire.Limits{})
	fmt.Println(err == httpwire.ErrIncomplete)

	_, err = httpwire.ParseRequestHead([]byte("POST / HTTP/1.1\r\nHost: a\r\n"+
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"), &h, httpwire.Limits{})
	fmt.Println(err)
	// Output:
	// true
	// httpwire: 400 Content-Length with Transfer-Encoding
}
