package httpwire

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// browserRequest is a typical browser request: 12 fields, about 600 bytes.
var browserRequest = []byte("GET /products/widgets/42?color=blue&size=m HTTP/1.1\r\n" +
	"Host: shop.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n" +
	"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n" +
	"Accept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br, zstd\r\n" +
	"Referer: https://shop.example.com/products/widgets\r\n" +
	"Connection: keep-alive\r\n" +
	"Cookie: session=8f2a1c9e7b3d4f6a; theme=dark; consent=1\r\n" +
	"Upgrade-Insecure-Requests: 1\r\n" +
	"Sec-Fetch-Dest: document\r\n" +
	"Sec-Fetch-Mode: navigate\r\n" +
	"Priority: u=0, i\r\n" +
	"\r\n")

// wrkRequest is what wrk sends by default.
var wrkRequest = []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")

// tenFieldRequest is a typical proxied API request with 10 fields.
var tenFieldRequest = []byte("POST /api/v1/orders HTTP/1.1\r\n" +
	"Host: api.example.com\r\n" +
	"User-Agent: curl/8.5.0\r\n" +
	"Accept: application/json\r\n" +
	"Content-Type: application/json\r\n" +
	"Content-Length: 128\r\n" +
	"Authorization: Bearer abc.def.ghi\r\n" +
	"X-Request-Id: 6f1d0c8e-4b1a-4c2e-9d55-1f0a2b3c4d5e\r\n" +
	"Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n" +
	"Connection: keep-alive\r\n" +
	"Expect: 100-continue\r\n" +
	"\r\n")

func TestAllocParseRequestHead(t *testing.T) {
	var h RequestHead
	for _, req := range [][]byte{tenFieldRequest, browserRequest, wrkRequest} {
		allocs := testing.AllocsPerRun(100, func() {
			if n, err := ParseRequestHead(req, &h, Limits{}); err != nil || n != len(req) {
				t.Fatalf("n=%d err=%v", n, err)
			}
		})
		if allocs != 0 {
			t.Errorf("ParseRequestHead of %d bytes: %v allocs per call with a reused head, want 0", len(req), allocs)
		}
	}
	// Refusals are pre-built: no allocation either.
	bad := []byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
	if allocs := testing.AllocsPerRun(100, func() { ParseRequestHead(bad, &h, Limits{}) }); allocs != 0 {
		t.Errorf("refusing a request: %v allocs, want 0", allocs)
	}
}

func TestAllocParseResponseHead(t *testing.T) {
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nDate: Tue, 01 Dec 2026 12:00:00 GMT\r\n\r\n")
	var h ResponseHead
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ParseResponseHead(resp, &h, Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("ParseResponseHead: %v allocs, want 0", allocs)
	}
}

func TestAllocChunkedReader(t *testing.T) {
	body := "5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nGrpc-Status: 0\r\nGrpc-Message: ok\r\n\r\n"
	src := strings.NewReader(body)
	br := bufio.NewReader(src)
	var c ChunkedReader
	p := make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(body)
		br.Reset(src)
		c.Reset(br, Limits{})
		total := 0
		for {
			n, err := c.Read(p)
			total += n
			if err != nil {
				if total != 31 || len(c.Trailers()) != 2 {
					t.Fatalf("read %d bytes, %d trailers, err %v", total, len(c.Trailers()), err)
				}
				break
			}
		}
	})
	if allocs != 0 {
		t.Errorf("ChunkedReader on a reused reader: %v allocs per body, want 0", allocs)
	}
}

func TestAllocChunkedWriter(t *testing.T) {
	bw := bufio.NewWriter(&bytes.Buffer{})
	var c ChunkedWriter
	chunk := []byte("hello, world")
	trailers := []Field{{[]byte("Grpc-Status"), []byte("0")}}
	allocs := testing.AllocsPerRun(100, func() {
		bw.Reset(discard{})
		c.Reset(bw)
		c.Write(chunk)
		c.Close(trailers)
		bw.Flush()
	})
	if allocs != 0 {
		t.Errorf("ChunkedWriter: %v allocs per body, want 0", allocs)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestAllocAppend(t *testing.T) {
	dst := make([]byte, 0, 512)
	name, value := []byte("X-Forwarded-For"), []byte("10.0.0.1")
	allocs := testing.AllocsPerRun(100, func() {
		d := AppendRequestLine(dst[:0], []byte("GET"), []byte("/a/b?c"))
		d = AppendField(d, name, value)
		d = AppendStatusLine(d, 200, nil)
		d = AppendStatusLine(d, 299, []byte("Custom"))
		_ = d
	})
	if allocs != 0 {
		t.Errorf("Append functions into a pre-sized dst: %v allocs, want 0", allocs)
	}
}

func BenchmarkParseRequestHead(b *testing.B) {
	for _, c := range []struct {
		name string
		req  []byte
	}{{"browser", browserRequest}, {"wrk", wrkRequest}, {"api10", tenFieldRequest}} {
		b.Run(c.name, func(b *testing.B) {
			var h RequestHead
			b.ReportAllocs()
			b.SetBytes(int64(len(c.req)))
			for b.Loop() {
				if _, err := ParseRequestHead(c.req, &h, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseResponseHead(b *testing.B) {
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 13\r\nDate: Tue, 01 Dec 2026 12:00:00 GMT\r\n\r\n")
	var h ResponseHead
	b.ReportAllocs()
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		if _, err := ParseResponseHead(resp, &h, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChunkedReader(b *testing.B) {
	var body bytes.Buffer
	bw := bufio.NewWriter(&body)
	var w ChunkedWriter
	w.Reset(bw)
	chunk := bytes.Repeat([]byte("x"), 1024)
	for i := 0; i < 16; i++ {
		w.Write(chunk)
	}
	w.Close(nil)
	bw.Flush()
	src := bytes.NewReader(body.Bytes())
	br := bufio.NewReader(src)
	var c ChunkedReader
	p := make([]byte, 4096)
	b.ReportAllocs()
	b.SetBytes(16 * 1024)
	for b.Loop() {
		src.Reset(body.Bytes())
		br.Reset(src)
		c.Reset(br, Limits{})
		for {
			if _, err := c.Read(p); err != nil {
				break
			}
		}
	}
}
