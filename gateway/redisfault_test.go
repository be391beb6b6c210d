package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/internal/faultproxy"
	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/request"
)

// The Redis fault test's limits. The rules' limits are far above the
// load, so a healthy Redis admits everything; floor_factor 0.1 makes each
// fail-open rule's floor a tenth of it, below the load, so the floor is
// seen to bind while Redis is away.
const (
	faultTimeout  = 50 * time.Millisecond  // ratelimit.redis.timeout
	faultRecovery = 500 * time.Millisecond // ratelimit.redis.breaker.recovery
	floorRate     = 40.0                   // open-ip's floor: rate 400/s × floor_factor 0.1
	floorBurst    = 40                     // and its burst: ⌈400 × 0.1⌉
)

const faultConfig = `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
ratelimit:
  store: redis
  floor_factor: 0.1
  redis: {addresses: ["%s"], timeout: 50ms, breaker: {threshold: 3, recovery: 500ms}}
routes:
  - name: api
    cluster: app
    policies:
      retry: {attempts: 1}
      ratelimit:
        rules:
          - {id: closed-pay, key: [ip], rate: 1000, per: 1s, match: {paths: [/pay]}, failMode: closed}
          - {id: open-ip, key: [ip], rate: 400, per: 1s}
          - {id: open-user, key: [user], rate: 2000, per: 1s}
clusters: [{name: app, endpoints: ["%s"]}]
`

// The fault test's phases, in order.
const (
	phaseHealthy   = iota // Redis answers
	phaseBlackHole        // the proxy to Redis black-holes
	phaseKilled           // redis-server killed (the proxy still black-holes)
	phaseBack             // Redis restarted, the proxy passes again
	numPhases
)

var phaseNames = [numPhases]string{"healthy", "black-holed", "killed", "back"}

// TestRedisBlackHoledThenKilled: the gateway's rate limits on a Redis of
// the test's own, reached through an in-process fault proxy, under steady
// open-loop HTTP load (300 req/s, half GET /api/x matching two fail-open
// rules, from 127.0.0.1; half GET /pay from 127.0.0.2 matching those and
// a fail-closed rule: three Redis rules in one request). Phase 1 healthy;
// phase 2 the proxy black-holes (every call waits the store timeout until
// the breaker opens); phase 3 redis-server is killed as well (calls fail
// at once); phase 4 Redis restarts and the proxy passes. Checked:
//
//   - while Redis is away, the fail-open rules serve within their floor:
//     the /api/x requests admitted are at most the floor's GCRA bound
//     (burst + rate × span) and at least half its rate × span; the
//     fail-closed rule serves no /pay request and answers 503 with its
//     reason ratelimit-unavailable:closed-pay; no 500 (nor any status but
//     200, 429 and 503) ever, no transport error;
//   - the longest decision ≤ store timeout + 5 ms, over ≥ 10,000
//     decisions. Decisions are timed by calling the route's own
//     httplimit.Limiter.Check directly (4 goroutines, other client keys,
//     the same three rules), beside the HTTP load, which alone would be
//     too few in 20 s; the HTTP requests' decisions are not timed;
//   - from 2 × the breaker's open time after Redis returns, ≥ 99% of the
//     rules' decisions are made on Redis (the stores' own counters:
//     decided by Redis against decided by the fail mode), and ≥ 99% of the
//     HTTP requests served, as in the healthy phase.
//
// The phases start once the load has run for 500 ms with every decision
// on Redis (at most 5 s; settle). The timing checks allow for the machine: a stallMeter measures how late
// a goroutine that only sleeps wakes up. A decision's bound is widened by
// the stalls measured while it ran; the 99% checks and the counts (≥
// 10,000 decisions, ≥ 200 requests) are enforced only when no stall
// reached the store timeout in their window (a machine that stops this
// process for longer than the timeout makes a healthy Redis look dead to
// any client; the test logs the figures then). The floor, fail-closed and
// status checks hold whatever the machine does.
func TestRedisBlackHoledThenKilled(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr())
	be := startBackendFunc(t, func(http.ResponseWriter, *http.Request) {})
	g := start(t, fmt.Sprintf(faultConfig, px.Addr(), be))
	lims := g.cur.Load().pol.limits
	reg := prometheus.NewRegistry()
	reg.MustRegister(lims.stores.Collector())

	var phase atomic.Int32
	stalls := startStallMeter()
	stalls.watchRedis(px.Addr(), func() bool { p := phase.Load(); return p == phaseHealthy || p == phaseBack })
	pr := startProbe(lims.of("api"), g.clk.Now, &phase, stalls)
	load := startFaultLoad(t, "http://"+g.Addr("web"), 300, stalls.began)
	settle(t, reg, 5*time.Second)
	var marks [numPhases + 1]time.Duration // phase starts, and the end
	var counts [numPhases + 1]storeTotals
	next := func(p int32, d time.Duration) {
		counts[p], marks[p] = storeCounts(t, reg), load.since()
		phase.Store(p)
		time.Sleep(d)
	}
	next(phaseHealthy, 2*time.Second)
	px.BlackHole()
	next(phaseBlackHole, 3*time.Second)
	srv.Kill()
	next(phaseKilled, 2500*time.Millisecond)
	srv.Restart()
	px.Pass()
	phase.Store(phaseBack)
	marks[phaseBack] = load.since()
	time.Sleep(2 * faultRecovery)
	from, fromAt := storeCounts(t, reg), load.since()
	time.Sleep(2 * time.Second)
	counts[numPhases], marks[numPhases] = storeCounts(t, reg), load.since()
	load.Stop()
	pr.Stop()
	stalls.Stop()

	t.Logf("stalls of a sleeping goroutine: %s; PINGs to Redis at or over the store timeout while it was reachable: %d", stalls, stalls.redisSlow())
	healthy := counts[phaseBlackHole].minus(counts[phaseHealthy])
	after := counts[numPhases].minus(from)
	// A store that fell back on its fail mode while Redis was up and
	// reachable saw Redis answer past the timeout: the machine starved
	// redis-server, which the stall meter (in this process) cannot see.
	load.check(t, marks, stalls, healthy.failMode, after.failMode)
	pr.check(t, stalls, marks[numPhases])
	t.Logf("decisions on Redis / by the fail mode: healthy %.0f / %.0f; from %v after Redis returned %.0f / %.0f; over the run %.0f with a breaker open",
		healthy.decided, healthy.failMode, 2*faultRecovery, after.decided, after.failMode, counts[numPhases].breakerOpen)
	if after.decided+after.failMode < 1000 {
		stalls.enforceRedis(t, fromAt, marks[numPhases], "from 2 × breaker open time after Redis returned: %.0f decisions, want ≥ 1000", after.decided+after.failMode)
	}
	if after.decided < 0.99*(after.decided+after.failMode) {
		stalls.enforceRedis(t, fromAt, marks[numPhases], "from 2 × breaker open time after Redis returned: %.0f decisions on Redis, %.0f by the fail mode; want ≥ 99%% on Redis",
			after.decided, after.failMode)
	}
	if counts[numPhases].breakerOpen == 0 {
		t.Errorf("no decision was made with a breaker open: the store breaker never opened")
	}
}

