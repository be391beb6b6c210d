package gateway

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	service "github.com/spillwayhq/spillway/backend"
	"github.com/spillwayhq/spillway/deadline"
)

// The overload test's numbers: the backend's hidden capacity is
// ovWorkers / ovService = 100 requests a second, offered twice that for
// ovWarm + ovMeasure, by class (critical, sheddable, and sheddable from
// a trusted peer naming tight budgets).
const (
	ovWorkers   = 10
	ovService   = 100 * time.Millisecond
	ovLoad      = 2.0
	ovDeadline  = time.Second
	ovWarm      = 2 * time.Second
	ovMeasure   = 8 * time.Second
	ovClientTTL = 2 * time.Second // client timeout: past the deadline, so the gateway answers first
)

// ovCapacity is the backend's capacity in requests a second.
const ovCapacity = float64(ovWorkers) / (float64(ovService) / float64(time.Second))

// The classes of the overload test's requests (recorder's indexes), their
// share of the load, and the budgets the trusted peer names in turn.
const (
	ovCrit, ovShed, ovTight = 0, 1, 2
)

var (
	ovShares  = [3]float64{0.3, 0.6, 0.1}
	ovBudgets = []string{"0n", "20m", "50m", "100m", "200m", "600m"}
)

// TestOverloadTwiceCapacity: a backend of hidden capacity behind the
// gateway with adaptive admission (gradient2, the default algorithm, with
// a FIFO queue), classes by route and a 1 s deadline, offered twice its
// capacity open loop: 30% critical, 60% sheddable, 10% sheddable from a
// trusted peer naming budgets of 0 to 600 ms. After a warm-up: goodput
// (200s within the deadline) ≥ 80% of capacity, ≥ 95% of critical
// requests served, sheddable ones refused with admit:* codes (deadline for
// tight budgets, some of which run out in the queue), and no request
// reaches the backend with its budget spent: each arrives with a
// forwarded Spillway-Timeout in (0, 1 s], and within the trusted peer's
// budget when it named one. (Backend Stats.Late, work
// finished past its budget, is reported, not bounded: a budget below the
// service time is spent at work, which the gateway cannot foresee.)
func TestOverloadTwiceCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("an overload run of about 10 s")
	}
	noLeaks(t)
	b, arr, g := overloadGateway(t)
	rec := &recorder{t0: time.Now()}
	var turn atomic.Int64
	tight := func() string { return ovBudgets[int(turn.Add(1))%len(ovBudgets)] }
	loads := []*loadGen{
		startLoad("http://"+g.Addr("web")+"/critical/x", ovLoad*ovCapacity*ovShares[ovCrit], nil, rec.client(t, ovCrit, nil)),
		startLoad("http://"+g.Addr("web")+"/sheddable/x", ovLoad*ovCapacity*ovShares[ovShed], nil, rec.client(t, ovShed, nil)),
		startLoad("http://"+g.Addr("inner")+"/sheddable/x", ovLoad*ovCapacity*ovShares[ovTight], nil, rec.client(t, ovTight, tight)),
	}
	smp := sample(g, "app", b, ovWarm, ovWarm+ovMeasure)
	for _, l := range loads {
		l.Stop()
	}
	f := rec.figures(ovWarm, ovWarm+ovMeasure)
	st := b.Stats()
	f.log(t, st, arr, loads, smp)
	f.check(t)
	if n := arr.none.Load() + arr.spent.Load() + arr.over.Load(); n != 0 || arr.n.Load() != st.Arrived {
		t.Errorf("backend: %d of %d requests arrived without a budget in (0, 1s] within the one named (%d checked)", n, st.Arrived, arr.n.Load())
	}
	all := rec.figures(0, ovWarm+ovMeasure+ovClientTTL)
	t.Logf("whole run, warm-up included: not 200 %v %v %v, transport errors %d", all.reasons[0], all.reasons[1], all.reasons[2], all.errs)
}

