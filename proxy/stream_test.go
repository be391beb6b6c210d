package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/upstream"
)

// Bodies through the proxy are streamed, never buffered whole: a 1 GiB body
// in either direction raises the process's peak heap by no more than
// streamSlack over the peak of a 1 MiB body measured the same way (the
// process holds client, proxy and backend, so the figure bounds all
// three). Every direction and framing is timed and logged with -v.

const (
	streamSlack = 8 << 20
	mib         = 1 << 20
	gib         = 1 << 30
)

// raceEnabled reports whether the test binary was built with -race, which
// moves every body byte through the race detector's range checks (on each
// syscall and copy): 4-5x fewer bytes per second.
var raceEnabled = func() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}()

// streamSize is a transfer's size: full normally, underRace with -race
// (to keep the test near 20 s on two cores), short with -short.
func streamSize(full, underRace, short int64) int64 {
	switch {
	case testing.Short():
		return short
	case raceEnabled:
		return underRace
	}
	return full
}

// pattern is the 32 KiB block bodies are made of.
var pattern = func() []byte {
	b := make([]byte, 32<<10)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}()

// heapSampler records the peak of the heap in use (live and unswept objects
// plus the free space of in-use spans: MemStats.HeapInuse) every 2 ms,
// through runtime/metrics, which does not stop the world.
type heapSampler struct {
	stop chan struct{}
	done chan uint64
}

func sampleHeap() *heapSampler {
	runtime.GC()
	h := &heapSampler{stop: make(chan struct{}), done: make(chan uint64, 1)}
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
		var peak uint64
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64()+s[1].Value.Uint64())
			select {
			case <-h.stop:
				h.done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// peak ends the sampling and returns the peak in bytes.
func (h *heapSampler) peak() uint64 { close(h.stop); return <-h.done }

// streamBackend is a net/http backend that counts what it reads on /up
// (answering the count) and generates ?n= bytes on /down from one 32 KiB
// block, with a Content-Length or, with chunked=1, without one (chunked).
func streamBackend(t *testing.T) string {
	return backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/up":
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "%d", n)
		case "/down":
			n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
			if r.URL.Query().Get("chunked") == "" {
				w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			}
			for n > 0 {
				k := min(n, int64(len(pattern)))
				if _, err := w.Write(pattern[:k]); err != nil {
					return
				}
				n -= k
			}
		}
	}))
}

// uploadH1 sends n bytes to /up on a raw connection, with a Content-Length
// or chunked in 32 KiB chunks, and returns the count the backend answered.
func uploadH1(t *testing.T, addr string, n int64, chunked bool) int64 {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Minute)) // a bound on hangs, not a timing
	if chunked {
		fmt.Fprint(c, "POST /up HTTP/1.1\r\nHost: s\r\nTransfer-Encoding: chunked\r\n\r\n")
	} else {
		fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: s\r\nContent-Length: %d\r\n\r\n", n)
	}
	block := pattern
	if chunked {
		block = append(append([]byte(fmt.Sprintf("%x\r\n", len(pattern))), pattern...), "\r\n"...)
	}
	for left := n; left > 0; left -= int64(len(pattern)) {
		if left < int64(len(pattern)) {
			t.Fatalf("n=%d is not a multiple of %d", n, len(pattern))
		}
		if _, err := c.Write(block); err != nil {
			t.Fatalf("upload after %d bytes: %v", n-left, err)
		}
	}
	if chunked {
		fmt.Fprint(c, "0\r\n\r\n")
	}
	resp, body := readResponse(t, bufio.NewReader(c), "POST")
	if resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	got, _ := strconv.ParseInt(body, 10, 64)
	return got
}

// downloadH1 asks /down for n bytes on a raw connection and returns how
// many arrived and the response's framing.
func downloadH1(t *testing.T, addr string, n int64, chunked bool) (int64, []string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Minute)) // a bound on hangs, not a timing
	q := ""
	if chunked {
		q = "&chunked=1"
	}
	fmt.Fprintf(c, "GET /down?n=%d%s HTTP/1.1\r\nHost: s\r\n\r\n", n, q)
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 64<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64<<10)
	got, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
	if err != nil {
		t.Fatalf("download after %d bytes: %v", got, err)
	}
	return got, resp.TransferEncoding
}

