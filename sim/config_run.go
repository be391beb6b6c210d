package sim

import (
	"math"
	"net/netip"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/loadgen"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/rng"
	"github.com/spillwayhq/spillway/shed"
)

// The events of `spillway sim config`, after the predictions' own kinds
// (at equal instants a backend's answer still comes first).
const (
	cfgArrive        predKind = iota + predSend + 1 // a new call
	cfgClientTimeout                                // a client attempt's timeout ran out
	cfgTryTimeout                                   // an upstream attempt's timeout ran out
	cfgResume                                       // a leaky-queue rate-limit wait ended
	cfgRetry                                        // the gateway's backoff before a retry ended
	cfgClientRetry                                  // the client's backoff before a retry ended
	cfgSample                                       // a second of the policies' state
	cfgCheck                                        // a cluster's active health checks
)

// configSim is one run of a ConfigModel.
type configSim struct {
	m  *ConfigModel
	ev *predEvents
	// Separate streams, so that one policy's draws do not move another's:
	// arrivals (gaps, class, client, route), service times, picks, and the
	// rest (errors, backoff jitter).
	arr, svc, pick, misc *rng.Mulberry32

	clusters map[string]*cfgCluster
	routes   []*cfgRoute
	client   *retry.Policy // the clients' retries; nil: none
	deadline float64       // a call's bound, retries included, seconds
	timeout  float64

	stepEnd []float64 // each step's end, seconds from the start
	step    int       // the step arrivals are now drawn in
	sending bool
	open    int // calls not yet ended

	tallies []*cfgTally
	series  cfgSeries
	checks  map[*predJob]*cfgCluster // the health-check events' tags
	gates   []*predGate              // the clusters' admissions, by cluster name
}

// cfgCall is one client call: its first attempt and its retries.
type cfgCall struct {
	sent     float64 // the first attempt's intended send
	step     int
	class    shed.Class
	name     string // the class's name in the tables
	route    *cfgRoute
	client   netip.AddrPort
	n        int     // attempts sent so far
	prev     float64 // the client's last backoff
	deadline float64 // absolute
}

// cfgReq is one client attempt on its way through the gateway.
type cfgReq struct {
	call     *cfgCall
	sent     float64
	answered bool // the gateway answered, or the client left
	gone     bool // the client left
	g        predJob
	rl       httplimit.Verdict
	rlWait   bool // in a leaky-queue rule's wait
	bulk     bool
	attempts int
	prev     float64
	tried    []string
	brk      breaker.Ticket
	brkOn    bool
	cur      *predJob // the upstream attempt in flight
	es       *balancer.EndpointState
}

// SimulateConfig runs m and returns the per-step results as package
// loadgen reports a run, and the policies' state second by second.
func SimulateConfig(m ConfigModel) (loadgen.Result, *ConfigSeries, error) {
	if err := m.check(); err != nil {
		return loadgen.Result{}, nil, err
	}
	s := &configSim{m: &m, ev: &predEvents{}, arr: rng.New(m.Seed), svc: rng.New(m.Seed ^ 0x5eed0001),
		pick: rng.New(m.Seed ^ 0x5eed0002), misc: rng.New(m.Seed ^ 0x5eed0003), timeout: m.Timeout.Seconds(),
		checks: map[*predJob]*cfgCluster{}}
	if err := s.build(); err != nil {
		return loadgen.Result{}, nil, err
	}
	if err := s.clientPolicy(); err != nil {
		return loadgen.Result{}, nil, err
	}
	s.start()
	for len(s.ev.h) > 0 && (s.sending || s.open > 0) {
		s.handle(s.ev.h.pop())
	}
	return s.result(), &s.series.out, nil
}

