package admit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/deadline"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

func newLimiter(t testing.TB, n int, cfg limit.LimiterConfig) *limit.Limiter {
	t.Helper()
	f, err := limit.NewFixed(n)
	if err != nil {
		t.Fatal(err)
	}
	l, err := limit.NewLimiter(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newGate(t testing.TB, cfg admit.Config) *admit.Gate {
	t.Helper()
	g, err := admit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// blocker is a handler that holds each request until released, and counts
// calls.
type blocker struct {
	mu      sync.Mutex
	calls   int
	entered chan struct{}
	release chan struct{}
	seen    []shed.Class
}

func newBlocker() *blocker {
	return &blocker{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (b *blocker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, _ := shed.ClassFrom(r.Context())
	b.mu.Lock()
	b.calls++
	b.seen = append(b.seen, c)
	b.mu.Unlock()
	b.entered <- struct{}{}
	<-b.release
	w.WriteHeader(http.StatusNoContent)
}

func (b *blocker) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

type problem struct {
	Type, Title, Detail, Reason string
	Status                      int
}

// get sends a GET with headers to url and returns status, headers and the
// decoded problem body (if any).
func get(t *testing.T, url string, hdr map[string]string) (int, http.Header, problem) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Error(err)
		return 0, nil, problem{}
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, problem{}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var p problem
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("problem body %q: %v", body, err)
		}
	}
	return resp.StatusCode, resp.Header, p
}

func TestAdmittedRequestSeesClassDeadlineAndBrownout(t *testing.T) {
	dim, err := brownout.New(brownout.Config{TargetP99: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t, admit.Config{Limiter: newLimiter(t, 4, limit.LimiterConfig{}), Dimmer: dim})
	var class shed.Class
	var hasDeadline, optional bool
	var left time.Duration
	srv := httptest.NewServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		class, _ = shed.ClassFrom(r.Context())
		var dl time.Time
		dl, hasDeadline = r.Context().Deadline()
		left = time.Until(dl)
		optional = brownout.OptionalFrom(r.Context())
		_, _ = io.WriteString(w, "ok")
	}), admit.HTTPOptions{}))
	defer srv.Close()

	status, _, _ := get(t, srv.URL, map[string]string{shed.ClassHeader: "sheddable", deadline.HTTPHeader: "30S"})
	if status != 200 || class != shed.Sheddable || !hasDeadline || !optional {
		t.Fatalf("status %d class %v deadline %v optional %v; want 200, sheddable, a deadline, optional work on", status, class, hasDeadline, optional)
	}
	if left <= 0 || left > 30*time.Second {
		t.Fatalf("time left %v, want within (0, 30s]", left)
	}
	status, _, _ = get(t, srv.URL, nil)
	if status != 200 || class != shed.Default || hasDeadline {
		t.Fatalf("no headers: status %d class %v deadline %v; want the default class and no deadline", status, class, hasDeadline)
	}
}

func TestRefusalAtLimit(t *testing.T) {
	l := newLimiter(t, 1, limit.LimiterConfig{Shares: oneShare})
	g := newGate(t, admit.Config{Limiter: l, ProblemBase: "https://errors.example/"})
	b := newBlocker()
	srv := httptest.NewServer(g.Handler(b, admit.HTTPOptions{}))
	defer srv.Close()

	done := make(chan int)
	go func() {
		s, _, _ := get(t, srv.URL, map[string]string{shed.ClassHeader: "critical"})
		done <- s
	}()
	<-b.entered
	status, h, p := get(t, srv.URL, map[string]string{shed.ClassHeader: "critical"})
	if status != http.StatusServiceUnavailable || p.Reason != "limit" || p.Status != 503 || p.Type != "https://errors.example/overloaded" {
		t.Fatalf("refusal: %d %+v; want 503 with reason limit", status, p)
	}
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 3 {
		t.Fatalf("Retry-After %q, want 1..3 (1 s + up to 2 s jitter)", h.Get("Retry-After"))
	}
	if h.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q, want no-store", h.Get("Cache-Control"))
	}
	if b.count() != 1 {
		t.Fatalf("handler ran %d times, want 1: the refused request must do no work", b.count())
	}
	close(b.release)
	if s := <-done; s != http.StatusNoContent {
		t.Fatalf("held request: %d", s)
	}
	if k := l.Counts(shed.Critical); k.Rejects[limit.ReasonLimit] != 1 || k.Admitted != 1 {
		t.Fatalf("counts %+v", k)
	}
}