// measure runs fn(n) once for 1 MiB and once for big, each under its own
// heap sampler, and fails when the big run's peak exceeds the small one's
// by more than streamSlack.
func measure(t *testing.T, name string, big int64, fn func(n int64)) {
	t.Helper()
	s := sampleHeap()
	fn(mib)
	small := s.peak()
	start := time.Now()
	s = sampleHeap()
	fn(big)
	large := s.peak()
	d := time.Since(start)
	t.Logf("%s: %d MiB in %v (%.0f MiB/s); peak heap %.1f MiB vs %.1f MiB for 1 MiB",
		name, big/mib, d.Round(time.Millisecond), float64(big)/mib/d.Seconds(), float64(large)/mib, float64(small)/mib)
	if large > small+streamSlack {
		t.Errorf("%s: peak heap %d B for %d MiB, %d B for 1 MiB: grew by more than %d B",
			name, large, big/mib, small, streamSlack)
	}
}

// TestStreamH1GiB: 1 GiB up and 1 GiB down, with a Content-Length and
// chunked, HTTP/1.1 client → proxy → HTTP/1.1 backend. Under -race the
// chunked variants move 128 MiB each (their extra copies through the
// chunk decoders cost ~13 s per GiB there); -short moves 64 MiB.
func TestStreamH1GiB(t *testing.T) {
	noLeaks(t)
	be := streamBackend(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{}, one(rt))
	for _, chunked := range []bool{false, true} {
		frame := map[bool]string{false: "length", true: "chunked"}[chunked]
		size := streamSize(gib, gib, 64*mib)
		if chunked {
			size = streamSize(gib, 128*mib, 64*mib)
		}
		measure(t, "h1 up "+frame, size, func(n int64) {
			if got := uploadH1(t, addr, n, chunked); got != n {
				t.Fatalf("backend counted %d bytes, want %d", got, n)
			}
		})
		measure(t, "h1 down "+frame, size, func(n int64) {
			got, te := downloadH1(t, addr, n, chunked)
			if got != n {
				t.Fatalf("client received %d bytes, want %d", got, n)
			}
			if wantChunked := chunked; wantChunked != (len(te) == 1 && te[0] == "chunked") {
				t.Fatalf("client saw Transfer-Encoding %q, want chunked=%v", te, chunked)
			}
		})
	}
}

// h2cClient is an HTTP/2 client with prior knowledge over plaintext.
func h2cClient(t *testing.T) *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p, DisableCompression: true, HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream:     256 << 10,
		MaxReceiveBufferPerConnection: 1 << 20,
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// patternReader yields n bytes of pattern without holding more than it.
type patternReader struct{ left int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(int64(len(p)), r.left)], pattern)
	r.left -= int64(n)
	return n, nil
}

// TestStreamH2c: an h2c client → proxy → HTTP/1.1 backend, 1 GiB each
// way; under -race, where HTTP/2 framing moves ~50 MiB/s, 64 MiB up and
// 256 MiB down (64x and 256x the 1 MiB baseline: enough to show the heap
// does not follow the body); 32 MiB with -short. The upload has no length (the upstream gets it
// chunked); the download has one. The client's receive buffers are
// bounded (256 KiB a stream), so the heap measured is the proxy's.
func TestStreamH2c(t *testing.T) {
	noLeaks(t)
	up, down := streamSize(gib, 64*mib, 32*mib), streamSize(gib, 256*mib, 32*mib)
	be := streamBackend(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{HTTP2: true}, one(rt))
	cl := h2cClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	measure(t, "h2c up", up, func(n int64) {
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/up", &patternReader{left: n})
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || string(b) != strconv.FormatInt(n, 10) {
			t.Fatalf("h2c upload: HTTP/%d, %d %q, want HTTP/2 and %d", resp.ProtoMajor, resp.StatusCode, b, n)
		}
	})
	buf := make([]byte, 64<<10)
	measure(t, "h2c down", down, func(n int64) {
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/down?n=%d", addr, n), nil)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
		resp.Body.Close()
		if err != nil || got != n || resp.ProtoMajor != 2 {
			t.Fatalf("h2c download: HTTP/%d, %d bytes (%v), want HTTP/2 and %d", resp.ProtoMajor, got, err, n)
		}
	})
}
