package balancerhttp

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/health"
)

// DefaultOutlierTick is Config.OutlierTick when left 0: the Detector's Tick
// runs at most once a second, as health.Detector.Tick suggests.
const DefaultOutlierTick = 1.0

// ErrNoEndpoints is returned by RoundTrip when the Set has no eligible
// endpoint (none at all, or all draining, or all out of service with panic
// mode off); nothing was sent. errors.Is(err, balancer.ErrNoEndpoints) holds
// for it. An http.Client wraps it in a *url.Error; client.Transport's
// DefaultRetryable retries it like any transport error.
var ErrNoEndpoints error = &noEndpointsError{}

type noEndpointsError struct{}

func (*noEndpointsError) Error() string { return "balancerhttp: " + balancer.ErrNoEndpoints.Error() }

// Unwrap returns balancer.ErrNoEndpoints.
func (*noEndpointsError) Unwrap() error { return balancer.ErrNoEndpoints }

// Config configures a Transport. Only Set is required.
type Config struct {
	// Set holds the endpoints requests are spread over; required. Keep it
	// current with Follow (discovery), HealthCallback (active checks),
	// Set.Drain, and Outlier below.
	Set *balancer.Set
	// Picker chooses among the snapshot's eligible endpoints; nil means
	// &balancer.LeastRequest{}: the power of two choices over requests in
	// flight (Envoy's least request, weighted as Envoy weights it when
	// weights differ). A picker with a Validate method is validated by New.
	Picker balancer.SetPicker
	// Hash, when not nil, turns on consistent hashing: a request for which
	// Hash.Key yields a key goes to the endpoint Table maps it to, among
	// the snapshot's eligible endpoints; a request without a key goes to
	// Picker.
	Hash *balancer.HashPolicy
	// Table builds the hash table, *balancer.RingConfig or
	// *balancer.MaglevConfig; nil means &balancer.MaglevConfig{} (65,537
	// entries). Used only with Hash. A table is built once per snapshot
	// membership, on the first request that needs it (list the same builder
	// in balancer.SetConfig.Tables to build it when the snapshot is
	// published instead); its answers must be snapshot indices
	// (balancer.HashTable).
	Table balancer.TableBuilder
	// Transport sends the rewritten requests; nil means
	// http.DefaultTransport.
	Transport http.RoundTripper
	// Scheme is the URL scheme used to reach the endpoints, "http" or
	// "https"; "" means "http". The caller's URL scheme is replaced.
	Scheme string
	// Clock gives the instants fed to the Set, the endpoints' latency
	// estimates and the Detector; nil means clock.NewReal(). Use one clock
	// for everything that feeds one Set (Follow, HealthCallback).
	Clock clock.Clock
	// Outlier, when not nil, is passive health checking: every answer is
	// recorded (health.HTTPResult of its status; a transport error or
	// timeout as health.GatewayFailure; a request the caller cancelled is
	// not recorded) and an ejection is applied at once with Set.Eject.
	// RoundTrip also runs Outlier.Tick at most once per OutlierTick and
	// ends the Set ejections of the endpoints it returns (the Set ends an
	// ejection by itself at its deadline; the Tick resumes the Detector's
	// counting). Give it the Set's addresses with SetHosts (Follow does).
	Outlier *health.Detector
	// OutlierTick is the least time in seconds between two Outlier.Tick
	// calls; 0 means DefaultOutlierTick. Must be finite and not negative.
	OutlierTick float64
}

// Transport is an http.RoundTripper that balances requests over the
// endpoints of a balancer.Set. The caller's URL host names the service (it
// is kept as the Host header); the endpoint's address replaces it on the
// wire. Safe for concurrent use; RoundTrip takes no lock shared with other
// requests, except briefly to apply an ejection or run an outlier tick.
type Transport struct {
	set       *balancer.Set
	picker    balancer.SetPicker
	hash      *balancer.HashPolicy
	table     balancer.TableBuilder
	next      http.RoundTripper
	scheme    string
	clk       clock.Clock
	outlier   *health.Detector
	tickEvery float64
	nextTick  atomic.Uint64 // float64 bits: the instant before which no Tick runs
}

