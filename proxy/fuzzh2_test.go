package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spillwayhq/spillway/request"
)

// FuzzH2Engine feeds arbitrary HTTP/2 frames (after the client preface
// and an empty SETTINGS frame) to each HTTP/2 engine (h2wire, then
// x/net's) over h2c, with the
// same backend as FuzzH1Engine, and checks: no panic and no hang (the
// connection ends within fuzzWait: idle and body timeouts are short), and
// the backend never receives a request httpwire would refuse — whatever
// x/net/http2 lets through (odd header names, Content-Length games,
// trailers) the HTTP/2 engine must forward as a valid HTTP/1.1 request or
// refuse. Seeds are frames built with x/net's framer and HPACK encoder.
func FuzzH2Engine(f *testing.F) {
	for _, s := range h2Seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for i, env := range fuzzH2Setup(t) {
			if err := env.runH2(in); err != nil {
				t.Fatalf("%s engine: %v", fuzzH2Engines[i], err)
			}
			if err := env.be.settle(); err != nil {
				t.Fatalf("%s engine: %v", fuzzH2Engines[i], err)
			}
		}
	})
}

var fuzzH2Once struct {
	sync.Once
	envs []*fuzzEnv // one per fuzzH2Engines
	err  error
}

var fuzzH2Engines = []string{H2Wire, H2Std}

// fuzzH2Setup starts an HTTP/2-serving proxy per engine in front of
// FuzzH1Engine's backend (started once per process, like it).
func fuzzH2Setup(t *testing.T) []*fuzzEnv {
	h1 := fuzzSetup(t)
	fuzzH2Once.Do(func() {
		cl, err := newFuzzCluster(h1.be.addr)
		if err != nil {
			fuzzH2Once.err = err
			return
		}
		rt := &Route{Name: "fuzz2", Cluster: cl, ResponseHeaderTimeout: time.Second, MaxBodyBytes: 16 << 10}
		for _, engine := range fuzzH2Engines {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				fuzzH2Once.err = err
				return
			}
			s := NewServer(Config{
				HeaderTimeout: fuzzTimeout, IdleTimeout: fuzzTimeout, BodyTimeout: fuzzTimeout,
				SendTimeout: time.Second, Limits: fuzzLimits, HTTP2: true, H2Engine: engine,
			}, routerFunc(func(*request.View) (*Route, bool) { return rt, true }))
			go func() { _ = s.Serve(ln) }()
			fuzzH2Once.envs = append(fuzzH2Once.envs, &fuzzEnv{addr: ln.Addr().String(), be: h1.be})
		}
	})
	if fuzzH2Once.err != nil {
		t.Fatal(fuzzH2Once.err)
	}
	return fuzzH2Once.envs
}

// runH2 sends the preface, an empty SETTINGS frame and in, then reads
// until the proxy closes the connection.
func (e *fuzzEnv) runH2(in []byte) error {
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(fuzzWait))
	msg := append([]byte(http2.ClientPreface), 0, 0, 0, 4, 0, 0, 0, 0, 0) // SETTINGS, empty
	msg = append(msg, in...)
	wrote := make(chan struct{})
	go func() { _, _ = c.Write(msg); close(wrote) }()
	defer func() { _ = c.Close(); <-wrote }()
	// The proxy's frames must parse; a GOAWAY ends the exchange (x/net
	// then waits a second for the client to close: no need to wait).
	fr := http2.NewFramer(nil, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		switch {
		case err == io.EOF || err != nil && isReset(err):
			return nil
		case err != nil:
			return fmt.Errorf("the proxy sent a frame that does not parse: %v", err)
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			return nil
		}
	}
}

// isReset reports a connection the proxy reset (it may, on a protocol
// error, before reading everything the client sent).
func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

// h2Seeds are HEADERS (+ DATA, + trailers) frames for a few requests.
func h2Seeds() [][]byte {
	type field struct{ k, v string }
	frames := func(endHeaders bool, fields []field, data string, trailers []field) []byte {
		var buf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		block := func(fs []field) []byte {
			var hb bytes.Buffer
			enc := hpack.NewEncoder(&hb)
			for _, f := range fs {
				_ = enc.WriteField(hpack.HeaderField{Name: f.k, Value: f.v})
			}
			return hb.Bytes()
		}
		end := data == "" && trailers == nil
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(fields), EndStream: end, EndHeaders: endHeaders})
		if data != "" {
			_ = fr.WriteData(1, trailers == nil, []byte(data))
		}
		if trailers != nil {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(trailers), EndStream: true, EndHeaders: true})
		}
		return buf.Bytes()
	}
	get := []field{{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/x?y=1"}}
	post := []field{{":method", "POST"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/p"}}
	return [][]byte{
		frames(true, get, "", nil),
		frames(true, append(post, field{"content-length", "5"}), "hello", nil),
		frames(true, append(post, field{"content-length", "3"}, field{"content-length", "3"}), "abc", nil),
		frames(true, append(post, field{"content-length", "9"}), "short", nil),
		frames(true, post, "chunk", []field{{"x-sum", "1"}}),
		frames(true, append(get, field{"x_forwarded_for", "6.6.6.6"}, field{"x-a", "b c"}), "", nil),
		frames(true, []field{{":method", "CONNECT"}, {":authority", "a:443"}}, "", nil),
		frames(true, append(get[:3:3], field{":path", "/a/../b"}), "", nil),
		frames(false, get, "", nil), // no END_HEADERS and no CONTINUATION
		frames(true, append(get, field{"te", "trailers"}, field{"connection", "close"}), "", nil),
	}
}
