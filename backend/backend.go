// Package backend is a test service with a set capacity: the server that
// Spillway's fault tests, load lab and demo stand behind the gateway, and
// the library part of `spillway backend`.
//
// A Backend works on at most Workers requests at once. Each holds its
// worker for a service time drawn from a distribution (constant,
// exponential or log-normal, from a seeded generator) times the cost of its
// path, and waits on a timer meanwhile, not on the CPU, so it behaves the
// same on a busy machine. Requests beyond the workers wait in a bounded
// FIFO queue; beyond that they are refused with 503.
//
// By default it models a server that keeps working on a request whose
// client has given up (seed 000's wasted-work loop): such a request is
// served anyway, and counted as served too late, as is one that finished
// after its Spillway-Timeout budget ran out. With HonorCancel a request
// whose client leaves stops, in the queue or at work, and frees its place.
//
// Failures are injected per request, drawn from the same generator: an
// error share answered at once with 503 (or 500), a hang share that never
// answers until the client leaves, and a slow-down factor on every service
// time. A capacity schedule changes the number of workers for windows of
// time after the start (a capacity dip), and a health endpoint answers 200,
// or 503 while SetHealthy(false). Every setting a test changes while the
// backend runs has a setter safe for concurrent use; Stats reports what the
// backend did, including how many requests carried each value of one
// header (Spillway-Criticality, say), so a test can check what never
// reached it.
//
// Real time enters through a clock.Clock: the schedule is relative to the
// clock's reading at New, and lateness is judged by it. Service times are
// waited on real timers.
package backend

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/spillwayhq/spillway/clock"
)

// Kind is a service-time distribution.
type Kind int

// The distributions of Dist.
const (
	Constant    Kind = iota // every request takes Mean
	Exponential             // exponential with mean Mean
	LogNormal               // log-normal with mean Mean and shape Sigma
)

