package h2wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spillwayhq/spillway/httpwire"
)

// rawClient speaks HTTP/2 frames to a server, legal or not.
type rawClient struct {
	t     testing.TB
	nc    net.Conn
	fr    *http2.Framer
	enc   *hpack.Encoder
	hbuf  bytes.Buffer
	noAck bool // do not acknowledge the server's SETTINGS
}

// dialRaw connects to s; with hello it sends the preface and an empty
// SETTINGS frame.
func dialRaw(t testing.TB, s *server, hello bool) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", s.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	r.fr.AllowIllegalWrites = true
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	if hello {
		r.write([]byte(http2.ClientPreface))
		r.fr.WriteSettings()
	}
	return r
}

func (r *rawClient) write(b []byte) { r.nc.Write(b) }

// block encodes name, value pairs into a header block.
func (r *rawClient) block(pairs ...string) []byte {
	r.hbuf.Reset()
	for i := 0; i+1 < len(pairs); i += 2 {
		r.enc.WriteField(hpack.HeaderField{Name: pairs[i], Value: pairs[i+1]})
	}
	return append([]byte(nil), r.hbuf.Bytes()...)
}

// get is the pseudo-headers of a valid GET of path.
func get(path string, more ...string) []string {
	return append([]string{":method", "GET", ":scheme", "http", ":authority", "h", ":path", path}, more...)
}

// headers sends one HEADERS frame with a whole block.
func (r *rawClient) headers(id uint32, end bool, pairs ...string) {
	r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block(pairs...), EndStream: end, EndHeaders: true})
}

// outcome is what a hostile client must see: GOAWAY with code, or on
// stream a RST_STREAM with code or (status > 0) a response with status.
type outcome struct {
	goaway bool
	code   http2.ErrCode
	stream uint32
	status string
}

func goaway(code http2.ErrCode) outcome { return outcome{goaway: true, code: code} }
func rst(id uint32, code http2.ErrCode) outcome {
	return outcome{stream: id, code: code}
}

// next returns the server's next frame (waiting for what, 10 s at most),
// acknowledging its SETTINGS unless noAck.
func (r *rawClient) next(what string) http2.Frame {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := r.fr.ReadFrame()
	if err != nil {
		r.t.Fatalf("read: %v, still waiting for %s", err, what)
	}
	if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() && !r.noAck {
		r.fr.WriteSettingsAck()
	}
	return f
}