func TestBadHeaders(t *testing.T) {
	for _, lenient := range []bool{false, true} {
		g := newGate(t, admit.Config{Limiter: newLimiter(t, 4, limit.LimiterConfig{}), LenientHeaders: lenient})
		srv := httptest.NewServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), admit.HTTPOptions{}))
		for _, hdr := range []map[string]string{
			{deadline.HTTPHeader: "5 seconds"},
			{shed.ClassHeader: "platinum"},
		} {
			status, _, p := get(t, srv.URL, hdr)
			switch {
			case !lenient && (status != 400 || p.Reason != "bad_header" || p.Detail == ""):
				t.Errorf("%v: %d %+v, want 400 naming the header and the reason", hdr, status, p)
			case lenient && status != 200:
				t.Errorf("lenient %v: %d, want 200 (header ignored)", hdr, status)
			}
		}
		srv.Close()
	}
}

// A request whose budget is already spent does no work.
func TestSpentBudgetDoesNoWork(t *testing.T) {
	l := newLimiter(t, 4, limit.LimiterConfig{})
	g := newGate(t, admit.Config{Limiter: l})
	calls := 0
	srv := httptest.NewServer(g.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ }), admit.HTTPOptions{}))
	defer srv.Close()
	status, h, p := get(t, srv.URL, map[string]string{deadline.HTTPHeader: "0n"})
	if status != 503 || p.Reason != "deadline" || calls != 0 {
		t.Fatalf("spent budget: %d %+v, handler calls %d; want 503 deadline and no call", status, p, calls)
	}
	if h.Get("Retry-After") != "" {
		t.Fatalf("deadline refusal carries Retry-After %q: retrying a spent budget is pointless", h.Get("Retry-After"))
	}
	if l.InFlight() != 0 {
		t.Fatal("a place is still held")
	}
}

func TestQueuedRequestIsServedOrTimesOut(t *testing.T) {
	l := newLimiter(t, 1, limit.LimiterConfig{Shares: oneShare, Queue: limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 10}})
	g := newGate(t, admit.Config{Limiter: l})
	b := newBlocker()
	srv := httptest.NewServer(g.Handler(b, admit.HTTPOptions{}))
	defer srv.Close()

	first := make(chan int)
	go func() { s, _, _ := get(t, srv.URL, nil); first <- s }()
	<-b.entered
	// A queued request whose budget (50 ms) runs out while it waits: 503
	// deadline, no work.
	status, _, p := get(t, srv.URL, map[string]string{deadline.HTTPHeader: "50m"})
	if status != 503 || p.Reason != "deadline" {
		t.Fatalf("queued past its budget: %d %+v, want 503 deadline", status, p)
	}
	// A queued request with time to spare is served when the place frees.
	second := make(chan int)
	go func() { s, _, _ := get(t, srv.URL, nil); second <- s }()
	for l.QueueLen() == 0 {
		time.Sleep(time.Millisecond)
	}
	b.release <- struct{}{} // first finishes
	if s := <-first; s != http.StatusNoContent {
		t.Fatalf("first: %d", s)
	}
	<-b.entered // second got the place
	b.release <- struct{}{}
	if s := <-second; s != http.StatusNoContent {
		t.Fatalf("second: %d", s)
	}
	if b.count() != 2 {
		t.Fatalf("handler ran %d times, want 2 (never for the timed-out one)", b.count())
	}
	if l.InFlight() != 0 {
		t.Fatalf("InFlight %d, want 0", l.InFlight())
	}
}

// Class shares over a real loopback server: with Fixed(8) sheddable gets 4
// places, critical all 8.
func TestClassSharesOverLoopback(t *testing.T) {
	l := newLimiter(t, 8, limit.LimiterConfig{})
	g := newGate(t, admit.Config{Limiter: l})
	b := newBlocker()
	srv := httptest.NewServer(g.Handler(b, admit.HTTPOptions{}))
	defer srv.Close()

	burst := func(class string, n int) (wait func()) {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				get(t, srv.URL, map[string]string{shed.ClassHeader: class})
			}()
		}
		return wg.Wait
	}
	waitShed := burst("sheddable", 8)
	for l.InFlight() < 4 || int(l.Counts(shed.Sheddable).Rejected) < 4 {
		time.Sleep(time.Millisecond)
	}
	waitCrit := burst("critical", 8)
	for l.InFlight() < 8 || int(l.Counts(shed.Critical).Rejected) < 4 {
		time.Sleep(time.Millisecond)
	}
	close(b.release)
	waitShed()
	waitCrit()
	ks, kc := l.Counts(shed.Sheddable), l.Counts(shed.Critical)
	if ks.Admitted != 4 || ks.Rejected != 4 || kc.Admitted != 4 || kc.Rejected != 4 {
		t.Fatalf("sheddable %+v critical %+v; want 4 admitted and 4 refused each", ks, kc)
	}
	if g.Goodput(shed.Critical) != 4 || g.Goodput(shed.Sheddable) != 4 {
		t.Fatalf("goodput critical %d sheddable %d, want 4 and 4", g.Goodput(shed.Critical), g.Goodput(shed.Sheddable))
	}
}