func (k Kind) String() string {
	switch k {
	case Constant:
		return "constant"
	case Exponential:
		return "exponential"
	case LogNormal:
		return "lognormal"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Dist is the service time of a request of cost 1.
type Dist struct {
	Kind Kind
	// Mean is the mean service time; it must be positive.
	Mean time.Duration
	// Sigma is LogNormal's shape: the standard deviation of the service
	// time's logarithm (0.5 gives p99 ≈ 2.8 × the median). The location is
	// chosen so that the mean is Mean.
	Sigma float64
}

// Window sets the number of workers from From to To after the start (From
// included, To not): a capacity dip, or a rise. Windows are looked up in
// order; the first that holds the time wins. The backend sets no timer for
// a window's edges: a rise starts queued requests at the next arrival or
// completion.
type Window struct {
	From, To time.Duration
	Workers  int // 0: no request is started while the window lasts
}

// Config describes a Backend. Only Workers and Service.Mean are required.
type Config struct {
	// Name, when set, is sent in every response's Backend-Name header, so a
	// test behind a balancer can tell which endpoint answered.
	Name string
	// Workers is the capacity: requests worked on at once (at least 1).
	Workers int
	// Queue is how many requests may wait, first in first out, for a
	// worker; more are refused with 503. 0: none waits.
	Queue int
	// Service is the service-time distribution of a cost-1 request.
	Service Dist
	// Costs maps a request path to the factor on its service time; other
	// paths cost 1.
	Costs map[string]float64
	// ErrorRate is the share of requests answered at once with
	// ErrorStatus, without taking a worker.
	ErrorRate float64
	// ErrorStatus is the injected errors' status: 503 (the default) or
	// any other 5xx, such as 500.
	ErrorStatus int
	// HangRate is the share of requests (health checks included) that
	// never answer: they hold no worker and end when the client leaves.
	HangRate float64
	// SlowDown multiplies every service time; 0 means 1.
	SlowDown float64
	// Schedule changes the workers for windows of time after the start.
	Schedule []Window
	// HonorCancel stops a request whose client has gone, in the queue or
	// at work. Off (the default), it is served anyway and counted late.
	HonorCancel bool
	// HealthPath is the health endpoint's path; default "/healthz".
	HealthPath string
	// CountHeader names a header whose values Stats counts (requests by
	// value, "" for requests without it), such as shed.ClassHeader.
	CountHeader string
	// Clock is where time comes from; default clock.NewReal().
	Clock clock.Clock
	// Seed seeds the generator of service times and failures.
	Seed uint64
}

// ErrConfig wraps every error New returns.
var ErrConfig = errors.New("backend: invalid config")

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// check returns what is wrong with c, or nil.
func (c *Config) check() error {
	switch {
	case c.Workers < 1:
		return bad("workers %d, want at least 1", c.Workers)
	case c.Queue < 0:
		return bad("queue %d, want 0 or more", c.Queue)
	case c.Service.Mean <= 0:
		return bad("service mean %v, want more than 0", c.Service.Mean)
	case c.Service.Kind < Constant || c.Service.Kind > LogNormal:
		return bad("unknown service distribution %v", c.Service.Kind)
	case !(c.Service.Sigma >= 0 && c.Service.Sigma <= 10):
		return bad("sigma %v, want 0 to 10", c.Service.Sigma)
	case c.ErrorStatus != 0 && (c.ErrorStatus < 500 || c.ErrorStatus > 599):
		return bad("error status %d, want a 5xx", c.ErrorStatus)
	case !(c.SlowDown >= 0) || math.IsInf(c.SlowDown, 0):
		return bad("slow-down %v, want a finite factor, 0 or more", c.SlowDown)
	}
	if err := checkShares(c.ErrorRate, c.HangRate); err != nil {
		return err
	}
	for path, cost := range c.Costs {
		if !(cost > 0) || math.IsInf(cost, 0) {
			return bad("cost %v of path %q, want a finite factor above 0", cost, path)
		}
	}
	for i, w := range c.Schedule {
		if w.From < 0 || w.To <= w.From || w.Workers < 0 {
			return bad("schedule window %d: from %v to %v with %d workers, want 0 ≤ from < to and workers ≥ 0",
				i, w.From, w.To, w.Workers)
		}
	}
	return nil
}

func checkShares(errorRate, hangRate float64) error {
	if !(errorRate >= 0 && hangRate >= 0 && errorRate+hangRate <= 1) {
		return bad("error rate %v and hang rate %v, want shares of 0 to 1 that add up to at most 1", errorRate, hangRate)
	}
	return nil
}

// Backend is the test service; New makes one. It is an http.Handler.
type Backend struct {
	clock       clock.Clock
	start       float64
	name        []string // the Backend-Name header's value, nil when unnamed
	dist        Dist
	costs       map[string]float64
	schedule    []Window
	queueMax    int
	errStatus   int
	honor       bool
	healthPath  string
	countHeader string

	done      chan struct{} // closed by Close
	closeOnce sync.Once

	mu        sync.Mutex
	rng       *rand.Rand
	workers   int // outside the schedule's windows
	errorRate float64
	hangRate  float64
	slowDown  float64
	healthy   bool
	queue     []*waiter // FIFO; entries whose request left stay until popped
	stats     Stats
}

// New checks cfg and returns a Backend whose schedule starts now.
func New(cfg Config) (*Backend, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	b := &Backend{clock: cfg.Clock, dist: cfg.Service, schedule: append([]Window(nil), cfg.Schedule...),
		queueMax: cfg.Queue, errStatus: cfg.ErrorStatus, honor: cfg.HonorCancel, healthPath: cfg.HealthPath,
		countHeader: cfg.CountHeader, done: make(chan struct{}),
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), workers: cfg.Workers,
		errorRate: cfg.ErrorRate, hangRate: cfg.HangRate, slowDown: cfg.SlowDown, healthy: true}
	if b.clock == nil {
		b.clock = clock.NewReal()
	}
	if b.errStatus == 0 {
		b.errStatus = 503
	}
	if b.slowDown == 0 {
		b.slowDown = 1
	}
	if b.healthPath == "" {
		b.healthPath = "/healthz"
	}
	if cfg.Name != "" {
		b.name = []string{cfg.Name}
	}
	b.costs = make(map[string]float64, len(cfg.Costs))
	for p, c := range cfg.Costs {
		b.costs[p] = c
	}
	if b.countHeader != "" {
		b.stats.ByHeader = make(map[string]int64)
	}
	b.start = b.clock.Now()
	return b, nil
}

// Close ends every request the backend holds, queued, at work or hanging,
// at once (they are answered 503), and refuses later ones with 503. Call
// it before closing the server in front, whose Close waits for handlers.
func (b *Backend) Close() { b.closeOnce.Do(func() { close(b.done) }) }
