package gateway

import (
	"context"
	"fmt"
	"net"
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
//   - healthy phases: every request served;
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
//     decided by Redis against decided by the fail mode).
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
	pr := startProbe(lims.of("api"), g.clk.Now, &phase)
	load := startFaultLoad(t, "http://"+g.Addr("web"), 300)
	var marks [numPhases + 1]time.Duration // phase starts, and the end
	next := func(p int32, d time.Duration) {
		marks[p] = load.since()
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
	from := storeCounts(t, reg)
	time.Sleep(2 * time.Second)
	to := storeCounts(t, reg)
	marks[numPhases] = load.since()
	load.Stop()
	pr.Stop()

	load.check(t, marks)
	pr.check(t)
	onRedis, failMode := to.decided-from.decided, to.failMode-from.failMode
	t.Logf("from %v after Redis returned: %.0f decisions on Redis, %.0f by the fail mode; over the run %.0f with the breaker open",
		2*faultRecovery, onRedis, failMode, to.breakerOpen)
	if onRedis+failMode < 1000 || onRedis < 0.99*(onRedis+failMode) {
		t.Errorf("from 2 × breaker open time after Redis returned: %.0f decisions on Redis, %.0f by the fail mode; want ≥ 1000 decisions, ≥ 99%% on Redis",
			onRedis, failMode)
	}
	if to.breakerOpen == 0 {
		t.Errorf("no decision was made with a breaker open: the store breaker never opened")
	}
}

// storeTotals are the rules' store counters summed over the rules.
type storeTotals struct{ decided, failMode, breakerOpen float64 }

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
// about every 2 ms with its own client address (127.0.0.10+i) and user,
// alternating /pay (three rules) and /api/x (two), and times each call.
type probe struct {
	lim   *httplimit.Limiter
	now   func() float64
	phase *atomic.Int32
	stop  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	took   []time.Duration           // every decision's time
	slow   []string                  // the decisions over the bound: when, and what
	counts [numPhases]map[string]int // by phase: "path status reason"
}

func startProbe(lim *httplimit.Limiter, now func() float64, phase *atomic.Int32) *probe {
	p := &probe{lim: lim, now: now, phase: phase, stop: make(chan struct{})}
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
	for n := 0; ; n++ {
		select {
		case <-p.stop:
			p.merge(took, &counts)
			return
		default:
		}
		ph, v := p.phase.Load(), &views[n%2]
		t0 := time.Now()
		p.lim.Check(context.Background(), p.now(), v, "api", &vd)
		d := time.Since(t0)
		took = append(took, d)
		if d > faultTimeout+5*time.Millisecond {
			p.mu.Lock()
			p.slow = append(p.slow, fmt.Sprintf("%v in %s at %.3f: %s %d %s", d, phaseNames[ph], p.now(), v.Path, vd.Status, vd.Reason))
			p.mu.Unlock()
		}
		if counts[ph] == nil {
			counts[ph] = map[string]int{}
		}
		counts[ph][fmt.Sprintf("%s %d %s", v.Path, vd.Status, vd.Reason)]++
		time.Sleep(2 * time.Millisecond)
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

// check fails t unless ≥ 10,000 decisions were timed, none longer than the
// store timeout + 5 ms, and the fail-closed rule refused every /pay
// decision while Redis was away.
func (p *probe) check(t *testing.T) {
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
		t.Errorf("%d decisions timed, want ≥ 10,000", n)
	}
	if max := p.took[n-1]; max > faultTimeout+5*time.Millisecond {
		over := n - atMost(p.took, faultTimeout+5*time.Millisecond)
		t.Errorf("longest decision %v (%d of %d over), want ≤ store timeout %v + 5ms; the first over: %q", max, over, n, faultTimeout, p.slow[:min(len(p.slow), 10)])
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

// faultShot is one HTTP request of faultLoad: when it was sent and
// answered (since the load began) and the answer.
type faultShot struct {
	sent, done time.Duration
	pay        bool
	status     int
	reason     string
	err        string
}

// faultLoad sends GET requests open loop at rate per second, alternating
// /api/x from 127.0.0.1 and /pay from 127.0.0.2 (each with a user of its
// own), at
// most 100 in flight (a request due while they are all busy is skipped
// and counted), and records every answer.
type faultLoad struct {
	base     string
	rate     float64
	api, pay *http.Client
	began    time.Time
	stop     chan struct{}
	wg       sync.WaitGroup
	skipped  atomic.Int64

	mu    sync.Mutex
	shots []faultShot
}

func startFaultLoad(t *testing.T, base string, rate float64) *faultLoad {
	l := &faultLoad{base: base, rate: rate, api: h1Client(t), pay: fromClient(t, "127.0.0.2"),
		began: time.Now(), stop: make(chan struct{})}
	l.wg.Add(1)
	go l.run()
	return l
}

// fromClient is an HTTP/1.1 client whose connections come from local
// address ip (a loopback address).
func fromClient(t *testing.T, ip string) *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{Protocols: p, MaxIdleConnsPerHost: 128, DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (l *faultLoad) since() time.Duration { return time.Since(l.began) }

func (l *faultLoad) run() {
	defer l.wg.Done()
	sem := make(chan struct{}, 100)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for issued := int64(0); ; {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		for due := int64(l.since().Seconds() * l.rate); issued < due; issued++ {
			select {
			case sem <- struct{}{}:
			default:
				l.skipped.Add(1)
				continue
			}
			l.wg.Add(1)
			go func(pay bool) {
				defer l.wg.Done()
				defer func() { <-sem }()
				l.one(pay)
			}(issued%2 == 1)
		}
	}
}

func (l *faultLoad) one(pay bool) {
	s := faultShot{sent: l.since(), pay: pay}
	c, path := l.api, "/api/x"
	if pay {
		c, path = l.pay, "/pay"
	}
	req, _ := http.NewRequest("GET", l.base+path, nil)
	req.Header.Set("X-User-Id", "load"+path) // 150/s each: under open-user's floor
	resp, err := c.Do(req)
	if err == nil {
		s.status, s.reason = resp.StatusCode, resp.Header.Get("Spillway-Reason")
		resp.Body.Close()
	} else {
		s.err = err.Error()
	}
	s.done = l.since()
	l.mu.Lock()
	l.shots = append(l.shots, s)
	l.mu.Unlock()
}

// Stop stops sending and waits for the requests in flight.
func (l *faultLoad) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// check fails t unless the answers are as TestRedisBlackHoledThenKilled
// says, marks being the phases' starts and the load's end.
func (l *faultLoad) check(t *testing.T, marks [numPhases + 1]time.Duration) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var byPhase [numPhases]map[string]int
	for i := range byPhase {
		byPhase[i] = map[string]int{}
	}
	out, back := marks[phaseBlackHole], marks[phaseBack]
	var apiOK, late, lateOK int
	for _, s := range l.shots {
		ph := phaseHealthy
		for p := range numPhases {
			if s.sent >= marks[p] {
				ph = p
			}
		}
		path := "/api/x"
		if s.pay {
			path = "/pay"
		}
		byPhase[ph][fmt.Sprintf("%s %d %s", path, s.status, s.reason)]++
		if msg := badAnswer(s); msg != "" {
			t.Errorf("%s, %s sent at %v: %s", phaseNames[ph], path, s.sent, msg)
			continue
		}
		switch {
		case ph == phaseHealthy && s.done < out && s.status != 200:
			t.Errorf("healthy, %s sent at %v: %d %s; want 200", path, s.sent, s.status, s.reason)
		case s.sent >= out && s.done < back && s.pay && s.status == 200:
			t.Errorf("%s, /pay sent at %v: 200; the fail-closed rule must refuse while Redis is away", phaseNames[ph], s.sent)
		case s.sent >= out && s.done < back && s.status == 200:
			apiOK++
		case s.sent >= back+2*faultRecovery:
			late++
			if s.status == 200 {
				lateOK++
			}
		}
	}
	for ph := range byPhase {
		t.Logf("HTTP, %s (from %v): %v", phaseNames[ph], marks[ph].Round(time.Millisecond), byPhase[ph])
	}
	t.Logf("HTTP: %d requests, %d skipped (100 in flight)", len(l.shots), l.skipped.Load())
	span := (back - out).Seconds()
	bound := float64(floorBurst) + floorRate*span
	t.Logf("/api/x served while Redis was away (%.2f s): %d; the floor's bound %.0f", span, apiOK, bound)
	if float64(apiOK) > bound || float64(apiOK) < floorRate*span/2 {
		t.Errorf("/api/x served while Redis was away: %d, want from %.0f (half the floor's rate) to the floor's bound %.0f",
			apiOK, floorRate*span/2, bound)
	}
	for _, ph := range []int{phaseBlackHole, phaseKilled} {
		if byPhase[ph]["/pay 503 ratelimit-unavailable:closed-pay"] == 0 {
			t.Errorf("%s: no 503 ratelimit-unavailable:closed-pay", phaseNames[ph])
		}
	}
	if late < 200 || float64(lateOK) < 0.99*float64(late) {
		t.Errorf("from 2 × breaker open time after Redis returned: %d of %d served, want ≥ 99%% of ≥ 200", lateOK, late)
	}
}

// badAnswer says what is wrong with s's answer whatever the phase: a
// transport error, a status other than 200, 429 and 503, or a refusal
// without its rule's reason code.
func badAnswer(s faultShot) string {
	switch {
	case s.err != "":
		return "transport error: " + s.err
	case s.status == 503 && (!s.pay || s.reason != "ratelimit-unavailable:closed-pay"):
		return fmt.Sprintf("503 %q; want only /pay refused 503, by ratelimit-unavailable:closed-pay", s.reason)
	case s.status == 429 && !strings.HasPrefix(s.reason, "ratelimit:open-"):
		return fmt.Sprintf("429 %q; want an open rule's reason", s.reason)
	case s.status != 200 && s.status != 429 && s.status != 503:
		return fmt.Sprintf("status %d %q", s.status, s.reason)
	}
	return ""
}
