package l4

import (
	"io"
	"net"
	"testing"

	"github.com/spillwayhq/spillway/clock"
)

// BenchmarkConnect is one short connection per op: dial the proxy, read the
// backend's one-byte greeting, close. Allocations count the client, the
// proxy and the backend of the same process.
func BenchmarkConnect(b *testing.B) {
	clk := clock.NewReal()
	a := startBackend(b, func(c net.Conn) { _, _ = c.Write([]byte{'A'}) })
	r := startProxy(b, Config{Set: newSet(b, clk, a.addr()), Clock: clk})
	one := make([]byte, 1)
	b.ReportAllocs()
	for b.Loop() {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, one); err != nil {
			b.Fatal(err)
		}
		_ = c.Close()
	}
}

// BenchmarkThroughput streams 256 KiB writes through one proxied
// connection to a backend that discards them.
func BenchmarkThroughput(b *testing.B) {
	clk := clock.NewReal()
	a := startBackend(b, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	r := startProxy(b, Config{Set: newSet(b, clk, a.addr()), Clock: clk})
	c := r.dial(b)
	buf := make([]byte, 256<<10)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}
