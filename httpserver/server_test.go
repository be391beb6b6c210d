package httpserver

import (
	"bufio"
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The first case: keep-alive connections left idle were all still
// open after 45 s. Each is used twice (so keep-alive works), then closed by
// the idle timeout.
func TestIdleKeepAliveConnectionsAreClosed(t *testing.T) {
	const n = 50
	addr := start(t, Config{IdleTimeout: short}, ok)
	conns := dial(t, addr, n)
	readers := make([]*bufio.Reader, n)
	for i, c := range conns {
		readers[i] = bufio.NewReader(c)
		for range 2 {
			if resp := roundTrip(t, c, readers[i]); resp.StatusCode != 200 || resp.Close {
				t.Fatalf("conn %d: status %d, close %v", i, resp.StatusCode, resp.Close)
			}
		}
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { waitClosed(t, c, readers[i]) })
	}
	wg.Wait()
}

// Connections that send nothing, or half a request line, are closed by the
// header timeout.
func TestSilentAndHalfHeaderConnectionsAreClosed(t *testing.T) {
	addr := start(t, Config{ReadHeaderTimeout: short}, ok)
	conns := dial(t, addr, 40)
	for _, c := range conns[20:] {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: te"); err != nil {
			t.Fatal(err)
		}
	}
	waitAllClosed(t, conns)
}

// trickle writes head, then one body byte every gap until n bytes are sent
// or a write fails.
func trickle(c io.Writer, head string, n int, gap time.Duration) {
	if _, err := io.WriteString(c, head); err != nil {
		return
	}
	for i := range n {
		if i > 0 {
			time.Sleep(gap)
		}
		if _, err := c.Write([]byte{'a'}); err != nil {
			return
		}
	}
}

// bodyReader reads the whole body and records how that went.
type bodyReader struct {
	mu       sync.Mutex
	errs     []error
	sizes    []int
	deadline atomic.Int64 // reads that ended with a passed deadline
}

func (b *bodyReader) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	b.mu.Lock()
	b.errs, b.sizes = append(b.errs, err), append(b.sizes, len(data))
	b.mu.Unlock()
	if err != nil {
		if isDeadline(err) {
			b.deadline.Add(1)
		}
		http.Error(w, "request body timed out", http.StatusRequestTimeout)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

// The second case: bodies sent at one byte a second were all still
// being read after 45 s. A trickle slower than the body timeout (a byte
// every 2 × timeout) is cut at its first gap: the handler's read fails with
// a passed deadline, it answers 408, and the connection is closed.
func TestSlowBodiesAreCut(t *testing.T) {
	const n = 50
	h := &bodyReader{}
	addr := start(t, Config{BodyTimeout: short}, h)
	conns := dial(t, addr, n)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { trickle(c, post(20), 20, 2*short) })
	}
	for i, got := range waitAllClosed(t, conns) {
		if !strings.HasPrefix(got, "HTTP/1.1 408 ") {
			t.Errorf("conn %d: got %.40q, want a 408", i, got)
		}
	}
	wg.Wait()
	if got := h.deadline.Load(); got != n {
		t.Errorf("%d of %d handlers saw their body read time out; errors %v", got, n, h.errs)
	}
}

// nginx's client_body_timeout is the wait between two reads, not for the
// whole body: a trickle faster than the timeout is read to its end although
// the body takes twice the timeout.
func TestTrickleFasterThanTimeoutSurvives(t *testing.T) {
	const bytes, gap = 20, 100 * time.Millisecond
	timeout := 10 * gap
	h := &bodyReader{}
	addr := start(t, Config{BodyTimeout: timeout}, h)
	conns := dial(t, addr, 5)
	began := time.Now()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			trickle(c, post(bytes), bytes, gap)
			_ = c.SetReadDeadline(time.Now().Add(closeWithin))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("response %v, %v", resp, err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(began); took <= timeout {
		t.Fatalf("bodies took %v, not longer than the timeout %v: nothing tested", took, timeout)
	}
	for i, size := range h.sizes {
		if h.errs[i] != nil || size != bytes {
			t.Errorf("handler %d read %d bytes, error %v", i, size, h.errs[i])
		}
	}
}

// A large fast upload is read to its end although reading it takes longer
// than the body timeout: the handler reads it slowly, in chunks that each
// arrive at once, and every read re-arms the deadline.
func TestLargeUploadOutlastsTheTimeout(t *testing.T) {
	const size, chunk, pause = 64 << 20, 1 << 20, 30 * time.Millisecond
	timeout := time.Second
	var read atomic.Int64
	var readErr error
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, chunk)
		for {
			n, err := io.ReadFull(r.Body, buf)
			read.Add(int64(n))
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				readErr = err
				http.Error(w, err.Error(), http.StatusRequestTimeout)
				return
			}
			time.Sleep(pause)
		}
		_, _ = io.WriteString(w, "ok")
	})
	addr := start(t, Config{BodyTimeout: timeout}, h)
	began := time.Now()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", io.LimitReader(zeros{}, size))
	req.ContentLength = size
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(began)
	if resp.StatusCode != 200 || read.Load() != size {
		t.Fatalf("status %d, %d of %d bytes read, handler error %v", resp.StatusCode, read.Load(), size, readErr)
	}
	if took <= timeout {
		t.Fatalf("upload took %v, not longer than the timeout %v: nothing tested", took, timeout)
	}
}