// New returns a Transport, or a *balancer.ConfigError (wrapping
// balancer.ErrConfig) naming the first bad field of cfg.
func New(cfg Config) (*Transport, error) {
	if cfg.Set == nil {
		return nil, &balancer.ConfigError{Field: "balancerhttp.Config.Set", Reason: "must not be nil"}
	}
	switch cfg.Scheme {
	case "":
		cfg.Scheme = "http"
	case "http", "https":
	default:
		return nil, &balancer.ConfigError{Field: "balancerhttp.Config.Scheme", Reason: `must be "http" or "https" ("" means "http"), got ` + strconv.Quote(cfg.Scheme)}
	}
	if !(cfg.OutlierTick >= 0) || math.IsInf(cfg.OutlierTick, 1) {
		return nil, &balancer.ConfigError{Field: "balancerhttp.Config.OutlierTick", Reason: "must be a finite number of seconds ≥ 0, got " + strconv.FormatFloat(cfg.OutlierTick, 'g', -1, 64)}
	}
	if cfg.Picker == nil {
		cfg.Picker = &balancer.LeastRequest{}
	}
	if v, ok := cfg.Picker.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	if cfg.Hash != nil {
		if cfg.Table == nil {
			cfg.Table = &balancer.MaglevConfig{}
		}
		// An empty build checks the builder's configuration (table sizes)
		// and the kind of table it makes.
		v, err := cfg.Table.BuildTable([]string{}, []int{})
		if err != nil {
			return nil, err
		}
		if _, ok := v.(balancer.HashTable); !ok {
			return nil, &balancer.ConfigError{Field: "balancerhttp.Config.Table", Reason: "must build a balancer.HashTable"}
		}
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.NewReal()
	}
	if cfg.OutlierTick == 0 {
		cfg.OutlierTick = DefaultOutlierTick
	}
	return &Transport{
		set: cfg.Set, picker: cfg.Picker, hash: cfg.Hash, table: cfg.Table, next: cfg.Transport,
		scheme: cfg.Scheme, clk: cfg.Clock, outlier: cfg.Outlier, tickEvery: cfg.OutlierTick,
	}, nil
}

// RoundTrip sends req to an endpoint of the Set. It does not modify req: it
// sends a shallow copy whose URL scheme is Config.Scheme and whose URL host
// is the endpoint's address, with the Host header req.Host (req.URL.Host
// when req.Host is empty). The request counts as in flight on the endpoint
// until the response body is closed or read to its end (at once on an
// error, or for a 101 Switching Protocols answer, whose body is the
// connection). The response's Request field is req, the caller's request.
//
// It returns ErrNoEndpoints when nothing is eligible, the picker's or the
// hash table's error if they fail (a misconfiguration), and the inner
// transport's error as it is; the request body is closed in every case, as
// http.RoundTripper requires.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errNilURL
	}
	now := t.clk.Now()
	if t.outlier != nil {
		t.tick(now)
	}
	snap := t.set.Current(now)
	i, err := t.pick(snap, req, now)
	tried := balancer.TriedFrom(req.Context())
	if err == nil && tried != nil && tried.Has(snap.Endpoint(i).Addr()) && snap.Len() > tried.Len() {
		// A retry or hedge of a call that already used this endpoint: pick
		// again a few times for one it has not tried (a fast-failing
		// endpoint looks the emptiest to a least-request picker).
		for k := 0; k < 3 && tried.Has(snap.Endpoint(i).Addr()); k++ {
			j, err2 := t.picker.Pick(snap, now)
			if err2 == nil && j >= 0 && j < snap.Len() && !tried.Has(snap.Endpoint(j).Addr()) {
				i = j
			}
		}
		if tried.Has(snap.Endpoint(i).Addr()) {
			// Every draw was tried already (a dead endpoint winning each,
			// or one hash key's endpoint): the least loaded untried one.
			i = leastUntried(snap, tried, i)
		}
	}
	if err != nil {
		closeBody(req)
		if errors.Is(err, balancer.ErrNoEndpoints) {
			err = ErrNoEndpoints
		}
		return nil, err
	}
	ep := snap.Endpoint(i)
	ep.Start()
	if tried != nil {
		tried.Add(ep.Addr())
	}

	c := &call{ep: ep, start: now, req: *req, url: *req.URL}
	c.url.Scheme, c.url.Host = t.scheme, ep.Addr()
	c.req.URL = &c.url
	if c.req.Host == "" {
		c.req.Host = req.URL.Host
	}
	resp, err := t.next.RoundTrip(&c.req)
	if err == nil && resp == nil {
		err = errNilResponse
	}
	end := t.clk.Now()
	c.end = end
	if err != nil {
		cancelled := errors.Is(req.Context().Err(), context.Canceled)
		if cancelled {
			ep.Done(end, -1, false) // the caller gave up: no latency sample
		} else {
			ep.Done(end, end-now, false)
			t.record(end, ep.Addr(), health.GatewayFailure)
		}
		return nil, err
	}
	result := health.HTTPResult(resp.StatusCode)
	if t.outlier != nil {
		t.record(end, ep.Addr(), result)
	}
	c.ok = result == health.Success
	resp.Request = req
	if resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		c.finish()
		return resp, nil
	}
	c.body = resp.Body
	resp.Body = &c.wrap
	c.wrap.c = c
	return resp, nil
}