// log reports the overload run's figures.
func (f *figures) log(t *testing.T, st service.Stats, arr *arrivalChecks, loads []*loadGen, smp samples) {
	t.Helper()
	t.Logf("goodput %.1f%% of capacity (%.1f/s of %.0f/s); served: critical %.2f%% (%d of %d), sheddable %.1f%% (%d of %d), tight budgets %.1f%% (%d of %d)",
		100*f.goodput/ovCapacity, f.goodput, ovCapacity, 100*f.ratio(ovCrit), f.ok[ovCrit], f.total[ovCrit],
		100*f.ratio(ovShed), f.ok[ovShed], f.total[ovShed], 100*f.ratio(ovTight), f.ok[ovTight], f.total[ovTight])
	t.Logf("not 200, by status and reason: critical %v, sheddable %v, tight budgets %v; transport errors %d", f.reasons[0], f.reasons[1], f.reasons[2], f.errs)
	t.Logf("backend: arrived %d, served %d, late %d, rejected %d, max in flight %d, by class %v; budgets on arrival: none %d, spent %d, over 1s or the named one %d; oldest arrival %v after the client sent it",
		st.Arrived, st.Served, st.Late, st.Rejected, st.MaxInFlight, st.ByHeader, arr.none.Load(), arr.spent.Load(), arr.over.Load(), time.Duration(arr.maxAge.Load()))
	for i, l := range loads {
		t.Logf("load %d: sent %d, skipped (in-flight cap) %d", i, l.sent.Load(), l.skipped.Load())
	}
	t.Logf("after the warm-up, every 100 ms: %v", smp)
}

// overloadGateway starts the overload test's backend and a gateway in
// front of it, with an untrusted listener (web) and a trusted one (inner).
func overloadGateway(t *testing.T) (*service.Backend, *arrivalChecks, *Gateway) {
	b, addr, arr := stampedBackend(t, service.Config{Workers: ovWorkers, Queue: 64,
		Service: service.Dist{Kind: service.Constant, Mean: ovService}, CountHeader: "Spillway-Criticality"})
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: web, address: "127.0.0.1:0"}
  - {name: inner, address: "127.0.0.1:0", trusted_proxies: ["127.0.0.1/32"]}
routes:
  - {match: {prefix: /critical}, cluster: app, policies: {class: critical, deadline: {default: 1s}}}
  - {match: {prefix: /sheddable}, cluster: app, policies: {class: sheddable, deadline: {default: 1s}}}
clusters:
  - name: app
    endpoints: ["`+addr+`"]
    admission:
      algorithm: gradient2
      initial_limit: 20
      min_limit: 4
      max_limit: 200
      shares: {critical: 1, default: 0.9, sheddable: 0.5}
      queue: {discipline: fifo, max_wait: 250ms}
