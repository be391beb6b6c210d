// Package httpserver builds net/http servers that never hold a connection
// forever: every phase of a connection has a deadline, and the deadlines
// of a request's body and response are inactivity timeouts — re-armed on
// every read and write, like nginx's client_body_timeout and send_timeout —
// so a slow client is cut off while a large honest upload or download that
// keeps moving is not.
//
//	srv := httpserver.New(httpserver.Config{Addr: ":8080", Handler: mux})
//	err := srv.ListenAndServe()
//
// # Deadlines
//
//	phase                           Config field        default  nginx's name (default)
//	reading a request's headers     ReadHeaderTimeout   10 s     client_header_timeout (60 s)
//	waiting for the next request    IdleTimeout         75 s     keepalive_timeout (75 s)
//	the body: between two reads     BodyTimeout         60 s     client_body_timeout (60 s)
//	the response: between writes    SendTimeout         60 s     send_timeout (60 s)
//
// net/http's own ReadTimeout and WriteTimeout bound a whole request or
// response, so a value short enough to stop a client that sends one byte a
// second also cuts off an honest 1 GB upload. New leaves them unset and
// wraps the handler instead (Handler): before each read of the request
// body the connection's read deadline is set to BodyTimeout from now
// (http.ResponseController.SetReadDeadline), and before each write of the
// response its write deadline to SendTimeout from now. The timeout is the
// longest silence, not the longest transfer: a body trickling one byte every
// BodyTimeout/2 is read to its end, as nginx would; one slower than that is
// cut at the first gap longer than BodyTimeout. The handler's Read then
// returns an error matching os.ErrDeadlineExceeded, the request's context
// is cancelled, and the connection is closed after the response.
//
// # What the handler wrapper does, and when
//
//   - A request with a body: the read deadline is armed when the handler
//     starts (so a body the handler never reads, which net/http drains
//     after the response, is bounded too), again before every Body.Read,
//     and once more when the handler returns without having read the body
//     to its end. A request without a body is left alone: net/http is then
//     watching the connection for the client going away, and a deadline
//     there would cancel the request's context in the middle of a long
//     handler.
//   - The response: the write deadline is armed when the handler starts,
//     before every Write, WriteString, Flush and ReadFrom (sendfile goes on
//     in chunks of at most 1 MiB, re-armed between them), and when the
//     handler returns (for net/http's final flush).
//   - "Armed" means renewed to the full timeout from now unless the
//     deadline set before is still more than 7/8 of the timeout away: a
//     deadline update costs far more than a clock reading (over HTTP/2 a
//     message to the connection's goroutine and a new timer), so a burst
//     of small reads or writes renews it once. The inactivity allowed is
//     so between 7/8 of the timeout and all of it.
//   - Deadlines are never cleared during a request: a read deadline that
//     passes while the handler is busy (not reading) changes nothing, and
//     a long response is governed by the write deadline alone, renewed with
//     every write.
//   - A handler that sets a deadline itself (http.ResponseController's
//     SetReadDeadline or SetWriteDeadline on the writer it was given) owns
//     that deadline from then on: the wrapper stops re-arming it.
//
// The wrapper costs one allocation per request (a few hundred bytes when
// the request has a body: a copy of the *http.Request with the timed body,
// so that net/http's own bookkeeping of the original body is untouched)
// and a clock reading per read and write, with a deadline update when
// an eighth of the timeout has passed since the last. It keeps
// http.Flusher, http.Hijacker, io.ReaderFrom and io.StringWriter, and
// Unwrap for http.ResponseController.
package httpserver

import (
	"log"
	"net/http"
	"time"
)

// Defaults, nginx's where nginx has one (see the package doc).
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 75 * time.Second
	DefaultBodyTimeout       = 60 * time.Second
	DefaultSendTimeout       = 60 * time.Second
)

// Config is a server's address, handler and deadlines. For each timeout,
// zero means its default and a negative value means none (net/http's own
// behaviour: a connection may then be held forever).
type Config struct {
	Addr    string
	Handler http.Handler // nil: http.DefaultServeMux

	// ReadHeaderTimeout bounds reading a request's line and headers.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection.
	IdleTimeout time.Duration
	// BodyTimeout is the longest wait for the next bytes of a request body
	// (between two reads, not for the whole body).
	BodyTimeout time.Duration
	// SendTimeout is the longest a write of the response may block (a
	// client that stops reading), re-armed before every write.
	SendTimeout time.Duration

	MaxHeaderBytes int         // 0: net/http's default (1 MiB)
	ErrorLog       *log.Logger // nil: the log package's standard logger
}

// timeout is d, or def when d is 0, or 0 (none) when d is negative.
func timeout(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// New returns an *http.Server for cfg: ReadHeaderTimeout and IdleTimeout
// set, ReadTimeout and WriteTimeout left at none, and the handler wrapped
// by Handler with the body and send timeouts. Fields of the result may be
// changed before it serves (TLSConfig, BaseContext, ConnState, ...).
func New(cfg Config) *http.Server {
	h := cfg.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	return &http.Server{
		Addr:              cfg.Addr,
		Handler:           Handler(h, timeout(cfg.BodyTimeout, DefaultBodyTimeout), timeout(cfg.SendTimeout, DefaultSendTimeout)),
		ReadHeaderTimeout: timeout(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		IdleTimeout:       timeout(cfg.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          cfg.ErrorLog,
	}
}
