package h2wire

import (
	"encoding/binary"
	"io"
	"net"
	"testing"

	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/httpwire"
)

// byteClient sends GETs as prepared bytes and reads the answers frame by
// frame into one buffer: a client that allocates nothing per request, so
// that allocation counts are the server's. It gives the connection's
// receive window back (a WINDOW_UPDATE on stream 0) once 16 KiB of bodies
// are unacknowledged, as real clients batch theirs, or the server's send
// window would run out after 64 KiB.
type byteClient struct {
	nc   net.Conn
	id   uint32
	req  []byte
	head [9]byte
	buf  []byte
	wu   [13]byte // WINDOW_UPDATE, stream 0
	owed int      // body bytes received and not yet given back
}

// getBlock is a GET of / on authority h in static-table and literal
// representations that add nothing to HPACK's dynamic table, so the same
// bytes serve every request.
var getBlock = []byte{0x82, 0x86, 0x84, 0x01, 0x01, 'h'}

func newByteClient(t testing.TB, s *server) *byteClient {
	r := dialRaw(t, s, true)
	r.fr.WriteSettingsAck()
	return &byteClient{nc: r.nc, id: 1, req: make([]byte, 9+len(getBlock)), buf: make([]byte, 1<<16)}
}

// get sends one GET and reads until its stream ends; it returns the DATA
// bytes received.
func (b *byteClient) get() (int, error) {
	n := len(getBlock)
	b.req[0], b.req[1], b.req[2] = byte(n>>16), byte(n>>8), byte(n)
	b.req[3], b.req[4] = byte(http2.FrameHeaders), byte(http2.FlagHeadersEndStream|http2.FlagHeadersEndHeaders)
	binary.BigEndian.PutUint32(b.req[5:9], b.id)
	copy(b.req[9:], getBlock)
	id := b.id
	b.id += 2
	if _, err := b.nc.Write(b.req); err != nil {
		return 0, err
	}
	data := 0
	for {
		if _, err := io.ReadFull(b.nc, b.head[:]); err != nil {
			return data, err
		}
		length := int(b.head[0])<<16 | int(b.head[1])<<8 | int(b.head[2])
		if _, err := io.ReadFull(b.nc, b.buf[:length]); err != nil {
			return data, err
		}
		typ, flags := http2.FrameType(b.head[3]), http2.Flags(b.head[4])
		sid := binary.BigEndian.Uint32(b.head[5:9]) & (1<<31 - 1)
		if sid != id {
			continue // SETTINGS and its ACK, WINDOW_UPDATE
		}
		if typ == http2.FrameData {
			data += length
		}
		if (typ == http2.FrameData || typ == http2.FrameHeaders) && flags.Has(http2.FlagDataEndStream) {
			return data, b.giveBack(data)
		}
		if typ == http2.FrameRSTStream {
			return data, io.ErrUnexpectedEOF
		}
	}
}

// giveBack counts n more bytes received and returns the connection's
// receive window once 16 KiB are owed.
func (b *byteClient) giveBack(n int) error {
	if b.owed += n; b.owed < 1<<14 {
		return nil
	}
	b.wu[2], b.wu[3] = 4, byte(http2.FrameWindowUpdate) // length 4, no flags, stream 0
	binary.BigEndian.PutUint32(b.wu[9:], uint32(b.owed))
	b.owed = 0
	_, err := b.nc.Write(b.wu[:])
	return err
}

// smallAnswer is the benchmarks' and the allocation test's handler: a 200
// with two fields and a 5-byte body.
var smallAnswer = HandlerFunc(func(st *Stream) {
	st.WriteHeaders(200, smallFields, false)
	st.Write(helloBody)
})

var (
	smallFields = []httpwire.Field{field("content-type", "text/plain"), field("server", "h2wire")}
	helloBody   = []byte("hello")
)

// TestAllocsPerStream: in the steady state a stream costs the server one
// allocation, x/net's: the HeadersFrame its Framer parses into. (hpack
// also allocates the strings of literal fields; this request's only
// literal, the one-byte :authority, is one Go does not allocate.) Neither
// the stream, its fields, its worker nor the response allocate.
func TestAllocsPerStream(t *testing.T) {
	checkLeaks(t)
	s := newServer(t, Config{}, smallAnswer)
	c := newByteClient(t, s)
	for range 100 { // warm: pools, the HPACK table, the intern map
		if n, err := c.get(); err != nil || n != len(helloBody) {
			t.Fatalf("warm-up GET: %d bytes, %v", n, err)
		}
	}
	allocs := testing.AllocsPerRun(500, func() {
		if n, err := c.get(); err != nil || n != len(helloBody) {
			t.Fatalf("GET: %d bytes, %v", n, err)
		}
	})
	t.Logf("%.2f allocations per stream", allocs)
	if allocs > 1.5 && !raceEnabled {
		t.Errorf("%.2f allocations per stream, want x/net's 1", allocs)
	}
}
