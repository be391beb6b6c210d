package health

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Check probes one endpoint. Check returns nil if addr ("host:port", the
// same port as traffic) is fit for traffic, or an error saying why not. It
// must return soon after ctx is done: the Checker's timeout and its Stop
// work by cancelling ctx. Implementations must be safe for concurrent use
// (the Checker checks all targets at once).
type Check interface {
	Check(ctx context.Context, addr string) error
}

// CheckFunc adapts a function to the Check interface.
type CheckFunc func(ctx context.Context, addr string) error

// Check calls f(ctx, addr).
func (f CheckFunc) Check(ctx context.Context, addr string) error { return f(ctx, addr) }

// StatusRange is an inclusive range of HTTP status codes: {200, 399}, or
// {204, 204} for one code.
type StatusRange struct {
	Min, Max int
}

// DefaultExpected is the statuses an HTTPCheck accepts by default: 200–399
// (HAProxy's httpchk rule; redirects are not followed).
var DefaultExpected = []StatusRange{{200, 399}}

// StatusError is the error of an HTTP check answered with a status outside
// the expected ranges.
type StatusError struct {
	Code int // the status code received
}

func (e *StatusError) Error() string { return "health: unexpected status " + strconv.Itoa(e.Code) }

// maxDrain bounds how much of a check's response body is read (and
// discarded) before the connection is closed or reused.
const maxDrain = 4 << 10

// HTTPCheck requests Method Path from the endpoint and expects a status in
// Expected. Use it through a pointer: the default client is made on first
// use. The zero value is usable: GET / expecting 200–399 over plain HTTP.
// Redirects are not followed (a 3xx is the answer). Safe for concurrent
// use; do not change the fields after the first Check.
type HTTPCheck struct {
	// Method is the request method; "" means GET.
	Method string
	// Path is the request path with an optional query; "" means "/".
	Path string
	// Host is the Host header (and, with TLS, the server name when
	// TLS.ServerName is empty); "" means the endpoint's address.
	Host string
	// Expected lists the accepted statuses; nil means DefaultExpected.
	Expected []StatusRange
	// TLS, when not nil, makes the check speak HTTPS with this
	// configuration: pass the configuration of the traffic itself, so the
	// check goes through the same handshake (certificates, server name,
	// ALPN) as requests do. Nil means plain HTTP.
	TLS *tls.Config
	// Client, when not nil, sends the requests; TLS then only selects the
	// https scheme and Client's transport supplies the TLS configuration.
	// Nil means a client of this check's own that opens a new connection
	// per check (as HAProxy does: a check also proves the endpoint still
	// accepts connections), never uses an environment proxy and does not
	// follow redirects.
	Client *http.Client

	once   sync.Once
	client *http.Client
}

// Validate reports a bad field as a *ConfigError wrapping ErrConfig.
func (h *HTTPCheck) Validate() error {
	if strings.ContainsAny(h.Method, " \t\r\n") {
		return badConfig("Method", "must be a token, got "+strconv.Quote(h.Method))
	}
	if strings.ContainsAny(h.Path, " \t\r\n") {
		return badConfig("Path", "must not contain white space, got "+strconv.Quote(h.Path))
	}
	for i, r := range h.Expected {
		if r.Min < 100 || r.Max > 599 || r.Min > r.Max {
			return badConfig("Expected["+strconv.Itoa(i)+"]", "must be a range within 100–599 with Min ≤ Max, got "+
				strconv.Itoa(r.Min)+"–"+strconv.Itoa(r.Max))
		}
	}
	return nil
}

func (h *HTTPCheck) init() {
	if h.Client != nil {
		h.client = h.Client
		return
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            (&net.Dialer{}).DialContext,
		DisableKeepAlives:      true,
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	if h.TLS != nil {
		cfg := h.TLS.Clone()
		if cfg.ServerName == "" && h.Host != "" {
			cfg.ServerName = hostOnly(h.Host)
		}
		tr.TLSClientConfig = cfg
	}
	h.client = &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// hostOnly strips an optional port from a Host header value.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// Check requests the endpoint at addr and returns nil if it answered with
// an expected status, a *StatusError if it answered with another, or the
// transport's error (refused, reset, timeout, TLS).
func (h *HTTPCheck) Check(ctx context.Context, addr string) error {
	h.once.Do(h.init)
	method := h.Method
	if method == "" {
		method = http.MethodGet
	}
	path := h.Path
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	scheme := "http://"
	if h.TLS != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, method, scheme+addr+path, nil)
	if err != nil {
		return err
	}
	if h.Host != "" {
		req.Host = h.Host
	}
	req.Header.Set("User-Agent", "spillway-health-check")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	expected := h.Expected
	if expected == nil {
		expected = DefaultExpected
	}
	for _, r := range expected {
		if resp.StatusCode >= r.Min && resp.StatusCode <= r.Max {
			return nil
		}
	}
	return &StatusError{Code: resp.StatusCode}
}

// TCPCheck opens a TCP connection to the endpoint and closes it: the
// endpoint passes if it accepts connections. The zero value is ready; safe
// for concurrent use.
type TCPCheck struct{}

// Check connects to addr and closes the connection.
func (TCPCheck) Check(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	_ = conn.Close()
	return nil
}

// ErrNotServing is wrapped by the error of a gRPC check answered with a
// status other than SERVING.
var ErrNotServing = errors.New("health: not serving")

// GRPCCheck asks the endpoint's grpc.health.v1.Health service whether
// Service is SERVING; any other answer, or an RPC error (UNIMPLEMENTED,
// NOT_FOUND for an unknown service, UNAVAILABLE), fails the check. Each
// check makes its own connection to addr exactly (no name resolution
// beyond the dial) and closes it. The zero value checks the server as a
// whole over plaintext; safe for concurrent use.
type GRPCCheck struct {
	// Service is the service name asked about; "" means the whole server.
	Service string
	// Creds are the transport credentials; pass the traffic's, so the
	// check goes through the same TLS. Nil means plaintext.
	Creds credentials.TransportCredentials
}

// Check dials addr and calls Health.Check.
func (g GRPCCheck) Check(ctx context.Context, addr string) error {
	creds := g.Creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: g.Service})
	if err != nil {
		return err
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return &notServingError{status: s.String()}
	}
	return nil
}

type notServingError struct{ status string }

func (e *notServingError) Error() string { return "health: gRPC health status " + e.status }
func (e *notServingError) Unwrap() error { return ErrNotServing }
