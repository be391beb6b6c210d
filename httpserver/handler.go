package httpserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"time"
)

// sendChunk is the most ReadFrom hands to the server's ReadFrom (sendfile)
// between two re-armings of the write deadline.
const sendChunk = 1 << 20

// Handler returns next wrapped so that the connection's read deadline is
// re-armed to body from now before every read of a request body, and its
// write deadline to send from now before every write of the response (see
// the package doc). A zero or negative body or send leaves that deadline
// alone.
func Handler(next http.Handler, body, send time.Duration) http.Handler {
	return &guard{next: next, body: max(body, 0), send: max(send, 0)}
}

type guard struct {
	next       http.Handler
	body, send time.Duration
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.body > 0 && hasBody(r) {
		x := &bodyExchange{writer: writer{w: w, rc: *http.NewResponseController(w), send: g.send}, body: g.body}
		x.req = *r
		x.req.Body = &x.rb
		x.rb.x, x.rb.inner = x, r.Body
		x.armRead()
		x.armWrite()
		defer x.finish(r)
		g.next.ServeHTTP(x, &x.req)
		return
	}
	if g.send <= 0 {
		g.next.ServeHTTP(w, r)
		return
	}
	x := &writer{w: w, rc: *http.NewResponseController(w), send: g.send}
	x.armWrite()
	defer x.armWrite() // net/http flushes what is left after the handler
	g.next.ServeHTTP(x, r)
}

// hasBody reports whether r comes with a body to read: net/http watches a
// bodiless request's connection for the client going away (a background
// read), where a read deadline would cancel the request.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// writer is the http.ResponseWriter the handler gets: the server's, with the
// write deadline re-armed before every write.
type writer struct {
	w          http.ResponseWriter
	rc         http.ResponseController // over w
	send       time.Duration
	writeOwned bool      // the handler set a write deadline itself
	writeUntil time.Time // the write deadline last set; zero: none yet
}

func (x *writer) armWrite() {
	if x.send > 0 && !x.writeOwned {
		rearm(&x.writeUntil, x.send, x.rc.SetWriteDeadline)
	}
}

// rearm sets the deadline *until to d from now through set, unless the
// one already set is still more than 7/8 of d away: a deadline update
// costs far more than reading the clock (over HTTP/2 it is a message to
// the connection's serving goroutine and a new timer), and a burst of
// small writes or reads re-arms it once instead of every time. The
// inactivity allowed is so between 7/8 of d and d.
func rearm(until *time.Time, d time.Duration, set func(time.Time) error) {
	now := time.Now()
	if !until.IsZero() && until.Sub(now) > d-d/rearmSlack {
		return
	}
	*until = now.Add(d)
	_ = set(*until)
}

// rearmSlack: a deadline is renewed once an eighth of it has passed.
const rearmSlack = 8

func (x *writer) Header() http.Header { return x.w.Header() }

func (x *writer) WriteHeader(code int) { x.armWrite(); x.w.WriteHeader(code) }

func (x *writer) Write(p []byte) (int, error) { x.armWrite(); return x.w.Write(p) }

func (x *writer) WriteString(s string) (int, error) { x.armWrite(); return io.WriteString(x.w, s) }

// Flush implements http.Flusher.
func (x *writer) Flush() { _ = x.FlushError() }

// FlushError is what http.ResponseController.Flush calls.
func (x *writer) FlushError() error { x.armWrite(); return x.rc.Flush() }

// ReadFrom implements io.ReaderFrom in chunks, so that the server's
// ReadFrom (sendfile) still serves files and the deadline is re-armed
// between chunks.
func (x *writer) ReadFrom(src io.Reader) (int64, error) {
	var total int64
	for {
		x.armWrite()
		n, err := io.Copy(x.w, io.LimitReader(src, sendChunk))
		total += n
		if err != nil || n < sendChunk {
			return total, err
		}
	}
}

// Hijack implements http.Hijacker; the connection is the caller's from
// then on, deadlines included.
func (x *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	x.writeOwned = true
	return x.rc.Hijack()
}

// SetWriteDeadline is what http.ResponseController.SetWriteDeadline calls:
// the handler takes the write deadline over.
func (x *writer) SetWriteDeadline(t time.Time) error {
	x.writeOwned = true
	return x.rc.SetWriteDeadline(t)
}

// SetReadDeadline is what http.ResponseController.SetReadDeadline calls.
// Without a timed body there is no read deadline to give up.
func (x *writer) SetReadDeadline(t time.Time) error { return x.rc.SetReadDeadline(t) }

// Unwrap returns the server's writer, for http.ResponseController.
func (x *writer) Unwrap() http.ResponseWriter { return x.w }

// bodyExchange is a request with a timed body: one allocation holding the
// writer (the handler's http.ResponseWriter is the bodyExchange itself, so
// that SetReadDeadline reaches it), the handler's copy of the request and
// the body reader.
type bodyExchange struct {
	writer
	req       http.Request
	rb        timedBody
	body      time.Duration
	readOwned bool      // the handler set a read deadline itself
	readUntil time.Time // the read deadline last set; zero: none yet
	ended     bool      // the body returned EOF or an error
}

func (x *bodyExchange) armRead() {
	if !x.readOwned && !x.ended {
		rearm(&x.readUntil, x.body, x.rc.SetReadDeadline)
	}
}

// SetReadDeadline is what http.ResponseController.SetReadDeadline calls:
// the handler takes the read deadline over.
func (x *bodyExchange) SetReadDeadline(t time.Time) error {
	x.readOwned = true
	return x.rc.SetReadDeadline(t)
}

// finish runs when the handler returns: the rest of an unread body (which
// net/http reads or drops) and the final flush get a fresh deadline, and a
// multipart form parsed on the copy of the request is removed as net/http
// removes the original's.
func (x *bodyExchange) finish(orig *http.Request) {
	x.armRead()
	x.armWrite()
	if x.req.MultipartForm != nil && orig.MultipartForm == nil {
		_ = x.req.MultipartForm.RemoveAll()
	}
}

// timedBody is the request body the handler reads.
type timedBody struct {
	x     *bodyExchange
	inner io.ReadCloser
}

func (b *timedBody) Read(p []byte) (int, error) {
	b.x.armRead()
	n, err := b.inner.Read(p)
	if err != nil {
		// At EOF net/http starts watching the connection (and clears the
		// deadline); after an error the body is done.
		b.x.ended = true
	}
	return n, err
}

func (b *timedBody) Close() error { return b.inner.Close() }

var (
	_ http.ResponseWriter = (*bodyExchange)(nil)
	_ http.Flusher        = (*writer)(nil)
	_ http.Hijacker       = (*writer)(nil)
	_ io.ReaderFrom       = (*writer)(nil)
	_ io.StringWriter     = (*writer)(nil)
)