// clientPolicy builds the clients' retry policy as package loadgen does.
func (s *configSim) clientPolicy() error {
	c := s.m.Client
	s.deadline = s.timeout
	if c.Retry == loadgen.RetryNone {
		return nil
	}
	if c.Retries == 0 {
		c.Retries = 3
	}
	base, top := cmpOr(c.BackoffBase, 50*time.Millisecond), cmpOr(c.BackoffCap, time.Second)
	p := retry.Policy{MaxAttempts: 1 + c.Retries,
		Backoff: retry.Backoff{Base: base.Seconds(), Cap: top.Seconds(), Jitter: retry.FullJitter}}
	s.deadline = s.timeout * float64(1+c.Retries)
	if c.Retry == loadgen.RetryImmediate {
		p.Backoff = retry.Backoff{Base: math.SmallestNonzeroFloat64, Cap: math.SmallestNonzeroFloat64, Jitter: retry.NoJitter}
	} else {
		s.deadline += float64(c.Retries) * top.Seconds()
	}
	if c.Retry == loadgen.RetryBudget {
		b, err := retry.NewBudget(retry.BudgetConfig{Ratio: cmpOr(c.BudgetRatio, 0.1), MinPerSecond: c.BudgetMin})
		if err != nil {
			return usageErr("sim config: client retry budget: %v", err)
		}
		p.Budget = b
	}
	pol, err := retry.NewPolicy(p)
	if err != nil {
		return usageErr("sim config: client retries: %v", err)
	}
	s.client = pol
	return nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// start lays out the steps and schedules the first arrival, the samples
// and the health checks.
func (s *configSim) start() {
	at := 0.0
	for i, st := range s.m.Steps {
		at += st.Duration.Seconds()
		s.stepEnd = append(s.stepEnd, at)
		s.tallies = append(s.tallies, newCfgTally(i, st))
	}
	s.sending = true
	s.nextArrival(0)
	s.ev.push(1, cfgSample, nil)
	for _, name := range sortedClusterNames(s.clusters) {
		cl := s.clusters[name]
		if cl.gate != nil {
			s.gates = append(s.gates, cl.gate)
		}
		if cl.health != nil {
			j := &predJob{}
			s.checks[j] = cl
			s.ev.push(cl.health.interval, cfgCheck, j)
		}
	}
}

// nextArrival schedules the next call after t at the rate of its step
// (a step of rate r draws its gaps at r; a gap that crosses into the next
// step is drawn again from that step's start at its rate).
func (s *configSim) nextArrival(t float64) {
	for s.step < len(s.stepEnd) {
		next := t + s.arr.Exp(1/s.m.Steps[s.step].Rate)
		if next < s.stepEnd[s.step] {
			s.ev.push(next, cfgArrive, nil)
			return
		}
		t = s.stepEnd[s.step]
		s.step++
	}
	s.sending = false
}

func (s *configSim) handle(e predEvent) {
	switch e.kind {
	case predFinish:
		s.finish(e)
	case predExpire:
		s.expire(e)
	case cfgArrive:
		s.arrive(e.at)
	case cfgClientTimeout:
		s.clientTimeout(e.job.req, e.at)
	case cfgTryTimeout:
		if r := e.job.req; r.cur == e.job && !r.answered {
			s.upstreamDone(r, e.at, 0)
		}
	case cfgResume:
		if r := e.job.req; !r.answered {
			r.rlWait = false
			s.afterRateLimit(r, e.at)
		}
	case cfgRetry:
		if r := e.job.req; !r.answered {
			s.attempt(r, e.at)
		}
	case cfgClientRetry:
		s.send(e.job.req.call, e.at)
	case cfgSample:
		s.sample(e.at)
	case cfgCheck:
		s.check(s.checks[e.job], e.job, e.at)
	}
	s.drainGates(e.at)
}

// drainGates hands on the requests the admission queues have settled.
func (s *configSim) drainGates(now float64) {
	for _, g := range s.gates {
		for j := g.take(); j != nil; j = g.take() {
			switch r := j.req; {
			case r.answered:
				g.done(j, now, limit.Ignore)
			case j.why == limit.Admitted:
				s.admitted(r, now)
			default:
				s.refuseAdmit(r, now, j.why)
			}
		}
	}
}

// expire is a queued waiter's max wait running out.
func (s *configSim) expire(e predEvent) {
	for _, cl := range s.clusters {
		if cl.gate == nil {
			continue
		}
		if _, ok := cl.gate.jobs[e.w]; !ok {
			continue
		}
		if j := cl.gate.giveUp(e.w, e.at, limit.ReasonExpired); j != nil {
			s.refuseAdmit(j.req, e.at, limit.ReasonExpired)
		}
		return
	}
}

// arrive starts a new call at t: its class, client and route drawn, then
// the next arrival.
func (s *configSim) arrive(t float64) {
	c := &cfgCall{sent: t, step: s.step, deadline: t + s.deadline}
	c.route = s.routes[0]
	if len(s.routes) > 1 {
		c.route = s.routes[int(s.arr.Float64()*float64(len(s.routes)))%len(s.routes)]
	}
	c.class, c.name = c.route.class, c.route.class.String()
	if len(s.m.Classes) > 0 {
		u, acc := s.arr.Float64(), 0.0
		for _, cl := range s.m.Classes {
			if acc += cl.Share; u < acc {
				if k, ok := shed.ParseClass(cl.Name); ok && c.route.r.Policies.ClassHeader {
					c.class, c.name = k, k.String()
				}
				break
			}
		}
	}
	n := int(s.arr.Float64()*float64(s.m.Clients)) % s.m.Clients
	c.client = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}), 40000)
	s.open++
	s.tallies[c.step].offer(c.name)
	if s.client != nil {
		s.client.RecordRequest(t)
	}
	s.send(c, t)
	s.nextArrival(t)
}

// send sends one attempt of call c at now.
func (s *configSim) send(c *cfgCall, now float64) {
	c.n++
	r := &cfgReq{call: c, sent: now}
	r.g = predJob{sent: now, class: c.class, req: r}
	s.tallyAt(now).Attempts++
	s.series.count(now).attempts++
	s.ev.push(min(now+s.timeout, c.deadline), cfgClientTimeout, &r.g)
	s.gateway(r, now)
}