// expect reads the server's frames until want is seen, failing on
// anything that contradicts it or on 10 s without it.
func (r *rawClient) expect(want outcome) {
	r.t.Helper()
	for {
		switch f := r.next(fmt.Sprintf("%+v", want)).(type) {
		case *http2.GoAwayFrame:
			if !want.goaway || f.ErrCode != want.code {
				r.t.Fatalf("GOAWAY %v, want %+v", f.ErrCode, want)
			}
			return
		case *http2.RSTStreamFrame:
			if f.StreamID == want.stream && want.status == "" {
				if f.ErrCode != want.code {
					r.t.Fatalf("RST_STREAM %d %v, want %v", f.StreamID, f.ErrCode, want.code)
				}
				return
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == want.stream && want.status != "" {
				if got := f.PseudoValue("status"); got != want.status {
					r.t.Fatalf("stream %d answered %s, want %s", f.StreamID, got, want.status)
				}
				return
			}
		}
	}
}

// hostileHandler reads the body of a request, or waits for the stream's
// end on /block.
var hostileHandler = HandlerFunc(func(st *Stream) {
	if string(st.Path()) == "/block" {
		<-st.Done()
		return
	}
	io.Copy(io.Discard, st)
})

// TestHostileClients sends what RFC 9113 forbids and checks the error code
// the server answers with.
func TestHostileClients(t *testing.T) {
	checkLeaks(t)
	frozen := func(c Config) Config { c.Clock = new(clockStill); return c }
	cases := []struct {
		name string
		cfg  Config
		send func(r *rawClient)
		want outcome
	}{
		{"bad preface", Config{}, func(r *rawClient) { r.write([]byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n")) }, goaway(http2.ErrCodeProtocol)},
		{"first frame not SETTINGS", Config{}, func(r *rawClient) {
			r.write([]byte(http2.ClientPreface))
			r.fr.WritePing(false, [8]byte{})
		}, goaway(http2.ErrCodeProtocol)},
		{"DATA on stream 0", Config{}, func(r *rawClient) { r.fr.WriteData(0, true, []byte("x")) }, goaway(http2.ErrCodeProtocol)},
		{"DATA on an idle stream", Config{}, func(r *rawClient) { r.fr.WriteData(1, true, []byte("x")) }, goaway(http2.ErrCodeProtocol)},
		{"even stream id", Config{}, func(r *rawClient) { r.headers(2, true, get("/")...) }, goaway(http2.ErrCodeProtocol)},
		{"missing :path", Config{}, func(r *rawClient) {
			r.headers(1, true, ":method", "GET", ":scheme", "http", ":authority", "h")
		}, rst(1, http2.ErrCodeProtocol)},
		{"repeated :method", Config{}, func(r *rawClient) { r.headers(1, true, get("/", ":method", "GET")...) }, rst(1, http2.ErrCodeProtocol)},
		{"pseudo after regular", Config{}, func(r *rawClient) {
			r.headers(1, true, ":method", "GET", ":scheme", "http", "accept", "*/*", ":path", "/")
		}, rst(1, http2.ErrCodeProtocol)},
		{"uppercase field name", Config{}, func(r *rawClient) { r.headers(1, true, get("/", "X-Upper", "1")...) }, rst(1, http2.ErrCodeProtocol)},
		{"connection-specific field", Config{}, func(r *rawClient) { r.headers(1, true, get("/", "connection", "keep-alive")...) }, rst(1, http2.ErrCodeProtocol)},
		{"te other than trailers", Config{}, func(r *rawClient) { r.headers(1, true, get("/", "te", "gzip")...) }, rst(1, http2.ErrCodeProtocol)},
		{"content-length over DATA", Config{}, func(r *rawClient) {
			r.headers(1, false, ":method", "POST", ":scheme", "http", ":authority", "h", ":path", "/", "content-length", "10")
			r.fr.WriteData(1, true, []byte("12345"))
		}, rst(1, http2.ErrCodeProtocol)},
		{"DATA over content-length", Config{}, func(r *rawClient) {
			r.headers(1, false, ":method", "POST", ":scheme", "http", ":authority", "h", ":path", "/block", "content-length", "2")
			r.fr.WriteData(1, false, []byte("12345"))
		}, rst(1, http2.ErrCodeProtocol)},
		{"trailers without END_STREAM", Config{}, func(r *rawClient) {
			r.headers(1, false, ":method", "POST", ":scheme", "http", ":authority", "h", ":path", "/")
			r.headers(1, false, "x-trailer", "1")
		}, rst(1, http2.ErrCodeProtocol)},
		{"connection window overflow", Config{}, func(r *rawClient) { r.fr.WriteWindowUpdate(0, 1<<31-1) }, goaway(http2.ErrCodeFlowControl)},
		{"stream window overflow", Config{}, func(r *rawClient) {
			r.headers(1, false, get("/block")...)
			r.fr.WriteWindowUpdate(1, 1<<31-1)
		}, rst(1, http2.ErrCodeFlowControl)},
		{"DATA past the stream window", Config{StreamWindow: 65535}, func(r *rawClient) {
			r.headers(1, false, ":method", "POST", ":scheme", "http", ":authority", "h", ":path", "/block")
			for range 5 {
				r.fr.WriteData(1, false, make([]byte, 16384))
			}
		}, rst(1, http2.ErrCodeFlowControl)},
		{"DATA past the connection window", Config{StreamWindow: 65535, ConnWindow: 65535}, func(r *rawClient) {
			for id := uint32(1); id <= 5; id += 2 {
				r.headers(id, false, ":method", "POST", ":scheme", "http", ":authority", "h", ":path", "/block")
				r.fr.WriteData(id, false, make([]byte, 16384))
				r.fr.WriteData(id, false, make([]byte, 16384))
			}
		}, goaway(http2.ErrCodeFlowControl)},
		{"frame over MaxFrameSize", Config{}, func(r *rawClient) {
			r.headers(1, false, ":method", "POST", ":scheme", "http", ":authority", "h", ":path", "/")
			r.fr.WriteData(1, false, make([]byte, 20000))
		}, goaway(http2.ErrCodeFrameSize)},
		{"bad ENABLE_PUSH", Config{}, func(r *rawClient) { r.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2}) }, goaway(http2.ErrCodeProtocol)},
		{"INITIAL_WINDOW_SIZE over 2^31-1", Config{}, func(r *rawClient) {
			r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
		}, goaway(http2.ErrCodeFlowControl)},
		{"PUSH_PROMISE from the client", Config{}, func(r *rawClient) {
			r.fr.WriteRawFrame(http2.FramePushPromise, http2.FlagPushPromiseEndHeaders, 1, []byte{0, 0, 0, 2})
		}, goaway(http2.ErrCodeProtocol)},
		{"header list over MaxHeaderListSize", Config{MaxHeaderListSize: 1024}, func(r *rawClient) {
			r.headers(1, true, get("/", "x-big", string(make([]byte, 1500)))...)
		}, outcome{stream: 1, status: "431"}},
		{"streams over MaxConcurrentStreams", Config{MaxConcurrentStreams: 2}, func(r *rawClient) {
			for id := uint32(1); id <= 5; id += 2 {
				r.headers(id, true, get("/block")...)
			}
		}, rst(5, http2.ErrCodeRefusedStream)},
		{"rapid reset", frozen(Config{ResetBurst: 20, MaxResetsPerSecond: 1}), func(r *rawClient) {
			for id := uint32(1); id < 100; id += 2 {
				r.headers(id, true, get("/block")...)
				r.fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}
		}, goaway(http2.ErrCodeEnhanceYourCalm)},
		{"CONTINUATION flood", Config{MaxHeaderListSize: 4096}, func(r *rawClient) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(get("/")...)})
			for range 100 {
				if r.fr.WriteContinuation(1, false, bytes.Repeat([]byte{0x82}, 1000)) != nil {
					return
				}
			}
		}, goaway(http2.ErrCodeEnhanceYourCalm)},
		{"empty CONTINUATION flood", Config{MaxHeaderListSize: 1024}, func(r *rawClient) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(get("/")...)})
			for range 1000 {
				if r.fr.WriteContinuation(1, false, nil) != nil {
					return
				}
			}
		}, goaway(http2.ErrCodeEnhanceYourCalm)},
		{"idle", Config{IdleTimeout: 20 * time.Millisecond}, func(r *rawClient) {}, goaway(http2.ErrCodeNo)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, tc.cfg, hostileHandler)
			r := dialRaw(t, s, tc.name != "bad preface" && tc.name != "first frame not SETTINGS")
			tc.send(r)
			r.expect(tc.want)
		})
	}
}

