// Package listener owns the gateway's listening sockets: the accept loop,
// admission (overload.Gate), the PROXY protocol header, TLS, and the hand-off
// of each connection to an engine (proxy.Server or l4.Proxy, through their
// ServeConn).
//
// # One connection
//
//  1. Accept. Errors (EMFILE, ECONNABORTED, …) pause the loop, from 5 ms
//     doubling to 1 s, and are logged once per pause, as net/http does.
//  2. Admit (overload.Gate.Admit, at the Gate's clock, tls when Config.TLS
//     is set). A refused connection is closed at once, with SO_LINGER 0 (a
//     reset, so a flood's excess leaves no TIME_WAIT behind on the gateway),
//     in the accept loop: no goroutine, no byte read.
//  3. On the connection's own goroutine: when the peer is in
//     Config.ProxyFrom, read a PROXY protocol v1 or v2 header with
//     go-proxyproto's parser, within Config.HeaderTimeout. A header's source
//     address becomes the connection's RemoteAddr (its destination the
//     LocalAddr); a LOCAL header (a load balancer's own health check), an
//     UNKNOWN one or one of another family than TCP keeps the peer's
//     addresses. The connection is closed (Stats.ProxyRejected) on a
//     malformed header, a partial one still incomplete at HeaderTimeout (a
//     slowloris; a v1 line must arrive in one segment, as go-proxyproto
//     demands), or a missing one when Config.ProxyRequired. Without
//     ProxyRequired a connection that does not start with a PROXY signature
//     is served with the peer's address; one that sends nothing at all for
//     HeaderTimeout too — so a protocol in which the server speaks first
//     waits HeaderTimeout behind a trusted peer that sends no header: set
//     ProxyRequired for those. From a peer not in ProxyFrom nothing is read:
//     a header it sends reaches the engine as data (and fails there as a bad
//     request).
//  4. Ticket.SetIP with the client's address: the Gate's per-IP limit
//     (closed at once beyond it).
//  5. TLS: tls.Server over the connection with Config.TLS() (called per
//     connection, so certificates can be swapped); the engine runs the
//     handshake.
//  6. engine.ServeConn, then the connection is closed and its Ticket
//     released.
//
// # Reloads
//
// Swap gives new connections a new Config and engine without closing the
// socket, so no connection is refused in between: a connection reads its
// PROXY header under the Config current when it was accepted and takes the
// TLS configuration and engine current when it is handed over (after its
// header), not the engine current at accept, which a reload may have shut
// down meanwhile. The old engine is the caller's to drain and shut down
// after Swap returns.
package listener
