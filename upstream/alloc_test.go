package upstream

import (
	"context"
	"io"
	"net/http"
	"testing"
)

// roundTrip sends req on p and reads the body into buf, failing tb on any
// error or a wrong answer.
func roundTrip(tb testing.TB, ctx context.Context, p *Pool, req *Request, resp *Response, buf []byte) {
	if err := p.RoundTrip(ctx, req, resp); err != nil {
		tb.Fatal(err)
	}
	n, err := io.ReadFull(resp.Body, buf[:5])
	if err != nil || n != 5 || resp.Head.Status != 200 {
		tb.Fatalf("%d, %d bytes, %v: want 200 and 5 bytes", resp.Head.Status, n, err)
	}
	resp.Close()
}

func TestAllocRoundTrip(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	req := get("GET", "/")
	var resp Response
	buf := make([]byte, 64)
	ctx := context.Background()
	roundTrip(t, ctx, p, req, &resp, buf) // dials, sizes the buffers
	allocs := testing.AllocsPerRun(200, func() { roundTrip(t, ctx, p, req, &resp, buf) })
	if allocs != 0 && !raceEnabled {
		t.Errorf("RoundTrip + 5-byte body + Close on a reused connection: %v allocations, want 0", allocs)
	}
	if s := p.Stats(); s.Dials != 1 {
		t.Errorf("Stats = %+v, want every exchange on the one connection", s)
	}
	// A peek at every reuse (as for connections idle 100 ms and more) is a
	// system call but no allocation.
	p.staleCheck = 0
	allocs = testing.AllocsPerRun(200, func() { roundTrip(t, ctx, p, req, &resp, buf) })
	if allocs != 0 && !raceEnabled {
		t.Errorf("with the stale-connection peek: %v allocations, want 0", allocs)
	}
	if s := p.Stats(); s.Dials != 1 || s.Stale != 0 {
		t.Errorf("Stats = %+v, want one connection, never found stale", s)
	}
	p.staleCheck = staleCheckAfter
	// With a context that can end, context.AfterFunc allocates (its own
	// context and stop function): a bounded, known cost.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	allocs = testing.AllocsPerRun(200, func() { roundTrip(t, cctx, p, req, &resp, buf) })
	t.Logf("with a cancelable context: %v allocations per exchange", allocs)
	if allocs > 2 && !raceEnabled {
		t.Errorf("with a cancelable context: %v allocations, want at most 2 (context.AfterFunc's)", allocs)
	}
}

// BenchmarkRoundTrip compares one bodiless GET with a 5-byte answer on
// loopback through a Pool and through net/http's Transport, against the
// same canned raw server (which allocates nothing per request).
func BenchmarkRoundTrip(b *testing.B) {
	be := newBackend(b, canned(okHello))
	b.Run("upstream", func(b *testing.B) {
		p := NewPool(be.addr(), Config{})
		defer p.Close()
		req := get("GET", "/")
		var resp Response
		buf := make([]byte, 64)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			roundTrip(b, ctx, p, req, &resp, buf)
		}
	})
	b.Run("upstream-cancelable-ctx", func(b *testing.B) {
		p := NewPool(be.addr(), Config{})
		defer p.Close()
		req := get("GET", "/")
		var resp Response
		buf := make([]byte, 64)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			roundTrip(b, ctx, p, req, &resp, buf)
		}
	})
	b.Run("net-http", func(b *testing.B) {
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		defer tr.CloseIdleConnections()
		hreq, err := http.NewRequest("GET", "http://"+be.addr()+"/", nil)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 64)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := tr.RoundTrip(hreq)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.ReadFull(resp.Body, buf[:5])
			if err != nil || n != 5 {
				b.Fatal(n, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
