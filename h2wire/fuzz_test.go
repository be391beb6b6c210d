package h2wire

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spillwayhq/spillway/httpwire"
)

// frames builds client bytes (after the preface) with a Framer.
type frames struct {
	buf  bytes.Buffer
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

func newFrames() *frames {
	f := &frames{}
	f.fr = http2.NewFramer(&f.buf, nil)
	f.fr.AllowIllegalWrites = true
	f.enc = hpack.NewEncoder(&f.hbuf)
	return f
}

func (f *frames) block(pairs ...string) []byte {
	f.hbuf.Reset()
	for i := 0; i+1 < len(pairs); i += 2 {
		f.enc.WriteField(hpack.HeaderField{Name: pairs[i], Value: pairs[i+1]})
	}
	return append([]byte(nil), f.hbuf.Bytes()...)
}

func (f *frames) headers(id uint32, end bool, pairs ...string) *frames {
	f.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: f.block(pairs...), EndStream: end, EndHeaders: true})
	return f
}

func post(path string, more ...string) []string {
	return append([]string{":method", "POST", ":scheme", "https", ":authority", "h", ":path", path}, more...)
}

// fuzzSeeds are the committed corpus of FuzzServe: valid exchanges and
// some of the hostile table's, as the bytes after the preface.
func fuzzSeeds() map[string][]byte {
	seeds := map[string]*frames{}
	add := func(name string) *frames {
		f := newFrames()
		f.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
		f.fr.WriteSettingsAck()
		seeds[name] = f
		return f
	}
	add("get").headers(1, true, get("/", "accept", "*/*", "cookie", "a=1", "cookie", "b=2")...)
	f := add("post_body_trailers").headers(1, false, post("/p", "content-length", "5")...)
	f.fr.WriteData(1, false, []byte("hel"))
	f.fr.WriteDataPadded(1, false, []byte("lo"), make([]byte, 7))
	f.headers(1, true, "x-sum", "1")
	f = add("three_streams_reset").headers(1, true, get("/1")...).headers(3, false, post("/3")...).headers(5, true, get("/5")...)
	f.fr.WriteRSTStream(3, http2.ErrCodeCancel)
	f.fr.WritePing(false, [8]byte{1, 2, 3})
	f.fr.WriteWindowUpdate(0, 1000)
	f.fr.WriteWindowUpdate(1, 1000)
	f = add("continuation")
	b := f.block(get("/c", "x-long", string(bytes.Repeat([]byte("v"), 300)))...)
	f.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:10], EndStream: true})
	f.fr.WriteContinuation(1, false, b[10:100])
	f.fr.WriteContinuation(1, true, b[100:])
	f = add("settings_change_mid_stream").headers(1, true, get("/s")...)
	f.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
	f.fr.WriteWindowUpdate(1, 10)
	f.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 20000})
	f.fr.WriteGoAway(1, http2.ErrCodeNo, nil)
	add("malformed").headers(1, true, get("/", "X-Up", "1")...).headers(3, true, get("/", "te", "gzip")...)
	f = add("data_on_closed").headers(1, true, get("/")...)
	f.fr.WriteData(1, true, []byte("late"))
	f.fr.WriteData(0, true, []byte("zero"))
	out := map[string][]byte{}
	for name, f := range seeds {
		out[name] = f.buf.Bytes()
	}
	return out
}

// fuzzHandler reads the body and answers with headers, body and trailers.
var fuzzHandler = HandlerFunc(func(st *Stream) {
	body, err := io.ReadAll(st)
	if err != nil {
		return
	}
	st.WriteHeaders(200, []httpwire.Field{field("content-type", "text/plain")}, false)
	st.Write(body)
	st.Write(st.Path())
	st.WriteTrailers([]httpwire.Field{field("x-n", fmt.Sprint(len(st.Trailers())))})
})

// FuzzServe feeds client bytes after the preface to a connection over a
// pipe: whatever they are, Serve must return (after the client has gone)
// without a panic, with every handler done.
func FuzzServe(f *testing.F) {
	checkLeaks(f)
	for _, data := range fuzzSeeds() {
		f.Add(data)
	}
	pool := NewPool(0, 0)
	f.Cleanup(pool.Close)
	cfg := Config{Pool: pool, MaxConcurrentStreams: 8, MaxHeaderListSize: 4096, ReadTimeout: 5 * time.Second}
	f.Fuzz(func(t *testing.T, data []byte) {
		client, srv := net.Pipe()
		drained := make(chan struct{})
		go func() {
			io.Copy(io.Discard, client)
			close(drained)
		}()
		served := make(chan error, 1)
		go func() { served <- Serve(srv, nil, &cfg, fuzzHandler) }()
		client.Write([]byte(http2.ClientPreface))
		client.Write(data)
		client.Close()
		select {
		case <-served:
		case <-time.After(30 * time.Second):
			t.Fatal("Serve did not return after the client closed")
		}
		<-drained
	})
}

// TestFuzzCorpusIsCommitted fails when a seed of fuzzSeeds has no file in
// testdata/fuzz/FuzzServe, or a different one. H2WIRE_WRITE_CORPUS=1
// writes them.
func TestFuzzCorpusIsCommitted(t *testing.T) {
	write := os.Getenv("H2WIRE_WRITE_CORPUS") == "1"
	dir := filepath.Join("testdata", "fuzz", "FuzzServe")
	for name, data := range fuzzSeeds() {
		file := filepath.Join(dir, name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if write {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(file); err != nil || string(got) != want {
			t.Errorf("%s: missing or stale (err %v); run H2WIRE_WRITE_CORPUS=1 go test -run FuzzCorpus ./h2wire", file, err)
		}
	}
}
