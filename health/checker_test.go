package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/internal/syncbuf"
	"go.uber.org/goleak"
)

// event is one OnChange call.
type event struct {
	addr    string
	healthy bool
	reason  string
}

// recorder collects OnChange calls.
type recorder struct {
	mu   sync.Mutex
	list []event
}

func (r *recorder) on(addr string, healthy bool, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, event{addr, healthy, reason})
}

func (r *recorder) events() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.list...)
}

// fake is a Check whose answer per address the test sets.
type fake struct {
	mu      sync.Mutex
	fail    map[string]bool
	hang    map[string]bool
	started atomic.Int64
}

var errRefused = errors.New("refused")

func newFake() *fake { return &fake{fail: map[string]bool{}, hang: map[string]bool{}} }

func (f *fake) set(addr string, fail, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[addr], f.hang[addr] = fail, hang
}

func (f *fake) Check(ctx context.Context, addr string) error {
	f.started.Add(1)
	f.mu.Lock()
	fail, hang := f.fail[addr], f.hang[addr]
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if fail {
		return errRefused
	}
	return nil
}

// eventually polls cond every few milliseconds for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func healthyIs(c *Checker, addr string, want bool) func() bool {
	return func() bool { h, ok := c.Healthy(addr); return ok && h == want }
}

func TestCheckerTransitions(t *testing.T) {
	f := newFake()
	f.set("b", true, false)
	var rec recorder
	var logs syncbuf.Buffer
	c, err := NewChecker(f, ActiveConfig{Interval: 0.005, Fall: 2, Rise: 2}, CheckerOptions{
		Name: "web", OnChange: rec.on, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets([]string{"a", "b", "a"})
	if got := rec.events(); len(got) != 2 || got[0] != (event{"a", false, "added"}) || got[1] != (event{"b", false, "added"}) {
		t.Fatalf("events after SetTargets: %+v", got)
	}
	c.Start()
	defer c.Stop()
	eventually(t, "a healthy", healthyIs(c, "a", true))
	f.set("a", true, false)
	eventually(t, "a unhealthy", healthyIs(c, "a", false))
	f.set("a", false, false)
	eventually(t, "a healthy again", healthyIs(c, "a", true))
	eventually(t, "b checked", func() bool { s, _ := c.Stats("b"); return s.Checks >= 3 })
	c.Stop()

	want := []event{
		{"a", false, "added"}, {"b", false, "added"},
		{"a", true, "first check passed"},
		{"a", false, "2 checks failed in a row, last: refused"},
		{"a", true, "2 checks passed in a row"},
	}
	got := rec.events()
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	sa, _ := c.Stats("a")
	sb, _ := c.Stats("b")
	if sa.Transitions != 3 || sa.ToHealthy != 2 || !sa.Healthy || sa.Failures < 2 || sa.Checks < 5 {
		t.Errorf("stats of a: %+v", sa)
	}
	if sb.Transitions != 0 || sb.Healthy || sb.Failures != sb.Checks {
		t.Errorf("stats of b: %+v", sb)
	}
	if total, healthy := c.Targets(); total != 2 || healthy != 1 {
		t.Errorf("Targets() = %d, %d; want 2, 1", total, healthy)
	}

	// One log line per transition, none per check.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines for 3 transitions and %d checks:\n%s", len(lines), sa.Checks+sb.Checks, logs.String())
	}
	if !strings.Contains(lines[1], "level=WARN") || !strings.Contains(lines[1], "addr=a") || !strings.Contains(lines[1], "checker=web") ||
		!strings.Contains(lines[2], "level=INFO") {
		t.Errorf("log lines:\n%s", logs.String())
	}

	// The collector's totals agree with the per-target counters.
	if n := testutil.CollectAndCount(c.Collector()); n != 6 {
		t.Errorf("%d series, want 6", n)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() != "checker" {
					key += "/" + l.GetValue()
				} else if l.GetValue() != "web" {
					t.Errorf("checker label %q", l.GetValue())
				}
			}
			vals[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for k, v := range map[string]float64{
		"spillway_health_checks_total/passed":         float64(sa.Checks - sa.Failures),
		"spillway_health_checks_total/failed":         float64(sa.Failures + sb.Failures),
		"spillway_health_transitions_total/healthy":   2,
		"spillway_health_transitions_total/unhealthy": 1,
		"spillway_health_targets/healthy":             1,
		"spillway_health_targets/unhealthy":           1,
	} {
		if vals[k] != v {
			t.Errorf("%s = %v, want %v", k, vals[k], v)
		}
	}
}

func TestCheckerInitiallyHealthy(t *testing.T) {
	f := newFake()
	f.set("a", true, false)
	var rec recorder
	c, err := NewChecker(f, ActiveConfig{Interval: 0.005, InitiallyHealthy: true}, CheckerOptions{OnChange: rec.on, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets([]string{"a"})
	if h, ok := c.Healthy("a"); !ok || !h {
		t.Fatalf("a before its first check: healthy=%v known=%v, want healthy", h, ok)
	}
	c.Start()
	eventually(t, "a unhealthy", healthyIs(c, "a", false))
	c.Stop()
	want := []event{{"a", true, "added"}, {"a", false, "first check failed: refused"}}
	if got := rec.events(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("events %+v, want %+v", got, want)
	}
	if _, ok := c.Healthy("zz"); ok {
		t.Error("unknown address reported as a target")
	}
}

func TestCheckerSetTargetsKeepsState(t *testing.T) {
	f := newFake()
	var rec recorder
	c, err := NewChecker(f, ActiveConfig{Interval: 0.005, Fall: 2, Rise: 2}, CheckerOptions{OnChange: rec.on, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets([]string{"a", "b"})
	c.Start()
	defer c.Stop()
	eventually(t, "a and b healthy", func() bool { return healthyIs(c, "a", true)() && healthyIs(c, "b", true)() })
	before, _ := c.Stats("a")

	f.set("b", true, false) // b would go down, but it is removed first
	c.SetTargets([]string{"c", "a", ""})
	removedAt := len(rec.events())
	if _, ok := c.Healthy("b"); ok {
		t.Error("b still a target after removal")
	}
	eventually(t, "c healthy", healthyIs(c, "c", true))
	eventually(t, "a checked again", func() bool { s, _ := c.Stats("a"); return s.Checks >= before.Checks+3 })
	after, _ := c.Stats("a")
	if !after.Healthy || after.Transitions != before.Transitions || after.Since != before.Since {
		t.Errorf("a's state was reset: before %+v, after %+v", before, after)
	}
	for _, e := range rec.events()[removedAt:] {
		if e.addr == "b" {
			t.Errorf("event for removed b: %+v", e)
		}
	}

	// b comes back fresh: a new "added", a first check, no memory of before.
	f.set("b", false, false)
	c.SetTargets([]string{"a", "b", "c"})
	eventually(t, "b healthy", healthyIs(c, "b", true))
	var bEvents []event
	for _, e := range rec.events()[removedAt:] {
		if e.addr == "b" {
			bEvents = append(bEvents, e)
		}
	}
	if len(bEvents) != 2 || bEvents[0] != (event{"b", false, "added"}) || bEvents[1] != (event{"b", true, "first check passed"}) {
		t.Errorf("events of re-added b: %+v", bEvents)
	}
}

// A hung backend (accepts, never answers) is marked down after fall failed
// checks, within the seed's worst case, fall × interval (+ jitter) +
// timeout. The lower bound is exact: the first failed check may have begun
// up to one timeout before the hang, and each check waits at least
// interval × (1 − jitter) after the start of the one before. Real timers
// run late on a loaded machine, so the upper bound is 5 s, over 20 times
// the worst case: it catches a check that outlives its timeout or a wait
// in the wrong unit. Should the backend be marked down between being seen
// healthy and the hang (checks failing under load), the measurement
// starts again.
func TestCheckerDetectsHungBackend(t *testing.T) {
	var hung atomic.Bool
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hung.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	defer close(release)

	const interval, timeout, jitter, fall = 0.05, 0.05, 0.1, 3
	var mu sync.Mutex
	var downs []time.Time // when the target was marked down
	c, err := NewChecker(&HTTPCheck{Path: "/healthz"}, ActiveConfig{Interval: interval, Timeout: timeout, Jitter: jitter, Fall: fall, Rise: 2},
		CheckerOptions{Logger: quiet, OnChange: func(addr string, healthy bool, reason string) {
			if !healthy && reason != "added" {
				mu.Lock()
				downs = append(downs, time.Now())
				mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Listener.Addr().String()
	c.SetTargets([]string{addr})
	c.Start()
	defer c.Stop()
	marked := func() int { mu.Lock(); defer mu.Unlock(); return len(downs) }
	for attempt := 1; ; attempt++ {
		hung.Store(false)
		eventually(t, "backend healthy", healthyIs(c, addr, true))
		n := marked()
		hung.Store(true)
		start := time.Now()
		eventually(t, "hung backend marked down", func() bool { return marked() > n })
		mu.Lock()
		at := downs[n]
		mu.Unlock()
		if at.Before(start) && attempt < 3 {
			t.Logf("attempt %d: marked down before the hang; again", attempt)
			continue
		}
		took := at.Sub(start).Seconds()
		worst := fall*interval*(1+jitter) + timeout // 0.215 s
		least := (fall - 1) * interval * (1 - jitter)
		t.Logf("detected in %.3f s (worst case %.3f s)", took, worst)
		if took > 5 {
			t.Errorf("detection took %.3f s, want about %.3f s, far below 5 s", took, worst)
		}
		if took < least {
			t.Errorf("detection took %.3f s, less than %d checks can: %.3f s", took, fall, least)
		}
		return
	}
}

func TestCheckerStopCancelsChecks(t *testing.T) {
	f := newFake()
	f.set("a", false, true)
	c, err := NewChecker(f, ActiveConfig{Interval: 60, Timeout: 30, Jitter: -1}, CheckerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets([]string{"a"})
	c.Start()
	eventually(t, "the check to start", func() bool { return f.started.Load() == 1 })
	start := time.Now()
	c.Stop()
	if d := time.Since(start); d > 15*time.Second { // the check's own timeout is 30 s
		t.Errorf("Stop took %v with a hung check", d)
	}
	if s, _ := c.Stats("a"); s.Checks != 0 {
		t.Errorf("a cancelled check was recorded: %+v", s)
	}
	c.Stop() // idempotent
}

// settle waits until the number of goroutines is at most n: the checker
// runs one goroutine per target, so the count follows the target list.
func settle(t *testing.T, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("at most %d goroutines", n), func() bool { return runtime.NumGoroutine() <= n })
}

func TestCheckerNoGoroutineLeak(t *testing.T) {
	f := newFake()
	addrs := func(prefix string, n int) []string {
		var s []string
		for i := range n {
			s = append(s, prefix+string(rune('a'+i)))
		}
		return s
	}
	for _, a := range addrs("hang-", 10) {
		f.set(a, false, true) // in-flight checks must be cancelled too
	}
	ignore := goleak.IgnoreCurrent()
	base := runtime.NumGoroutine()
	c, err := NewChecker(f, ActiveConfig{Interval: 0.005, Timeout: 5}, CheckerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets(append(addrs("ok-", 10), addrs("hang-", 10)...))
	c.Start()
	c.Start() // no second set of goroutines
	eventually(t, "checks running", func() bool { return f.started.Load() >= 20 })
	if n := runtime.NumGoroutine(); n < 20 { // base may shrink as earlier tests' goroutines end
		t.Errorf("%d goroutines for 20 targets", n)
	}
	settle(t, base+20)

	c.SetTargets(addrs("ok-", 2)) // 18 removed, 10 of them mid-check
	settle(t, base+2)
	c.SetTargets(append(addrs("ok-", 2), addrs("new-", 5)...))
	eventually(t, "new targets checked", func() bool { s, _ := c.Stats("new-e"); return s.Checks > 0 })
	settle(t, base+7)
	c.Stop()
	settle(t, base)

	// Restarted, the targets keep their state and get their goroutines back.
	before, _ := c.Stats("ok-a")
	c.Start()
	eventually(t, "checks after restart", func() bool { s, _ := c.Stats("ok-a"); return s.Checks > before.Checks })
	c.Stop()
	leakcheck.Verify(t, 10*time.Second, ignore)
}

func TestNewCheckerErrors(t *testing.T) {
	if _, err := NewChecker(nil, ActiveConfig{}, CheckerOptions{}); !errors.Is(err, ErrConfig) {
		t.Errorf("nil check: %v", err)
	}
	if _, err := NewChecker(TCPCheck{}, ActiveConfig{Fall: -1}, CheckerOptions{}); !errors.Is(err, ErrConfig) {
		t.Errorf("bad config: %v", err)
	}
}

// The real checks leave nothing behind either: connections are closed
// after each check, the gRPC client with them.
func TestRealChecksNoGoroutineLeak(t *testing.T) {
	web, _ := backend(t, 200, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, grpchealth.NewServer())
	go gs.Serve(ln)
	defer gs.Stop()
	closed := closedAddr(t)

	ignore := goleak.IgnoreCurrent()
	var checkers []*Checker
	for _, tc := range []struct {
		check Check
		addr  string
	}{{&HTTPCheck{}, addrOf(web)}, {TCPCheck{}, addrOf(web)}, {GRPCCheck{}, ln.Addr().String()}} {
		c, err := NewChecker(tc.check, ActiveConfig{Interval: 0.005, Timeout: 1}, CheckerOptions{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		c.SetTargets([]string{tc.addr, closed})
		c.Start()
		checkers = append(checkers, c)
	}
	for _, c := range checkers {
		eventually(t, "checks to run", func() bool {
			total, healthy := c.Targets()
			s, _ := c.Stats(closed)
			return total == 2 && healthy == 1 && s.Checks >= 3
		})
	}
	for _, c := range checkers {
		c.Stop()
	}
	leakcheck.Verify(t, 10*time.Second, ignore)
}
