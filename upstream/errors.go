package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/spillwayhq/spillway/httpwire"
)

// Kind classifies an upstream failure by what the engine answers for it:
// Refused, Reset, BadResponse and PoolFull are a 502, Timeout a 504, Canceled
// a 499 (the client went away), RequestBody whatever the wrapped error of the
// client's side calls for.
type Kind uint8

const (
	// KindRefused: the dial was refused or failed (no connection).
	KindRefused Kind = iota + 1
	// KindTimeout: the connect, header, read or write timeout passed.
	KindTimeout
	// KindReset: the connection was reset or closed before a complete
	// response (or in the middle of its body).
	KindReset
	// KindBadResponse: the response is malformed (an *httpwire.Error from the
	// parser, Content-Length with Transfer-Encoding, too many 1xx heads).
	KindBadResponse
	// KindCanceled: the request's context ended.
	KindCanceled
	// KindPoolFull: MaxConns connections were in use for the whole wait.
	KindPoolFull
	// KindRequestBody: reading the request body (the client's side) failed
	// or it ended before BodyLength bytes; Err is the reader's error, so the
	// engine can tell its own errors (client timeout, size limit) apart.
	KindRequestBody
)

var kindNames = [...]string{
	KindRefused:     "refused",
	KindTimeout:     "timeout",
	KindReset:       "reset",
	KindBadResponse: "bad response",
	KindCanceled:    "canceled",
	KindPoolFull:    "pool full",
	KindRequestBody: "request body",
}

// String names the kind ("refused", "timeout", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Error is an upstream failure: its Kind, the operation that failed ("dial",
// "write request", "read response head", "read response body", "wait for a
// connection") and the cause.
type Error struct {
	Kind Kind
	Op   string
	Err  error
}

// Error reports "upstream: OP: KIND: CAUSE".
func (e *Error) Error() string {
	s := "upstream: " + e.Op + ": " + e.Kind.String()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errors without a cause of their own.
var (
	// ErrPoolClosed is the cause when RoundTrip meets a closed Pool.
	ErrPoolClosed = errors.New("pool closed")
	// ErrPoolFull is the cause of KindPoolFull.
	ErrPoolFull = errors.New("MaxConns connections in use for the whole ConnectTimeout")
	// ErrBodyTooShort is the cause of KindRequestBody when the request body
	// ended before BodyLength bytes.
	ErrBodyTooShort = errors.New("request body ended before its Content-Length")
	// ErrBothFramings is the cause of KindBadResponse for a response with
	// both Content-Length and Transfer-Encoding.
	ErrBothFramings = errors.New("response has both Content-Length and Transfer-Encoding")
	// ErrTooManyInterim is the cause of KindBadResponse for a response that
	// sends more than maxInterim 1xx heads.
	ErrTooManyInterim = errors.New("too many 1xx responses")
	// ErrHeadTooLarge is the cause of KindBadResponse for a response head
	// longer than Limits.MaxHeaderBytes (when the parser did not refuse it).
	ErrHeadTooLarge = errors.New("response head longer than MaxHeaderBytes")
)

// dialError classifies a dial (or TLS handshake) failure.
func dialError(ctx context.Context, err error) *Error {
	switch {
	case ctx.Err() != nil:
		return &Error{Kind: KindCanceled, Op: "dial", Err: context.Cause(ctx)}
	case isTimeout(err):
		return &Error{Kind: KindTimeout, Op: "dial", Err: err}
	}
	return &Error{Kind: KindRefused, Op: "dial", Err: err}
}

// ioError classifies a read or write failure on an upstream connection;
// canceled says whether the request's context closed the connection.
func ioError(ctx context.Context, op string, canceled bool, err error) *Error {
	var we *httpwire.Error
	var ue *Error
	switch {
	case errors.As(err, &ue) && !canceled:
		return ue
	case canceled:
		return &Error{Kind: KindCanceled, Op: op, Err: context.Cause(ctx)}
	case isTimeout(err):
		return &Error{Kind: KindTimeout, Op: op, Err: err}
	case errors.As(err, &we):
		return &Error{Kind: KindBadResponse, Op: op, Err: err}
	case err == io.EOF:
		return &Error{Kind: KindReset, Op: op, Err: io.ErrUnexpectedEOF}
	}
	return &Error{Kind: KindReset, Op: op, Err: err}
}

// isTLSAlert reports whether err is an alert the TLS peer sent (crypto/tls
// reports it as a *net.OpError with Op "remote error").
func isTLSAlert(err error) bool {
	var oe *net.OpError
	return err != nil && errors.As(err, &oe) && oe.Op == "remote error"
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isReset reports whether err says the peer closed or reset the connection
// (the signs of a stale keep-alive connection).
func isReset(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed)
}
