package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2peer is an h2c client at the frame level, for tests that check which
// frames the proxy sends and in which order (GOAWAY, its last stream id).
type h2peer struct {
	t   *testing.T
	c   net.Conn
	fr  *http2.Framer
	dec *hpack.Decoder
}

// dialH2 opens an h2c connection with prior knowledge and sends the
// preface and SETTINGS; every read is bounded by 5 s from the dial.
func dialH2(t *testing.T, addr string) *h2peer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	p := &h2peer{t: t, c: c, fr: http2.NewFramer(c, c), dec: hpack.NewDecoder(4096, nil)}
	if err := p.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return p
}

// get sends a GET for path on stream id (end of stream).
func (p *h2peer) get(id uint32, path string) {
	p.t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "a"}, {Name: ":path", Value: path},
	} {
		_ = enc.WriteField(f)
	}
	if err := p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		p.t.Fatal(err)
	}
}

// next returns the next frame that matters, as text: "HEADERS <id>
// <status>", "DATA <id> end" (the last DATA frame of a stream; others are
// skipped), "GOAWAY <last id> <code>", "RST <id> <code>", "PING ack", or
// "closed" when the connection ends. SETTINGS and PING are answered,
// WINDOW_UPDATE skipped.
func (p *h2peer) next() string {
	p.t.Helper()
	for {
		f, err := p.fr.ReadFrame()
		if err != nil {
			return "closed"
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = p.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if f.IsAck() {
				return "PING ack"
			}
			_ = p.fr.WritePing(true, f.Data)
		case *http2.GoAwayFrame:
			return fmt.Sprintf("GOAWAY %d %v", f.LastStreamID, f.ErrCode)
		case *http2.RSTStreamFrame:
			return fmt.Sprintf("RST %d %v", f.StreamID, f.ErrCode)
		case *http2.HeadersFrame:
			hf, err := p.dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				p.t.Fatal(err)
			}
			status := ""
			for _, h := range hf {
				if h.Name == ":status" {
					status = h.Value
				}
			}
			if f.StreamEnded() {
				return fmt.Sprintf("HEADERS %d %s end", f.StreamID, status)
			}
			return fmt.Sprintf("HEADERS %d %s", f.StreamID, status)
		case *http2.DataFrame:
			if f.StreamEnded() {
				return fmt.Sprintf("DATA %d end", f.StreamID)
			}
		}
	}
}

// ping sends a PING and waits for its ack: the proxy has then read
// everything sent before it. It fails on any other frame that matters.
func (p *h2peer) ping() {
	p.t.Helper()
	if err := p.fr.WritePing(false, [8]byte{1}); err != nil {
		p.t.Fatal(err)
	}
	p.expect("PING ack")
}

// expectAll reads frames with next and fails unless they are want, in
// any order.
func (p *h2peer) expectAll(want ...string) {
	p.t.Helper()
	left := map[string]int{}
	for _, w := range want {
		left[w]++
	}
	for range want {
		got := p.next()
		if left[got] == 0 {
			p.t.Fatalf("got %q, want one of %v", got, left)
		}
		left[got]--
	}
}

// expect reads frames with next and fails unless they are want, in order.
func (p *h2peer) expect(want ...string) {
	p.t.Helper()
	for _, w := range want {
		if got := p.next(); got != w {
			p.t.Fatalf("got %q, want %q (sequence %q)", got, w, want)
		}
	}
}
