package h2wire

import (
	"io"
	"net"
	"net/http"
	"testing"

	"golang.org/x/net/http2"
)

// xnetServer serves h2c (prior knowledge) on a loopback listener with
// x/net's http2.Server and the same answer as smallAnswer, for the
// comparison. It is closed when b ends.
func xnetServer(b *testing.B) *server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Server", "h2wire")
		w.WriteHeader(200)
		w.Write(helloBody)
	})
	h2 := &http2.Server{}
	return listen(b, func(_ *server, nc net.Conn) { h2.ServeConn(nc, &http2.ServeConnOpts{Handler: h}) })
}

// benchServer returns the server under comparison called name.
func benchServer(b *testing.B, name string) *server {
	if name == "server=xnet" {
		return xnetServer(b)
	}
	return newServer(b, Config{}, smallAnswer)
}

// BenchmarkServeGET: small GETs answered with a fixed 5-byte response,
// h2wire against x/net's http2.Server (ServeConn, the gateway's engine
// until now), over loopback in this process. client=bytes sends one stream
// at a time from a client that allocates nothing (allocs/op are the
// server's); client=xnet runs x/net's Transport on one connection with
// GOMAXPROCS×4 goroutines at once (the allocs/op include the client's).
func BenchmarkServeGET(b *testing.B) {
	for _, name := range []string{"server=h2wire", "server=xnet"} {
		b.Run(name+"/client=bytes", func(b *testing.B) {
			s := benchServer(b, name)
			c := newByteClient(b, s)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if n, err := c.get(); err != nil || n != len(helloBody) {
					b.Fatalf("GET: %d bytes, %v", n, err)
				}
			}
		})
		b.Run(name+"/client=xnet", func(b *testing.B) {
			s := benchServer(b, name)
			c := s.client(b, nil)
			url := s.url("/")
			b.ReportAllocs()
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}
