package proxy

import (
	"bufio"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/h2wire"
	"github.com/spillwayhq/spillway/httpwire"
)

// Config is one HTTP listener's engine settings. Zero durations and sizes
// take the defaults in brackets; a negative duration means none. A bound
// d of the HTTP/1.1 engine is never cut short and may fire up to
// min(d/8, 250ms) late: it is renewed lazily (internal/conndeadline), so
// that a busy keep-alive connection costs no timer update per request.
type Config struct {
	// HeaderTimeout bounds reading a request head once its first byte
	// arrived [10s]; a client slower than that gets 408.
	HeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection [75s]; the connection is then closed silently.
	IdleTimeout time.Duration
	// BodyTimeout is the longest silence while reading a request body and
	// SendTimeout while writing a response [60s each]: inactivity bounds,
	// re-armed on every read and write, so a slow upload is cut and a
	// large fast one is not.
	BodyTimeout, SendTimeout time.Duration
	// Limits bound a request head [32 KiB, 100 fields]: 431 beyond them.
	Limits httpwire.Limits
	// TrustedProxies are the peers whose X-Forwarded-* and Forwarded
	// fields are kept and extended; from any other peer they are replaced.
	TrustedProxies []netip.Prefix
	// HTTP2 serves h2 (ALPN, on TLS) and h2c with prior knowledge (on
	// plaintext). The h2c Upgrade mechanism is never honoured.
	HTTP2 bool
	// H2Engine is the HTTP/2 server: H2Wire (h2wire, the default when
	// empty) or H2Std (x/net/http2's). Both hand each stream to the same
	// forwarding path.
	H2Engine string
	// MaxConns bounds the connections served at once (0: unlimited): a
	// connection accepted beyond it is closed at once, before any byte is
	// read, and counted in Stats.Refused.
	MaxConns int
	// MaxConnAge bounds how long a client connection is kept (0: no
	// bound), so that long-lived clients reconnect and spread over new
	// instances (seed 001). Past its age an HTTP/1.1 connection's next
	// response carries "Connection: close", and an idle one is closed
	// (once idle for a second: a busy client's next request is not raced);
	// an HTTP/2 connection gets a graceful GOAWAY (its streams finish).
	MaxConnAge time.Duration
	// MaxConnAgeJitter spreads the ages: each connection's bound is drawn
	// uniformly in [MaxConnAge·(1−j), MaxConnAge·(1+j)] when it is
	// accepted, so connections opened together do not all close together
	// (clamped to [0, 1]; 0: every connection gets MaxConnAge).
	MaxConnAgeJitter float64
	// AgeGrace is how long a connection past its age may still carry what
	// keeps it open — an upgraded HTTP/1.1 connection (WebSocket tunnel),
	// HTTP/2 streams after the GOAWAY — before it is closed (0: never
	// closed for its age).
	AgeGrace time.Duration
	// Clock gives the balancer its now [clock.NewReal()].
	Clock clock.Clock
	// Logger receives connection-level errors (never one line per
	// request) [slog.Default()].
	Logger *slog.Logger
	// AccessLog receives the access log lines of the routes that ask for
	// them (Route.AccessLog; fields in logAccess) [Logger].
	AccessLog *slog.Logger
	// OmitReason leaves the Spillway-Reason field out of the gateway's own
	// answers (refusals, no route, upstream failures, malformed requests);
	// the access log and the Observer still get the reason.
	OmitReason bool
}

// Server is the HTTP engines of one listener: it accepts connections,
// terminates TLS when the listener is a TLS listener, and serves each
// connection with the HTTP/1.1 engine or the HTTP/2 engine.
type Server struct {
	cfg    Config
	router atomic.Pointer[routerBox]
	h2     *http2.Server
	// wireCfg configures the h2wire engine's connections (wireConfig),
	// whose streams run on the Server's own pool of workers, closed by
	// Shutdown.
	wireCfg h2wire.Config

	refused atomic.Int64
	sweep   sweeper
	flags   atomic.Uint32 // flagDrain, flagKeepOff, flagShutdown
	bufs    sync.Pool     // *connBufs sized for cfg.Limits

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	h2conns map[*h2conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

type routerBox struct{ r Router }

// NewServer returns a Server routing with r.
func NewServer(cfg Config, r Router) *Server {
	if cfg.HeaderTimeout == 0 {
		cfg.HeaderTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 75 * time.Second
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = 60 * time.Second
	}
	if cfg.SendTimeout == 0 {
		cfg.SendTimeout = 60 * time.Second
	}
	if cfg.Limits.MaxHeaderBytes == 0 {
		cfg.Limits.MaxHeaderBytes = 32 << 10
	}
	if cfg.Limits.MaxFields == 0 {
		cfg.Limits.MaxFields = 100
	}
	cfg.MaxConnAgeJitter = min(max(cfg.MaxConnAgeJitter, 0), 1)
	if cfg.Clock == nil {
		cfg.Clock = clock.NewReal()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AccessLog == nil {
		cfg.AccessLog = cfg.Logger
	}
	s := &Server{cfg: cfg, conns: make(map[net.Conn]struct{}), h2conns: make(map[*h2conn]struct{})}
	s.h2 = &http2.Server{
		IdleTimeout:      positive(cfg.IdleTimeout),
		MaxReadFrameSize: 1 << 20,
		// MaxUploadBufferPerStream and connection bounds are x/net's
		// defaults (1 MiB per stream, 250 concurrent streams).
	}
	s.wireCfg = wireConfig(&s.cfg)
	s.wireCfg.Pool = h2wire.NewPool(0, 0)
	size := cfg.Limits.MaxHeaderBytes + 512
	s.bufs.New = func() any {
		return &connBufs{br: bufio.NewReaderSize(nil, size), bw: bufio.NewWriterSize(nil, 8<<10)}
	}
	s.SetRouter(r)
	return s
}

// SetRouter makes r serve every request that starts from now on.
func (s *Server) SetRouter(r Router) { s.router.Store(&routerBox{r}) }

func (s *Server) route() Router { return s.router.Load().r }

// prefaceConn replays bytes already read from a connection.
type prefaceConn struct {
	net.Conn
	pending []byte
}

func (p *prefaceConn) Read(b []byte) (int, error) {
	if len(p.pending) > 0 {
		n := copy(b, p.pending)
		p.pending = p.pending[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

func positive(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}