// clockStill is a clock that never moves, so that the rapid-reset bucket
// never refills.
type clockStill struct{}

func (*clockStill) Now() float64 { return 0 }

func TestSettingsTimeout(t *testing.T) {
	checkLeaks(t)
	s := newServer(t, Config{SettingsTimeout: 20 * time.Millisecond}, hostileHandler)
	r := dialRaw(t, s, true)
	r.noAck = true
	r.expect(goaway(http2.ErrCodeSettingsTimeout))
}

// TestConnectionSurvivesStreamErrors: after stream errors the connection
// (and its HPACK state) still serves.
func TestConnectionSurvivesStreamErrors(t *testing.T) {
	checkLeaks(t)
	s := newServer(t, Config{MaxHeaderListSize: 1024}, HandlerFunc(func(st *Stream) {
		st.WriteHeaders(204, nil, true)
	}))
	r := dialRaw(t, s, true)
	r.headers(1, true, get("/", "X-Upper", "1")...)
	r.expect(rst(1, http2.ErrCodeProtocol))
	r.headers(3, true, get("/", "x-big", string(make([]byte, 1500)))...)
	r.expect(outcome{stream: 3, status: "431"})
	r.headers(5, true, get("/ok")...)
	r.expect(outcome{stream: 5, status: "204"})
	if err := r.fr.WriteGoAway(0, http2.ErrCodeNo, nil); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
}

