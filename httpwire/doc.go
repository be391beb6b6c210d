// Package httpwire is the gateway's own HTTP/1.1 wire format (RFC 9112):
// strict parsers for request and response heads, a chunked body reader and
// writer, and functions that append heads to a buffer. It is used on both
// sides of the gateway: client requests in, upstream responses back.
//
// # Strict
//
// What RFC 9112 forbids, and what lets two parsers disagree about where a
// message ends (request smuggling), is refused with an *Error carrying the
// status to answer and a short reason that is safe to show the client. The
// parser never repairs a message, so nothing it refuses can be forwarded:
//
//   - lines end in CRLF: a bare LF or a bare CR anywhere in a head is a 400;
//   - obsolete line folding (a line starting with SP or HTAB) is a 400;
//   - field names are tokens with the colon right after them; field values
//     hold no CTL but HTAB (so no NUL, CR or LF);
//   - Content-Length is one field of digits (no sign, no list, at most
//     2^63-1); Content-Length with Transfer-Encoding is a 400;
//   - a request's Transfer-Encoding must be exactly "chunked" in one field:
//     a list whose final coding is not chunked ("chunked, identity",
//     "identity") is a 400 as RFC 9112 section 6.3 requires; a list that ends
//     in chunked after other codings ("gzip, chunked") is a 501, the status
//     section 6.1 suggests for codings the server does not implement; a
//     Transfer-Encoding in an HTTP/1.0 request is a 400;
//   - HTTP/1.1 requests carry exactly one Host field, which must be a valid
//     authority and, for absolute-form and CONNECT targets, equal the
//     target's authority;
//   - versions other than HTTP/1.0 and HTTP/1.1 are a 505 when they have the
//     form HTTP/d.d, a 400 otherwise;
//   - up to 4 empty lines (CRLF) before a request line are skipped (RFC 9112
//     section 2.2 asks servers to ignore at least one).
//
// Responses from upstreams follow the same syntax rules; every refusal of
// ParseResponseHead carries status 502, the answer the gateway gives its
// client for a bad upstream response. A response whose Transfer-Encoding
// does not end in chunked is read until the connection closes (RFC 9112
// section 6.3, rule 4); one with both Transfer-Encoding and Content-Length
// is refused, since its sender broke a MUST and its framing cannot be
// trusted.
//
// # Using it
//
// An engine parses a head with ParseRequestHead (or ParseResponseHead)
// from its read buffer, answering an *Error with its Status and Reason
// (Refusals lists them all, to build the answers in advance) and reading
// more on ErrIncomplete. Framing says how the body is delimited: a
// ChunkedReader decodes chunked bodies, ContentLength gives the others.
// The engine writes the outgoing head with AppendRequestLine or
// AppendStatusLine and AppendField, leaving out the fields HopByHop names
// (Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding, Upgrade and the Connection options), and re-frames
// the body itself, with a ChunkedWriter when it is chunked.
//
// # Bounded
//
// Limits bound a head: MaxHeaderBytes (default 32 KiB) counts every byte
// from the first byte of buf to the end of the empty line, leading empty
// lines included; a request line that does not end within it is a 414, a
// head that does not end within it a 431. More than MaxFields fields
// (default 100) is a 431. Trailers of chunked bodies share the same limits.
// A chunk-size line, with its extensions, is at most 4096 bytes. A message's
// Connection field lists at most 32 options.
//
// # Allocation-free
//
// Parsed heads point into the buffer they were parsed from; a head reused
// with Reset keeps its slices' capacity, so steady-state parsing allocates
// nothing. Errors are pre-built values. The package starts no goroutines
// and reads no clock: the engine that uses it owns connections, buffers and
// deadlines.
package httpwire
