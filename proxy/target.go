package proxy

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/shed"
	"github.com/spillwayhq/spillway/upstream"
)

// Router maps a request to its route. The gateway implements it over a
// route.Table built for one generation.
type Router interface {
	Route(v *request.View) (*Route, bool)
}

// Route is one compiled route: where its requests go and how they are
// forwarded. Built once per generation, read concurrently, never changed.
type Route struct {
	Name    string
	Cluster *Cluster

	// ResponseHeaderTimeout bounds the wait from the end of the request to
	// the upstream's response head; RequestTimeout the whole exchange. On a
	// Streaming route IdleTimeout replaces RequestTimeout: the exchange
	// lives while bytes move. Zero means none.
	ResponseHeaderTimeout time.Duration
	RequestTimeout        time.Duration
	IdleTimeout           time.Duration
	Streaming             bool

	// Header changes, applied after the gateway's own fields: names in
	// Remove are dropped (lowercase), then Add is appended.
	RequestAdd     []Field
	RequestRemove  []string
	ResponseAdd    []Field
	ResponseRemove []string

	// RewritePrefix, when Prefix is set, replaces a matched path prefix.
	Prefix, RewritePrefix string

	// MaxBodyBytes bounds the request body (0: unlimited): a larger
	// Content-Length is refused with 413 before any upstream work, a
	// chunked body that grows past it is cut and answered 413.
	MaxBodyBytes int64

	// AccessLog says which requests of the route get an access log line
	// (slog, Info): none (LogOff, the default: counting, not logging, is
	// the per-request default), every one (LogFull), or a share
	// AccessSample of them drawn at random (LogSampled).
	AccessLog    LogMode
	AccessSample float64

	// Observer, when set, sees every request of the route (metrics).
	Observer Observer

	// Live counts the requests (upgraded connections included) in flight
	// on the route's generation: the gateway shares one counter among a
	// generation's routes and retires the generation when it reaches 0
	// after a reload. Nil: not counted.
	Live *atomic.Int64

	// Policy, when set, is the route's overload policy chain: deadline,
	// rate limits, admission, retries, breaker (package chain). Nil: the
	// bare proxy.
	Policy *chain.Chain
	// Fallback, when set, takes the requests the cluster's breaker turns
	// away (its fallback cluster).
	Fallback *Cluster
	// ReplayBytes bounds the request body kept for a retry (0: a request
	// with a body is never retried): a longer body is sent once.
	ReplayBytes int64
	// GRPC routes answer the chain's refusals to gRPC requests as gRPC
	// statuses (trailers-only, with grpc-retry-pushback-ms).
	GRPC bool

	// Upgrades lists the Upgrade tokens forwarded (lowercase, e.g.
	// "websocket"); any other Upgrade request is refused with 400, and so
	// is h2c even when listed (the h2c upgrade is never honoured).
	Upgrades []string
}

// LogMode says which requests are logged.
type LogMode uint8

const (
	LogOff LogMode = iota
	LogFull
	LogSampled
)

// Observer counts a route's requests; the gateway's metrics implement it
// with label children resolved once per generation. Its methods run on
// the request path: they must not allocate, block or log.
type Observer interface {
	// Begin reports that a request of the route started.
	Begin()
	// End reports how it ended (e's fields).
	End(e Ending)
}

// Ending is how one request ended, as its route's Observer hears it.
type Ending struct {
	// Status is what the client got (499 when it went away first).
	Status int
	// FromUpstream says the answer is the upstream's, not the gateway's
	// own.
	FromUpstream bool
	// Seconds is the time from the request's head to the end of its
	// answer.
	Seconds float64
	// Reason is the reason code of the gateway's own answer: one of a
	// fixed set ("deadline", "admit:limit", "breaker-open",
	// "no-healthy-endpoint", "upstream-reset", "client-gone", …) or a
	// rate-limit rule's ("ratelimit:<rule id>"); "" for the upstream's.
	Reason string
	// Class is the request's class as the route's policy chain gave it;
	// Classed is false when no chain ran (no policies, or the request was
	// answered before them).
	Class   shed.Class
	Classed bool
}

// ClusterObserver counts a cluster's upstream failures.
type ClusterObserver interface {
	// UpstreamError reports an exchange with endpoint addr that failed
	// in the upstream (kind: connect refused, timeout, reset, …).
	UpstreamError(addr string, kind upstream.Kind)
}

// Field is a header field the configuration adds (validated by config).
type Field struct{ Name, Value string }

// Cluster is one compiled upstream cluster.
type Cluster struct {
	Name   string
	Set    *balancer.Set
	Picker balancer.SetPicker

	// Pools holds one upstream.Pool per endpoint address; the gateway
	// replaces the map when endpoints change (copy on write).
	Pools atomic.Pointer[map[string]*upstream.Pool]

	// H2 is set for clusters spoken to in HTTP/2 (h2 or h2c): requests go
	// through it instead of the HTTP/1.1 pools.
	H2 http.RoundTripper

	// Hash, when set, sends requests with the same key to the same
	// endpoint through Table (a ring hash or Maglev builder listed in the
	// Set's config); requests without a key go to Picker.
	Hash  *balancer.HashPolicy
	Table balancer.TableBuilder

	// Outlier, when set, ejects endpoints that fail real requests.
	Outlier *Outlier

	// Observer, when set, sees the cluster's upstream failures (metrics).
	Observer ClusterObserver

	// Pre-built refusals naming the cluster.
	noEndpoint, refused, timeout, reset, badResponse, poolFull *Problem
}

// Init builds the cluster's refusals; call it once after setting Name.
func (c *Cluster) Init() {
	c.noEndpoint = NewProblem(http.StatusServiceUnavailable, "no-healthy-endpoint", "no healthy endpoint in the cluster", c.Name)
	c.refused = NewProblem(http.StatusBadGateway, "upstream-refused", "the upstream refused the connection", c.Name)
	c.timeout = NewProblem(http.StatusGatewayTimeout, "upstream-timeout", "the upstream did not answer in time", c.Name)
	c.reset = NewProblem(http.StatusBadGateway, "upstream-reset", "the upstream closed the connection before a complete response", c.Name)
	c.badResponse = NewProblem(http.StatusBadGateway, "upstream-bad-response", "the upstream sent a malformed response", c.Name)
	c.poolFull = NewProblem(http.StatusBadGateway, "upstream-pool-full", "every connection to the upstream is busy", c.Name)
}

// pool returns the endpoint's pool, or nil when it has none (an endpoint
// removed between the pick and the lookup).
func (c *Cluster) pool(addr string) *upstream.Pool {
	m := c.Pools.Load()
	if m == nil {
		return nil
	}
	return (*m)[addr]
}

// problemFor maps an upstream error to the cluster's pre-built answer. A
// cancelled exchange whose client is still there was cut by a timeout.
func (c *Cluster) problemFor(err error) *Problem {
	kind := upstream.KindReset
	if ue, ok := err.(*upstream.Error); ok {
		kind = ue.Kind
	} else if k, ok := failureKind(err, false); ok {
		kind = k // an HTTP/2 transport's error
	}
	switch kind {
	case upstream.KindRefused:
		return c.refused
	case upstream.KindTimeout, upstream.KindCanceled:
		return c.timeout
	case upstream.KindBadResponse:
		return c.badResponse
	case upstream.KindPoolFull:
		return c.poolFull
	default:
		return c.reset
	}
}