// nextData reads the server's frames until a DATA frame on stream id and
// returns its payload and whether it ended the stream.
func (r *rawClient) nextData(id uint32) (string, bool) {
	r.t.Helper()
	for {
		switch f := r.next(fmt.Sprint("DATA on ", id)).(type) {
		case *http2.DataFrame:
			if f.StreamID == id {
				return string(f.Data()), f.StreamEnded()
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			r.t.Fatalf("%v while waiting for DATA on %d", f, id)
		}
	}
}

// TestSendWindow: with the client's initial window at 0 the response's
// body waits for WINDOW_UPDATE, and goes out in pieces the window allows.
func TestSendWindow(t *testing.T) {
	checkLeaks(t)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		st.WriteHeaders(200, nil, false)
		st.Write([]byte("0123456789"))
	}))
	r := dialRaw(t, s, false)
	r.write([]byte(http2.ClientPreface))
	r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	r.headers(1, true, get("/")...)
	r.expect(outcome{stream: 1, status: "200"}) // flushed before the wait
	r.fr.WriteWindowUpdate(1, 4)
	if data, end := r.nextData(1); data != "0123" || end {
		t.Fatalf("first DATA %q (end %v), want the window's 4 bytes", data, end)
	}
	r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 6}) // +6 on the open stream
	if data, end := r.nextData(1); data != "456789" || end {
		t.Fatalf("second DATA %q (end %v), want the other 6", data, end)
	}
	if data, end := r.nextData(1); data != "" || !end {
		t.Fatalf("last DATA %q (end %v), want an empty END_STREAM", data, end)
	}
}

// TestSendWindowTimeout: a window that stays shut resets the stream with
// CANCEL after WriteTimeout, and Write says why.
func TestSendWindowTimeout(t *testing.T) {
	checkLeaks(t)
	werr := make(chan error, 1)
	s := newServer(t, Config{WriteTimeout: 50 * time.Millisecond}, HandlerFunc(func(st *Stream) {
		_, err := st.Write([]byte("x"))
		werr <- err
	}))
	r := dialRaw(t, s, false)
	r.write([]byte(http2.ClientPreface))
	r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	r.headers(1, true, get("/")...)
	r.expect(rst(1, http2.ErrCodeCancel))
	if err := <-werr; !errors.Is(err, ErrWriteTimeout) {
		t.Errorf("Write: %v, want ErrWriteTimeout", err)
	}
}

// TestReadTimeout: a body that stops coming resets the stream with CANCEL
// after ReadTimeout.
func TestReadTimeout(t *testing.T) {
	checkLeaks(t)
	rerr := make(chan error, 1)
	s := newServer(t, Config{ReadTimeout: 50 * time.Millisecond}, HandlerFunc(func(st *Stream) {
		_, err := io.ReadAll(st)
		rerr <- err
	}))
	r := dialRaw(t, s, true)
	r.headers(1, false, ":method", "POST", ":scheme", "http", ":authority", "h", ":path", "/")
	r.fr.WriteData(1, false, []byte("some"))
	r.expect(rst(1, http2.ErrCodeCancel))
	if err := <-rerr; !errors.Is(err, ErrReadTimeout) {
		t.Errorf("Read: %v, want ErrReadTimeout", err)
	}
}

// TestInformational: 1xx headers, repeated, before the final ones.
func TestInformational(t *testing.T) {
	checkLeaks(t)
	errs := make(chan error, 3)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		errs <- st.WriteHeaders(103, []httpwire.Field{field("link", "</a.css>; rel=preload")}, false)
		errs <- st.WriteHeaders(103, nil, false)
		errs <- st.WriteHeaders(100, nil, true) // a 1xx cannot end the stream
		st.WriteHeaders(200, nil, true)
	}))
	r := dialRaw(t, s, true)
	r.headers(1, true, get("/")...)
	r.expect(outcome{stream: 1, status: "103"})
	r.expect(outcome{stream: 1, status: "103"})
	r.expect(outcome{stream: 1, status: "200"})
	for _, want := range []error{nil, nil, ErrBadStatus} {
		if err := <-errs; !errors.Is(err, want) {
			t.Errorf("WriteHeaders: %v, want %v", err, want)
		}
	}
}