// AvoidsTried reports that the Transport reads balancer.Tried from the
// request's context: client.Transport then records a call's endpoints so
// that its retries and hedges go to endpoints it has not tried.
func (t *Transport) AvoidsTried() bool { return true }

var (
	errNilURL      = errors.New("balancerhttp: request URL is nil")
	errNilResponse = errors.New("balancerhttp: inner transport returned neither a response nor an error")
)

// pick returns the index in snap of the endpoint for req.
func (t *Transport) pick(snap *balancer.Snapshot, req *http.Request, now float64) (int, error) {
	if t.hash != nil && snap.Len() > 0 {
		if key, ok := t.hash.Key(req); ok {
			v, err := snap.Table(t.table)
			if err != nil {
				return -1, err
			}
			var i int
			switch tb := v.(type) {
			case *balancer.Maglev:
				i = tb.Lookup(key)
			case *balancer.Ring:
				i = tb.Lookup(key)
			default:
				i = v.(balancer.HashTable).Lookup(key) // checked by New
			}
			if i >= 0 && i < snap.Len() {
				return i, nil
			}
		}
	}
	i, err := t.picker.Pick(snap, now)
	if err == nil && (i < 0 || i >= snap.Len()) {
		return -1, errors.New("balancerhttp: picker returned index " + strconv.Itoa(i) + " out of range")
	}
	return i, err
}

// record feeds one result to the Detector and applies its ejection.
func (t *Transport) record(now float64, addr string, r health.Result) {
	if t.outlier == nil {
		return
	}
	if e := t.outlier.Record(now, addr, r); e.Ejected() {
		t.set.Eject(now, addr, e.Until)
	}
}

// tick runs the Detector's Tick when its time has come, one caller at a
// time: the caller that advances the next-tick instant runs it.
func (t *Transport) tick(now float64) {
	bits := t.nextTick.Load()
	if now < math.Float64frombits(bits) {
		return
	}
	if !t.nextTick.CompareAndSwap(bits, math.Float64bits(now+t.tickEvery)) {
		return
	}
	for _, addr := range t.outlier.Tick(now) {
		t.set.Uneject(now, addr)
	}
}

// CloseIdleConnections closes the idle connections of the inner transport,
// if it has such a method (http.Client.CloseIdleConnections calls this).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// closeBody closes req's body, if any.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// call is one request's state: the rewritten request, its URL and the body
// wrapper, in one allocation.
type call struct {
	req        http.Request
	url        url.URL
	wrap       doneBody
	body       io.ReadCloser // the inner response body
	ep         *balancer.EndpointState
	done       atomic.Bool
	ok         bool
	start, end float64
}

// finish counts the request done on its endpoint, once.
func (c *call) finish() {
	if c.done.CompareAndSwap(false, true) {
		c.ep.Done(c.end, c.end-c.start, c.ok)
	}
}

// doneBody is the response body handed to the caller: it ends the request's
// in-flight count when closed or read to its end (or to an error).
type doneBody struct {
	c *call
}

// Read reads from the inner body; an error (io.EOF included) finishes the
// request.
func (b *doneBody) Read(p []byte) (int, error) {
	n, err := b.c.body.Read(p)
	if err != nil {
		b.c.finish()
	}
	return n, err
}

// Close closes the inner body and finishes the request.
func (b *doneBody) Close() error {
	err := b.c.body.Close()
	b.c.finish()
	return err
}

// leastUntried returns the index of the endpoint of snap with the fewest
// requests in flight among those tried has not seen, or i when it has
// seen them all.
func leastUntried(snap *balancer.Snapshot, tried *balancer.Tried, i int) int {
	best := -1
	for j := 0; j < snap.Len(); j++ {
		if !tried.Has(snap.Endpoint(j).Addr()) && (best < 0 || snap.Load(j) < snap.Load(best)) {
			best = j
		}
	}
	if best < 0 {
		return i
	}
	return best
}
