package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

// HTTP/2 health settings of NewH2Transport.
const (
	// H2ReadIdleTimeout: after this long without a frame from the server,
	// the transport sends a PING. It is above grpc-go's default server
	// keepalive enforcement (MinTime 5 min: a client pinging more often
	// while a stream is open but silent collects strikes and gets a GOAWAY
	// "too_many_pings" that kills its streams), so a quiet but healthy gRPC
	// stream is never cut by our pings.
	H2ReadIdleTimeout = 5*time.Minute + 30*time.Second
	// H2PingTimeout: a PING unanswered this long closes the connection; a
	// dead upstream connection is thus found within H2ReadIdleTimeout +
	// H2PingTimeout of its last frame (and at once by TCP errors on write).
	H2PingTimeout = 15 * time.Second
	// h2FieldOverhead is the per-field cost HTTP/2 counts in a header list's
	// size (RFC 9113 section 6.5.2).
	h2FieldOverhead = 32
	// defaultMaxFields mirrors httpwire's default bound on fields.
	defaultMaxFields = 100
)

// errNoH2 is the dial error when the server's ALPN did not select h2.
var errNoH2 = errors.New("server did not negotiate h2 by ALPN")

// NewH2Transport returns an HTTP/2 client transport for one cluster's
// upstreams (gRPC goes through it, trailers included). With cleartext it
// speaks h2c with prior knowledge (no Upgrade) over plain TCP; otherwise TLS
// from cfg.TLS (a nil TLS means the system roots and the request's host),
// offering only "h2" by ALPN and failing the dial when the server picks
// anything else. Dials (and handshakes) are bounded by ConnectTimeout;
// connections without streams close after IdleTimeout; PINGs find dead ones
// (H2ReadIdleTimeout, H2PingTimeout); a connection at its server's stream
// limit does not block new requests (StrictMaxConcurrentStreams false: a new
// connection is opened). Response header lists are bounded by
// Limits.MaxHeaderBytes plus 32 bytes per field of Limits.MaxFields.
//
// The result is an *http2.Transport: call its CloseIdleConnections when the
// cluster goes away. A request's context cancels its stream (RST_STREAM),
// not the shared connection.
func NewH2Transport(cfg Config, cleartext bool) http.RoundTripper {
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout}
	maxFields := cfg.Limits.MaxFields
	if maxFields <= 0 {
		maxFields = defaultMaxFields
	}
	t := &http2.Transport{
		AllowHTTP:                  cleartext,
		IdleConnTimeout:            cfg.IdleTimeout,
		ReadIdleTimeout:            H2ReadIdleTimeout,
		PingTimeout:                H2PingTimeout,
		StrictMaxConcurrentStreams: false,
		// A proxy forwards the client's Accept-Encoding and the upstream's
		// encoding as they are; it must not ask for gzip and decode.
		DisableCompression: true,
		MaxHeaderListSize:  uint32(cfg.maxHeaderBytes() + h2FieldOverhead*maxFields),
	}
	if cleartext {
		t.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		}
		return t
	}
	base := &tls.Config{}
	if cfg.TLS != nil {
		base = cfg.TLS.Clone()
	}
	base.NextProtos = []string{http2.NextProtoTLS}
	t.TLSClientConfig = base
	t.DialTLSContext = func(ctx context.Context, network, addr string, tc *tls.Config) (net.Conn, error) {
		return dialH2TLS(ctx, dialer, network, addr, tc, cfg.ConnectTimeout)
	}
	return t
}

// dialH2TLS dials addr and completes a TLS handshake that must select h2,
// all within timeout.
func dialH2TLS(ctx context.Context, d *net.Dialer, network, addr string, tc *tls.Config, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(nc, tc)
	if err := conn.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	if conn.ConnectionState().NegotiatedProtocol != http2.NextProtoTLS {
		conn.Close()
		return nil, errNoH2
	}
	return conn, nil
}