// settle waits, at most limit, until the load has run for 500 ms with
// every decision made on Redis: the healthy phase starts from a warm
// gateway (connections open, breakers closed), not from its first
// decisions.
func settle(t *testing.T, reg *prometheus.Registry, limit time.Duration) {
	t.Helper()
	began := time.Now()
	last, lastAt := storeCounts(t, reg), time.Now()
	for time.Since(began) < limit {
		time.Sleep(100 * time.Millisecond)
		now := storeCounts(t, reg)
		if d := now.minus(last); d.failMode > 0 || d.decided == 0 {
			last, lastAt = now, time.Now()
		} else if time.Since(lastAt) >= 500*time.Millisecond {
			t.Logf("settled after %v", time.Since(began).Round(time.Millisecond))
			return
		}
	}
	t.Logf("not settled after %v: decisions still go to the fail mode", limit)
}

// storeTotals are the rules' store counters summed over the rules.
type storeTotals struct{ decided, failMode, breakerOpen float64 }

func (a storeTotals) minus(b storeTotals) storeTotals {
	return storeTotals{a.decided - b.decided, a.failMode - b.failMode, a.breakerOpen - b.breakerOpen}
}

// storeCounts reads the Redis stores' counters from reg.
func storeCounts(t *testing.T, reg *prometheus.Registry) storeTotals {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var s storeTotals
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			v := m.GetCounter().GetValue()
			switch mf.GetName() {
			case "spillway_ratelimit_redis_decisions_total":
				if labels["outcome"] == "decided" {
					s.decided += v
				}
			case "spillway_ratelimit_redis_fail_mode_decisions_total":
				s.failMode += v
				if labels["cause"] == "breaker_open" {
					s.breakerOpen += v
				}
			}
		}
	}
	return s
}

// probe calls a route's Limiter.Check directly from 4 goroutines, each
// open loop at 400 calls per second (a late goroutine catches up) with
// its own client address (127.0.0.10+i) and user, alternating /pay (three
// rules) and /api/x (two), and times each call.
type probe struct {
	lim   *httplimit.Limiter
	now   func() float64
	phase *atomic.Int32
	stop  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	took   []time.Duration // every decision's time
	stalls *stallMeter
	slow   []slowDecision            // the decisions over the bound
	counts [numPhases]map[string]int // by phase: "path status reason"
}

// slowDecision is a decision over store timeout + 5 ms: when it began
// (on the stall meter's time), how long it took, and what it was.
type slowDecision struct {
	at, took time.Duration
	what     string
}

func startProbe(lim *httplimit.Limiter, now func() float64, phase *atomic.Int32, stalls *stallMeter) *probe {
	p := &probe{lim: lim, now: now, phase: phase, stalls: stalls, stop: make(chan struct{})}
	for i := range p.counts {
		p.counts[i] = map[string]int{}
	}
	for i := range 4 {
		p.wg.Add(1)
		go p.run(i)
	}
	return p
}