// writer64 writes 64 MiB in 64 KiB writes and records the first error.
type writer64 struct {
	errc chan error
}

func (h *writer64) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	buf := make([]byte, 64<<10)
	var err error
	for i := 0; i < 1024 && err == nil; i++ {
		_, err = w.Write(buf)
	}
	h.errc <- err
}

// A client that stops reading the response: the server's write blocks and
// the send timeout ends it, so the handler (and the connection) are freed.
func TestClientThatStopsReadingIsCut(t *testing.T) {
	h := &writer64{errc: make(chan error, 8)}
	addr := start(t, Config{SendTimeout: short}, h)
	conns := dial(t, addr, 4)
	for _, c := range conns {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	for range conns {
		select {
		case err := <-h.errc:
			if !isDeadline(err) {
				t.Errorf("handler's write ended with %v, want a passed deadline", err)
			}
		case <-time.After(closeWithin):
			t.Fatalf("a handler still writing after %v", closeWithin)
		}
	}
}

// A large download read slowly (but steadily) completes although it takes
// longer than the send timeout.
func TestSlowSteadyDownloadCompletes(t *testing.T) {
	h := &writer64{errc: make(chan error, 1)}
	timeout := time.Second
	addr := start(t, Config{SendTimeout: timeout}, h)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	began := time.Now()
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 1<<20)
	var total int
	for {
		n, err := io.ReadFull(resp.Body, buf)
		total += n
		if err != nil {
			break
		}
		time.Sleep(30 * time.Millisecond)
	}
	if err := <-h.errc; err != nil || total != 64<<20 {
		t.Fatalf("read %d bytes; handler's error %v", total, err)
	}
	if took := time.Since(began); took <= timeout {
		t.Fatalf("download took %v, not longer than the timeout %v: nothing tested", took, timeout)
	}
}

// A request without a body gets no read deadline: net/http is watching the
// connection for the client going away, and a deadline there would cancel
// the request's context in the middle of a handler slower than BodyTimeout.
func TestBodilessRequestContextOutlivesBodyTimeout(t *testing.T) {
	var ctxErr atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			ctxErr.Store(r.Context().Err())
		case <-time.After(3 * short):
		}
		_, _ = io.WriteString(w, "ok")
	})
	addr := start(t, Config{BodyTimeout: short}, h)
	c := dial(t, addr, 1)[0]
	if resp := roundTrip(t, c, bufio.NewReader(c)); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := ctxErr.Load(); err != nil {
		t.Errorf("context ended during the handler: %v", err)
	}
}

// A handler that sets its own read deadline owns it: the wrapper stops
// re-arming, and a body slower than BodyTimeout is read.
func TestHandlerOwnDeadlineWins(t *testing.T) {
	h := &bodyReader{}
	own := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(closeWithin)); err != nil {
			t.Errorf("SetReadDeadline: %v", err)
		}
		h.ServeHTTP(w, r)
	})
	addr := start(t, Config{BodyTimeout: short}, own)
	c := dial(t, addr, 1)[0]
	trickle(c, post(3), 3, 2*short)
	_ = c.SetReadDeadline(time.Now().Add(closeWithin))
	if got := waitClosedAfterResponse(t, c); !strings.HasPrefix(got, "HTTP/1.1 200 ") {
		t.Errorf("got %.40q, want a 200", got)
	}
	if len(h.sizes) != 1 || h.sizes[0] != 3 || h.errs[0] != nil {
		t.Errorf("read %v, errors %v", h.sizes, h.errs)
	}
}

// waitClosedAfterResponse reads one response's first bytes from c.
func waitClosedAfterResponse(t *testing.T, c io.Reader) string {
	t.Helper()
	b := make([]byte, 64)
	n, _ := io.ReadAtLeast(c, b, 12)
	return string(b[:n])
}

// A multipart form parsed on the handler's copy of the request has its
// temporary files removed, as net/http does for the original.
func TestMultipartFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	var parsed atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseMultipartForm(0); err == nil && len(r.MultipartForm.File["f"]) == 1 {
			parsed.Store(true)
		}
	})
	addr := start(t, Config{}, h)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("f", "f.bin")
	_, _ = fw.Write(bytes.Repeat([]byte("x"), 1<<16))
	_ = mw.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Post("http://"+addr+"/", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	left, _ := os.ReadDir(dir)
	if !parsed.Load() || len(left) != 0 {
		t.Errorf("parsed %v; %d temporary files left", parsed.Load(), len(left))
	}
}

