// Package h2wire is the gateway's own HTTP/2 server connection (RFC 9113),
// at the frame level, on x/net/http2's Framer and hpack codec: no
// net/http Request or Header, no goroutine per stream, no channel between
// a stream and the connection on the way of a request.
//
// # Shape
//
// Serve (or NewConn and Conn.Serve) runs a connection on the goroutine
// that calls it: that goroutine is the connection's reader, the only one
// that reads frames. It checks each frame against the protocol, keeps the
// connection's state (streams, flow-control windows, SETTINGS) under one
// mutex, and hands each new stream to a worker of a Pool, which calls the
// Handler's ServeStream with a *Stream. The Stream gives the request
// (pseudo-headers, fields as httpwire.Field, body by Read, trailers) and
// writes the response (WriteHeaders, Write, WriteTrailers, Close, Reset).
//
// # Workers
//
// A Pool's workers stay alive between streams, parked last-in first-out,
// so that in the steady state a stream starts no goroutine and its worker
// has a stack grown by earlier streams (the Go runtime may still shrink an
// idle goroutine's stack at a GC). An idle worker exits after its idle time
// (DefaultWorkerIdle). The pool is bounded (DefaultMaxWorkers for the
// package-wide one); the reader never waits for a worker: when the pool is
// full the stream is refused with REFUSED_STREAM.
//
// # Writes
//
// There is no writer goroutine. Whoever has a frame to send (a worker, or
// the reader for SETTINGS and PING acknowledgements, WINDOW_UPDATE,
// RST_STREAM and GOAWAY) writes it into the connection's bufio.Writer
// under the connection's write lock; the HPACK encoder is the connection's
// and is used under the same lock. A writer that wants its frames sent
// flushes only when no other writer is queued for the lock (an atomic
// count): the last one out flushes for all, so streams answering together
// share one syscall. Response bytes are buffered until the stream ends,
// Flush is called, the buffer fills, or the writer must wait for window.
// Every write to the connection runs under a write deadline (WriteTimeout).
//
// # Bounds
//
// Everything a client can make the connection hold is bounded by Config:
// streams (MaxConcurrentStreams; a stream holds its place until both sides
// have ended it, or, when the client reset it, until its handler returns,
// and handlers per connection are at most twice MaxConcurrentStreams);
// request body bytes buffered (the windows we advertise: StreamWindow per
// stream, ConnWindow per connection; the handler's reads give window
// back); header bytes (MaxHeaderListSize for the decoded list, twice that
// for a block's frames, which stops CONTINUATION floods; HPACK's table is
// the default 4096 bytes); frame size (MaxFrameSize); time (SettingsTimeout
// for the preface and SETTINGS exchange, IdleTimeout without streams,
// ReadTimeout for a body that stops, WriteTimeout for a client that stops
// reading or keeps its window shut); rapid resets (CVE-2023-44487: a token
// bucket of MaxResetsPerSecond and ResetBurst, one token per stream the
// client resets and per stream we refuse; empty ends the connection with
// ENHANCE_YOUR_CALM). Real time enters only through deadlines on the
// net.Conn, the Stream's wait timers, and Config.Clock for the bucket.
//
// # Errors
//
// Connection errors (RFC 9113 5.4.1) end the connection with GOAWAY and
// the error's code, after which the connection is half-closed and drained
// for at most a second so that the client can read the GOAWAY. Stream
// errors (5.4.2) reset the stream with RST_STREAM. A malformed request
// (8.1.1: pseudo-headers missing, repeated, unknown or after a regular
// field; uppercase or invalid field names; invalid values;
// connection-specific fields; te other than "trailers"; content-length
// not matching the DATA) is a stream PROTOCOL_ERROR; its handler does not
// run, or sees Read fail. A header list over MaxHeaderListSize is answered
// 431 by the reader.
//
// # Shutdown
//
// Conn.Shutdown sends GOAWAY NO_ERROR with the last stream id taken,
// refuses new streams, lets the open ones finish and then closes the
// connection; its context bounds the wait.
//
// # Allocations
//
// Stream objects, their field and body buffers, and the workers are
// reused. What still allocates per stream: x/net's Framer allocates a
// HeadersFrame for each HEADERS frame it parses, and the hpack decoder
// allocates the strings of literal fields (not of fields found in its
// tables). Response field strings indexed in the HPACK table are the
// connection's own copies, made once for a short string seen twice (at
// most 256 per connection); other strings are encoded never-indexed from
// the caller's bytes, without a copy.
//
// Not implemented: server push, extended CONNECT (RFC 8441), priorities
// (PRIORITY frames are read and ignored), the client's
// SETTINGS_MAX_HEADER_LIST_SIZE (not checked for responses), keep-alive
// PINGs of our own.
package h2wire