func (p *probe) run(i int) {
	defer p.wg.Done()
	client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)}), 40000)
	hdr := &probeHeader{user: fmt.Sprintf("probe-%d", i)}
	views := [2]request.View{
		{Method: "GET", Host: "gw", Path: "/pay", Major: 1, Minor: 1, Client: client, Header: hdr},
		{Method: "GET", Host: "gw", Path: "/api/x", Major: 1, Minor: 1, Client: client, Header: hdr},
	}
	var vd httplimit.Verdict
	took := make([]time.Duration, 0, 8192)
	counts := [numPhases]map[string]int{}
	began := time.Now()
	for n := 0; ; n++ {
		select {
		case <-p.stop:
			p.merge(took, &counts)
			return
		default:
		}
		if due := int(time.Since(began).Seconds() * 400); n >= due {
			time.Sleep(time.Millisecond)
			n--
			continue
		}
		ph, v := p.phase.Load(), &views[n%2]
		t0 := time.Now()
		p.lim.Check(context.Background(), p.now(), v, "api", &vd)
		d := time.Since(t0)
		took = append(took, d)
		if d > faultTimeout+5*time.Millisecond {
			p.mu.Lock()
			p.slow = append(p.slow, slowDecision{t0.Sub(p.stalls.began), d, fmt.Sprintf("%s: %s %d %s", phaseNames[ph], v.Path, vd.Status, vd.Reason)})
			p.mu.Unlock()
		}
		if counts[ph] == nil {
			counts[ph] = map[string]int{}
		}
		counts[ph][fmt.Sprintf("%s %d %s", v.Path, vd.Status, vd.Reason)]++
	}
}

func (p *probe) merge(took []time.Duration, counts *[numPhases]map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.took = append(p.took, took...)
	for ph := range counts {
		for k, n := range counts[ph] {
			p.counts[ph][k] += n
		}
	}
}

// Stop stops the goroutines and waits for them.
func (p *probe) Stop() {
	close(p.stop)
	p.wg.Wait()
}

// check fails t unless ≥ 10,000 decisions were timed (by the end, when
// the machine let the probes run), none longer than the store timeout +
// 5 ms + the stalls of a sleeping goroutine while it ran (stallMeter), and
// the fail-closed rule refused every /pay decision while Redis was away.
func (p *probe) check(t *testing.T, stalls *stallMeter, end time.Duration) {
	t.Helper()
	slices.Sort(p.took)
	n := len(p.took)
	if n == 0 {
		t.Fatal("no decision timed")
	}
	q := func(f float64) time.Duration { return p.took[int(f*float64(n-1))] }
	t.Logf("direct Check decisions: %d; p50 %v, p99 %v, p99.9 %v, max %v", n, q(0.5), q(0.99), q(0.999), p.took[n-1])
	for ph := range p.counts {
		t.Logf("direct Check, %s: %v", phaseNames[ph], p.counts[ph])
	}
	if n < 10000 {
		stalls.enforce(t, 0, end, "%d decisions timed, want ≥ 10,000", n)
	}
	bound := faultTimeout + 5*time.Millisecond
	if len(p.slow) > 0 {
		t.Logf("%d of %d decisions over store timeout %v + 5ms", len(p.slow), n, faultTimeout)
	}
	var bad []string
	for _, s := range p.slow {
		if allow := stalls.sumIn(s.at, s.at+s.took); s.took > bound+allow {
			bad = append(bad, fmt.Sprintf("%v at %v (%s), stalls meanwhile %v", s.took, s.at.Round(time.Millisecond), s.what, allow))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d decisions longer than store timeout %v + 5ms + the stalls of a sleeping goroutine meanwhile; the first: %q",
			len(bad), faultTimeout, bad[:min(len(bad), 5)])
	}
	for _, ph := range []int{phaseBlackHole, phaseKilled} {
		for k, c := range p.counts[ph] {
			if strings.HasPrefix(k, "/pay ") && !strings.HasPrefix(k, "/pay 503 ratelimit-unavailable:closed-pay") &&
				!strings.HasPrefix(k, "/pay 429 ratelimit:open-") {
				t.Errorf("direct Check, %s: %d × %q; want a /pay decision refused (503 by closed-pay, or 429 by an open rule's floor)",
					phaseNames[ph], c, k)
			}
		}
	}
}

// atMost returns how many of the sorted durations are at most d.
func atMost(sorted []time.Duration, d time.Duration) int {
	i, _ := slices.BinarySearch(sorted, d+1)
	return i
}

// probeHeader is a request.Header of one field, X-User-Id.
type probeHeader struct{ user string }

func (h *probeHeader) Get(name string) (string, bool) {
	if strings.EqualFold(name, "X-User-Id") {
		return h.user, true
	}
	return "", false
}

func (h *probeHeader) Values(name string, fn func(string) bool) {
	if v, ok := h.Get(name); ok {
		fn(v)
	}
}