func TestDefaults(t *testing.T) {
	srv := New(Config{Addr: ":0"})
	if srv.ReadHeaderTimeout != DefaultReadHeaderTimeout || srv.IdleTimeout != DefaultIdleTimeout ||
		srv.ReadTimeout != 0 || srv.WriteTimeout != 0 {
		t.Errorf("timeouts %v %v %v %v", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.ReadTimeout, srv.WriteTimeout)
	}
	g, isGuard := srv.Handler.(*guard)
	if !isGuard || g.body != DefaultBodyTimeout || g.send != DefaultSendTimeout || g.next != http.DefaultServeMux {
		t.Errorf("handler %#v", srv.Handler)
	}
	none := New(Config{ReadHeaderTimeout: -1, IdleTimeout: -1, BodyTimeout: -1, SendTimeout: -1})
	if none.ReadHeaderTimeout != 0 || none.IdleTimeout != 0 || none.Handler.(*guard).body != 0 || none.Handler.(*guard).send != 0 {
		t.Errorf("negative timeouts not turned off: %+v", none)
	}
}

// deadlineWriter is a ResponseWriter that takes deadlines, as net/http's does.
type deadlineWriter struct {
	h          http.Header
	reads, wrs int
}

func (d *deadlineWriter) Header() http.Header              { return d.h }
func (d *deadlineWriter) Write(p []byte) (int, error)      { return len(p), nil }
func (d *deadlineWriter) WriteHeader(int)                  {}
func (d *deadlineWriter) SetReadDeadline(time.Time) error  { d.reads++; return nil }
func (d *deadlineWriter) SetWriteDeadline(time.Time) error { d.wrs++; return nil }

// The wrapper costs one allocation per request, with a body or without,
// and arms the deadlines where the package doc says.
func TestOneAllocationPerRequest(t *testing.T) {
	buf := make([]byte, 4) // outside the measured calls
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = r.Body.Read(buf)
		_, _ = w.Write(buf)
	})
	h := Handler(read, 10*time.Second, 10*time.Second)
	w := &deadlineWriter{h: http.Header{}}
	get, _ := http.NewRequest(http.MethodGet, "/", http.NoBody) // as net/http hands it over
	body := strings.NewReader("abcd")
	postReq, _ := http.NewRequest(http.MethodPost, "/", io.NopCloser(body))
	postReq.ContentLength = 4
	if n := testing.AllocsPerRun(100, func() { h.ServeHTTP(w, get) }); n != 1 {
		t.Errorf("GET: %v allocations, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { body.Reset("abcd"); h.ServeHTTP(w, postReq) }); n != 1 {
		t.Errorf("POST: %v allocations, want 1", n)
	}
	*w = deadlineWriter{h: http.Header{}}
	// Entry, one Write, return: armed at entry, and not again while less
	// than an eighth of the 10 s has passed.
	h.ServeHTTP(w, get)
	if w.reads != 0 || w.wrs != 1 {
		t.Errorf("GET: %d read and %d write deadlines set, want 0 and 1", w.reads, w.wrs)
	}
	*w = deadlineWriter{h: http.Header{}}
	body.Reset("abcd")
	h.ServeHTTP(w, postReq) // read: entry, the Read, return (body not at EOF)
	if w.reads != 1 || w.wrs != 1 {
		t.Errorf("POST: %d read and %d write deadlines set, want 1 and 1", w.reads, w.wrs)
	}
}

// A deadline is renewed once an eighth of it has passed since it was set:
// with 80 ms, writes and reads 20 ms apart renew it every time.
func TestDeadlinesRenewedAfterAnEighth(t *testing.T) {
	buf := make([]byte, 1)
	pause := 20 * time.Millisecond // more than 80 ms / 8, whatever the machine does
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 3 {
			time.Sleep(pause)
			_, _ = r.Body.Read(buf)
			_, _ = w.Write(buf)
		}
	}), 80*time.Millisecond, 80*time.Millisecond)
	w := &deadlineWriter{h: http.Header{}}
	req, _ := http.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader("abcdef")))
	req.ContentLength = 6
	h.ServeHTTP(w, req)
	// Entry, then each of the three reads and writes; the return comes
	// right after the last write, within the eighth, and renews them only
	// on a machine that paused the goroutine for 10 ms just then.
	if w.reads < 4 || w.reads > 5 || w.wrs < 4 || w.wrs > 5 {
		t.Errorf("%d read and %d write deadlines set, want 4 each (5 after a pause at the end)", w.reads, w.wrs)
	}
}

func BenchmarkHandler(b *testing.B) {
	msg := []byte("ok")
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(msg) }), time.Second, time.Second)
	w := &deadlineWriter{h: http.Header{}}
	get, _ := http.NewRequest(http.MethodGet, "/", http.NoBody)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, get)
	}
}