`)
	return b, arr, g
}

// samples are readings taken every 100 ms after the warm-up: the
// cluster's adaptive limit (sorted) and the backend's requests at work.
type samples struct {
	limits []int
	busy   int           // sum of the backend's InFlight readings
	stall  time.Duration // the longest a 100 ms sleep overslept: the test process not running
}

// sample reads them from warm to end after now.
func sample(g *Gateway, cluster string, b *service.Backend, warm, end time.Duration) samples {
	began := time.Now()
	gate := g.cur.Load().pol.guards[cluster].v.Gate
	var s samples
	for time.Since(began) < end {
		t0 := time.Now()
		time.Sleep(100 * time.Millisecond)
		s.stall = max(s.stall, time.Since(t0)-100*time.Millisecond)
		if time.Since(began) >= warm {
			s.limits = append(s.limits, gate.Limiter().Limit())
			s.busy += b.Stats().InFlight
		}
	}
	slices.Sort(s.limits)
	return s
}

// String summarises the samples.
func (s samples) String() string {
	n := len(s.limits)
	if n == 0 {
		return "no samples"
	}
	return fmt.Sprintf("adaptive limit min %d, median %d, max %d; backend workers busy %.1f%% of the readings; longest stall of the test process %v",
		s.limits[0], s.limits[n/2], s.limits[n-1], 100*float64(s.busy)/float64(n*ovWorkers), s.stall.Round(time.Millisecond))
}

// check fails the test unless the figures meet the overload test's
// bounds.
func (f *figures) check(t *testing.T) {
	t.Helper()
	if f.goodput < 0.8*ovCapacity {
		t.Errorf("goodput %.1f/s, want at least 80%% of the capacity %.0f/s", f.goodput, ovCapacity)
	}
	if r := f.ratio(ovCrit); r < 0.95 {
		t.Errorf("critical served %.3f, want at least 0.95", r)
	}
	refused := 0
	for reason, n := range f.reasons[ovShed] {
		if !strings.HasPrefix(reason, "503 admit:") {
			t.Errorf("sheddable: %d answers %q, want only 503 admit:* refusals", n, reason)
		}
		refused += n
	}
	if min := f.total[ovShed] / 4; refused < min {
		t.Errorf("sheddable refused %d of %d, want at least %d at twice the capacity", refused, f.total[ovShed], min)
	}
	for reason, n := range f.reasons[ovTight] {
		if !strings.HasPrefix(reason, "503 admit:") && reason != "503 deadline" && reason != "504 upstream-timeout" {
			t.Errorf("tight budgets: %d answers %q, want only 503 admit:* or deadline refusals (or 504 upstream-timeout: a budget spent at work)", n, reason)
		}
	}
	if n, spent := f.reasons[ovTight]["503 deadline"], f.total[ovTight]/len(ovBudgets); n < spent {
		t.Errorf("tight budgets: %d refused deadline, want at least the %d that came spent", n, spent)
	}
	if f.errs != 0 {
		t.Errorf("%d transport errors (client timeout %v), want none: the gateway answers every request within its deadline", f.errs, ovClientTTL)
	}
}

// arrivalChecks counts, at each request's arrival at the backend, the
// budget the gateway forwarded: none, spent (≤ 0), or over the route's
// deadline or the budget the trusted peer named (X-Named-Budget); and the
// request's age since the client sent it (X-Sent-At).
type arrivalChecks struct {
	n, none, spent, over atomic.Int64
	maxAge               atomic.Int64 // nanoseconds
}

func (a *arrivalChecks) check(r *http.Request, now time.Time) {
	a.n.Add(1)
	if v := r.Header.Get("Spillway-Timeout"); v == "" {
		a.none.Add(1)
	} else if d, err := deadline.ParseTimeout(v); err != nil || d <= 0 {
		a.spent.Add(1)
	} else if named, err := deadline.ParseTimeout(r.Header.Get("X-Named-Budget")); d > ovDeadline || err == nil && d > named {
		a.over.Add(1)
	}
	if sent, err := strconv.ParseInt(r.Header.Get("X-Sent-At"), 10, 64); err == nil {
		age := now.UnixNano() - sent
		for old := a.maxAge.Load(); age > old && !a.maxAge.CompareAndSwap(old, age); old = a.maxAge.Load() {
		}
	}
}

// stampedBackend starts a backend.Backend from cfg on a loopback port;
// its requests are checked on arrival (health checks aside).
func stampedBackend(t *testing.T, cfg service.Config) (*service.Backend, string, *arrivalChecks) {
	t.Helper()
	b, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	arr := new(arrivalChecks)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			arr.check(r, time.Now())
		}
		b.ServeHTTP(w, r)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { b.Close(); _ = srv.Close(); <-done })
	return b, ln.Addr().String(), arr
}

// result is one request as the client saw it.
type result struct {
	class      int
	start, end time.Duration // since the recorder's t0
	status     int           // 0: a transport error
	reason     string        // Spillway-Reason
}

// recorder records each answer its clients get, for figures per class
// over a window.
type recorder struct {
	t0  time.Time
	mu  sync.Mutex
	res []result
}

// recordingRT stamps X-Sent-At (and Spillway-Timeout, from budget) on
// each request and records its answer.
type recordingRT struct {
	rec    *recorder
	class  int
	budget func() string
	base   http.RoundTripper
}

func (rt recordingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r := rt.rec
	began := time.Now()
	req = req.Clone(req.Context())
	req.Header.Set("X-Sent-At", strconv.FormatInt(began.UnixNano(), 10))
	if rt.budget != nil {
		b := rt.budget()
		req.Header.Set("Spillway-Timeout", b)
		req.Header.Set("X-Named-Budget", b) // not a control field: forwarded as it is
	}
	resp, err := rt.base.RoundTrip(req)
	res := result{class: rt.class, start: began.Sub(r.t0), end: time.Since(r.t0)}
	if err == nil {
		res.status, res.reason = resp.StatusCode, resp.Header.Get("Spillway-Reason")
	}
	r.mu.Lock()
	r.res = append(r.res, res)
	r.mu.Unlock()
	return resp, err
}

// client is an HTTP/1.1 keep-alive client recording as class.
func (r *recorder) client(t *testing.T, class int, budget func() string) *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	tr := &http.Transport{Protocols: p, MaxIdleConnsPerHost: maxInFlight}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: recordingRT{rec: r, class: class, budget: budget, base: tr}, Timeout: ovClientTTL}
}

// figures are the recorder's counts over a window.
type figures struct {
	goodput   float64 // 200s within the deadline ended in the window, per second
	ok, total [3]int  // by class, of the requests started in the window
	reasons   [3]map[string]int
	errs      int
}

func (f *figures) ratio(class int) float64 {
	if f.total[class] == 0 {
		return 0
	}
	return float64(f.ok[class]) / float64(f.total[class])
}

// figures counts the answers of the window [from, to) after t0.
func (r *recorder) figures(from, to time.Duration) figures {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := figures{reasons: [3]map[string]int{{}, {}, {}}}
	good := 0
	for _, x := range r.res {
		fine := x.status == http.StatusOK && x.end-x.start <= ovDeadline
		if fine && x.end >= from && x.end < to {
			good++
		}
		if x.start < from || x.start >= to {
			continue
		}
		f.total[x.class]++
		switch {
		case fine:
			f.ok[x.class]++
		case x.status == 0:
			f.errs++
		default:
			f.reasons[x.class][fmt.Sprintf("%d %s", x.status, x.reason)]++
		}
	}
	f.goodput = float64(good) / (to - from).Seconds()
	return f
}

// TestSpoofedCriticality: under admission pressure (one sheddable request
// holding sheddable's whole share), Spillway-Criticality: critical from an
// untrusted peer changes nothing — refused as the route's sheddable, never
// reaching the backend — while from a trusted peer it sets the class: the
// request passes and the backend sees critical. The trusted peer without
// the header is the route's sheddable again.
func TestSpoofedCriticality(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	var seen seenList
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.Path + "=" + r.Header.Get("Spillway-Criticality"))
		if r.URL.Path == "/hold" {
			<-release
		}
	})
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: edge, address: "127.0.0.1:0"}
  - {name: inner, address: "127.0.0.1:0", trusted_proxies: ["127.0.0.1/32"]}
routes: [{cluster: app, policies: {class: sheddable}}]
clusters:
  - name: app
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 2, shares: {critical: 1, default: 1, sheddable: 0.5}}
`)
	c := h1Client(t)
	done := holdSheddable(t, c, "http://"+g.Addr("edge")+"/hold", &seen)
	crit := http.Header{"Spillway-Criticality": {"critical"}}
	if code, h, _ := fetch(t, c, "GET", "http://"+g.Addr("edge")+"/spoofed", crit); code != 503 || h.Get("Spillway-Reason") != "admit:limit" {
		t.Errorf("untrusted peer claiming critical: %d %v, want 503 admit:limit", code, h)
	}
	if code, h, _ := fetch(t, c, "GET", "http://"+g.Addr("inner")+"/plain", nil); code != 503 || h.Get("Spillway-Reason") != "admit:limit" {
		t.Errorf("trusted peer without a class: %d %v, want 503 admit:limit", code, h)
	}
	if code, _, _ := fetch(t, c, "GET", "http://"+g.Addr("inner")+"/trusted", crit); code != 200 {
		t.Errorf("trusted peer claiming critical: %d, want 200", code)
	}
	close(release)
	if code := <-done; code != 200 {
		t.Fatalf("held request: %d", code)
	}
	if l := seen.list(); !slices.Equal(l, []string{"/hold=sheddable", "/trusted=critical"}) {
		t.Fatalf("backend saw %q, want the held sheddable request and the trusted critical one only", l)
	}
}
