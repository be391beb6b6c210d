// Package upstream is the gateway's client side: connections to one
// cluster's endpoints. A Pool keeps one endpoint's HTTP/1.1 connections
// alive between exchanges and sends each Request (a head the engine built,
// a streamed body) with RoundTrip, reading the response head into a reused
// Response whose Body streams the decoded body; httpwire is the wire format.
// NewH2Transport is the HTTP/2 side (TLS with ALPN, or h2c with prior
// knowledge), for gRPC and other HTTP/2 upstreams.
//
// # Lifecycle of an exchange
//
//	var resp upstream.Response // one per request slot, reused
//	err := pool.RoundTrip(ctx, &req, &resp)
//	... read resp.Head, copy resp.Body to the client, then resp.Trailers() ...
//	resp.Close() // back to the pool, or closed
//
// Close returns the connection to the pool when the body was read to its end
// and both sides allow keep-alive; otherwise it closes it (it never drains
// an unread body from the network, it only skips a rest already buffered).
// After a 101 Switching Protocols, Hijack hands the connection over
// instead (WebSocket).
//
// # Stale connections
//
// A server may close a keep-alive connection while it sits idle. No
// goroutine watches idle connections; instead, one idle 100 ms or more is
// peeked at without blocking when taken (one system call, skipped for busy
// connections): a close, a reset or bytes nobody asked for (a 408) and it is
// closed, counted in Stats().Stale, and another taken. A close that races
// the request (or one on a connection reused within 100 ms) is met by the
// exchange: before any response byte, a replayable request is retried once
// on a new connection, anything else fails with KindReset. Bytes after a
// response's end (a server out of step) also keep the connection from reuse.
//
// # Cancellation and timeouts
//
// The request's context closes the connection the moment it ends
// (context.AfterFunc), from dial to Close: RoundTrip and Body.Read then
// return an *Error of KindCanceled, so an engine whose client went away
// stops the upstream work at once. Deadlines bound the rest: ConnectTimeout
// the dial and TLS handshake (and the wait under MaxConns), HeaderTimeout
// the wait for the response head, ReadTimeout and WriteTimeout each read and
// write (inactivity bounds, re-armed per call).
//
// # Errors
//
// Every error is an *Error whose Kind says what the engine answers: 502 for
// KindRefused, KindReset, KindBadResponse and KindPoolFull, 504 for
// KindTimeout, 499 for KindCanceled; KindRequestBody is the client's side
// failing (its wrapped error says how).
//
// # Costs
//
// A RoundTrip on a reused connection with a context that cannot end, a
// small Content-Length body read to its end and Close allocate nothing
// (TestAllocRoundTrip). A context that can end costs context.AfterFunc's
// allocations. Per connection: a 4 KiB read and a 4 KiB write buffer, a
// timer, and the Response's head buffer (which grows to the largest head
// seen, at most Limits.MaxHeaderBytes); request bodies share pooled 32 KiB
// copy buffers. The package starts no goroutine of its own: the only ones
// are the runtime's for timers and context callbacks.
package upstream
