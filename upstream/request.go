package upstream

import (
	"io"
	"time"

	"github.com/spillwayhq/spillway/httpwire"
)

// Request is one exchange the engine sends. The engine builds Head itself
// (request line, fields, the empty line): upstream never rewrites headers.
// RoundTrip reads the Request and calls Body, Trailers and Interim on the
// caller's goroutine; none of them is kept after RoundTrip returns.
type Request struct {
	// Method is the request's method, for the response's framing (HEAD,
	// CONNECT) and for Hijack after a 2xx to CONNECT.
	Method []byte
	// Head is the whole request head as it goes on the wire.
	Head []byte
	// Body is the request body; nil means none.
	Body io.Reader
	// BodyLength >= 0 sends exactly that many bytes of Body (the engine put
	// that Content-Length in Head); -1 sends Body chunked with
	// httpwire.ChunkedWriter, one chunk per Read (the engine put
	// "Transfer-Encoding: chunked" in Head).
	BodyLength int64
	// Trailers, for a chunked Body, is called after Body's EOF for the
	// trailer fields to send; nil sends none.
	Trailers func() []httpwire.Field
	// Replayable says Head and Body may be sent again: when a reused
	// connection fails before any byte of the response arrives (a stale
	// keep-alive connection the server closed), RoundTrip retries once on a
	// newly dialed connection. Engines set it for bodiless idempotent
	// requests; a request with a body is replayed only when Body is an
	// io.Seeker (RoundTrip seeks it back to the start).
	Replayable bool
	// HeaderTimeout bounds the wait from the end of writing the request to
	// the response head (every 1xx head re-arms it); 0 means none. Past it:
	// KindTimeout.
	HeaderTimeout time.Duration
	// ReadTimeout bounds each read of the response body (an inactivity
	// bound, re-armed per read from the connection); 0 means none.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of the request to the connection (an
	// inactivity bound on a server that stops reading); 0 means none.
	//
	// Each of these bounds d is never cut short and may fire up to
	// min(d/8, 250ms) late: the connection's deadlines are renewed lazily
	// (internal/conndeadline), so that a busy connection costs no timer
	// update per exchange.
	WriteTimeout time.Duration
	// Interim is called with each 1xx head but 101 (100 Continue, 103 Early
	// Hints) before the final response; the head is valid only during the
	// call. Nil drops them.
	Interim func(h *httpwire.ResponseHead)
}

// replayable reports whether req may be sent again, rewinding its body.
func (req *Request) replayable() bool {
	if !req.Replayable {
		return false
	}
	if req.Body == nil || req.BodyLength == 0 {
		return true
	}
	s, ok := req.Body.(io.Seeker)
	if !ok {
		return false
	}
	_, err := s.Seek(0, io.SeekStart)
	return err == nil
}