func TestFairnessAnswers429(t *testing.T) {
	l := newLimiter(t, 2, limit.LimiterConfig{Shares: []float64{1}, Fairness: limit.FairnessConfig{Slots: 16, Pressure: 0.5}})
	g := newGate(t, admit.Config{Limiter: l})
	b := newBlocker()
	srv := httptest.NewServer(g.Handler(b, admit.HTTPOptions{Client: func(r *http.Request) uint64 {
		id, _ := strconv.ParseUint(r.Header.Get("X-Client"), 10, 64)
		return id
	}}))
	defer srv.Close()
	done := make(chan struct{})
	go func() { get(t, srv.URL, map[string]string{"X-Client": "7"}); close(done) }()
	<-b.entered
	// Client 7 holds 1 of 2 ≥ pressure; a second client arriving makes the
	// share 1: client 7's next request is over it.
	go get(t, srv.URL, map[string]string{"X-Client": "9"})
	<-b.entered
	status, _, p := get(t, srv.URL, map[string]string{"X-Client": "7"})
	if status != http.StatusTooManyRequests || p.Reason != "fairness" {
		t.Fatalf("heavy client: %d %+v, want 429 fairness", status, p)
	}
	close(b.release)
	<-done
}

// The handler's answer is the Limiter's outcome: a 503 from the handler is
// a drop, a cancelled caller is ignored.
func TestOutcomeMapping(t *testing.T) {
	for _, tc := range []struct {
		status int
		err    error
		want   limit.Outcome
	}{
		{200, nil, limit.Success},
		{500, nil, limit.Success},
		{503, nil, limit.Dropped},
		{504, nil, limit.Dropped},
		{200, fmt.Errorf("handler: %w", context.DeadlineExceeded), limit.Dropped},
		{200, context.Canceled, limit.Ignore},
	} {
		if got := admit.DefaultHTTPOutcome(tc.status, tc.err); got != tc.want {
			t.Errorf("DefaultHTTPOutcome(%d, %v) = %v, want %v", tc.status, tc.err, got, tc.want)
		}
	}
}

func TestPanickingHandlerReleasesItsPlace(t *testing.T) {
	l := newLimiter(t, 1, limit.LimiterConfig{Shares: oneShare})
	g := newGate(t, admit.Config{Limiter: l})
	h := g.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), admit.HTTPOptions{})
	func() {
		defer func() { _ = recover() }()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	if l.InFlight() != 0 {
		t.Fatalf("InFlight %d after a panic, want 0", l.InFlight())
	}
}

func TestCollector(t *testing.T) {
	l := newLimiter(t, 1, limit.LimiterConfig{Shares: oneShare})
	g := newGate(t, admit.Config{Limiter: l, Name: "api"})
	h := g.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), admit.HTTPOptions{})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	tk, _ := l.Acquire(0, shed.Critical)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) // refused
	tk.Done(0, limit.Ignore)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(g.Collector())
	want := `
# HELP spillway_admission_goodput_total Admitted requests that ended in success.
# TYPE spillway_admission_goodput_total counter
spillway_admission_goodput_total{class="critical",gate="api"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "spillway_admission_goodput_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "spillway_admission_rejected_total"); err != nil || n != limit.NumReasons-1 {
		t.Fatalf("rejected series %d (%v), want %d (one class)", n, err, limit.NumReasons-1)
	}
	const wantRefused = `
# HELP spillway_admission_limit The adaptive concurrency limit now applied.
# TYPE spillway_admission_limit gauge
spillway_admission_limit{gate="api"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantRefused), "spillway_admission_limit"); err != nil {
		t.Fatal(err)
	}
	if k := l.Counts(shed.Default); k.Rejects[limit.ReasonLimit] != 1 { // mapped onto the one class
		t.Fatalf("refusals %+v, want 1 by the limit", k)
	}
}

func TestConfigErrors(t *testing.T) {
	l := newLimiter(t, 1, limit.LimiterConfig{Shares: oneShare})
	for _, tc := range []struct {
		cfg   admit.Config
		field string
	}{
		{admit.Config{}, "Limiter"},
		{admit.Config{Limiter: l, DefaultClass: "gold"}, "DefaultClass"},
		{admit.Config{Limiter: l, RetryAfter: -1}, "RetryAfter"},
		{admit.Config{Limiter: l, RetryJitter: 4000}, "RetryJitter"},
	} {
		_, err := admit.New(tc.cfg)
		var ce *admit.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, admit.ErrConfig) {
			t.Errorf("%+v: %v, want a ConfigError on %s", tc.cfg, err, tc.field)
		}
	}
}

// oneShare gives every class the whole limit: with limit 1 the default
// shares would leave the default class no place at all.
var oneShare = []float64{1}
