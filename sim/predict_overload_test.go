package sim

import (
	"errors"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/config"
)

// The demo's backend: 10 workers, exponential service of mean 100 ms
// (capacity 100/s), a FIFO queue of 1000; 30% critical, timeout 1 s.
func demoModel(loads ...float64) OverloadModel {
	return OverloadModel{Seed: 42, Workers: 10, Service: 100 * time.Millisecond, Queue: 1000, Timeout: time.Second,
		Critical: 0.3, Loads: loads, Duration: 6 * time.Second}
}

// The seed's limits as the gateway's admission: one bound of 50 for every
// class (shares all 1; the default shares would give sheddable requests 25
// places), and priority shedding, critical 50 and the rest 20.
const (
	seedBounded  = "{algorithm: fixed, initial_limit: 50, shares: {critical: 1, default: 1, sheddable: 1}}"
	seedPriority = "{algorithm: fixed, initial_limit: 50, shares: {critical: 1, sheddable: 0.4}}"
)

// goldenOverload is one row of testdata/overload_policies.out.
type goldenOverload struct {
	load, good, p99ms float64
	rejected          int
	critPct           float64
	queueAtEnd        int
}

// readGoldenOverload parses the seed's published overload table, by
// policy name.
func readGoldenOverload(t *testing.T) map[string][]goldenOverload {
	t.Helper()
	b, err := os.ReadFile("testdata/overload_policies.out")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]goldenOverload{}
	policy := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || f[0] == "load":
		case len(f) == 6 && strings.HasSuffix(f[4], "%"):
			num := func(s string) float64 {
				v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
				if err != nil {
					t.Fatalf("golden %q: %v", line, err)
				}
				return v
			}
			out[policy] = append(out[policy], goldenOverload{num(f[0]), num(f[1]), num(f[2]), int(num(f[3])), num(f[4]), int(num(f[5]))})
		default:
			policy = line
		}
	}
	if len(out) != 3 {
		t.Fatalf("golden: %d policies, want 3", len(out))
	}
	return out
}

// TestPredictOverloadMatchesSeed runs the seed's overload experiment (one
// worker, 10 ms, no queue bound, 30 s per load) through PredictOverload with
// the seed's limits as admission, and compares with the seed's published
// numbers. The draws are the seed's (arrival, class, service time, in that
// order), and the Limiter with these shares decides as the seed's
// shed.ClassLimiter, so the refusals are the same to the request. Two
// differences remain, both of counting: the prediction counts a good
// answer that comes after the 30 s (as package loadgen does: an arrival
// counts once it ended), the seed does not — so goodput is higher by at
// most the requests in flight at the end (the table's last column) — and
// the gateway frees a place when the client leaves rather than when the
// server finishes (no admitted request here waits a second, so that
// changes nothing).
func TestPredictOverloadMatchesSeed(t *testing.T) {
	golden := readGoldenOverload(t)
	m := OverloadModel{Seed: 42, Workers: 1, Service: 10 * time.Millisecond, Queue: 1e7, Timeout: time.Second,
		Critical: 0.3, Loads: []float64{50, 80, 100, 120, 150, 200}, Duration: 30 * time.Second}
	for _, c := range []struct{ name, admission string }{
		{"unbounded queue", ""}, {"bounded queue, fail fast", seedBounded}, {"priority shedding", seedPriority},
	} {
		m.Admission = nil
		if c.admission != "" {
			m.Admission = admission(t, c.admission)
		}
		rows, err := PredictOverload(m)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			g := golden[c.name][i]
			extra := r.GoodPerSec - g.good
			p99ms := float64(r.P99) / 1e6
			t.Logf("%s %v: good/s %.1f (seed %.1f), p99 %.0f ms (%.0f), rejected %d (%d), critical ok %.1f%% (%.0f%%)",
				c.name, r.Load, r.GoodPerSec, g.good, p99ms, g.p99ms, r.Rejected, g.rejected, 100*r.CriticalOK, g.critPct)
			if r.Rejected != g.rejected {
				t.Errorf("%s %v: rejected %d, seed %d", c.name, r.Load, r.Rejected, g.rejected)
			}
			if extra < -0.05 || extra > float64(g.queueAtEnd)/30+0.05 {
				t.Errorf("%s %v: good/s %.2f, seed %.1f: want at most %d/30 more (answers after the end)", c.name, r.Load, r.GoodPerSec, g.good, g.queueAtEnd)
			}
			if math.Abs(p99ms-g.p99ms) > math.Max(6, 0.02*g.p99ms) {
				t.Errorf("%s %v: p99 %.1f ms, seed %.0f ms", c.name, r.Load, p99ms, g.p99ms)
			}
			if d := 100*r.CriticalOK - g.critPct; d < -0.5 || d > 2 {
				t.Errorf("%s %v: critical ok %.1f%%, seed %.0f%%", c.name, r.Load, 100*r.CriticalOK, g.critPct)
			}
		}
	}
}

// TestPredictOverloadDemo: at 2× capacity on the demo's backend, no
// protection answers far below capacity in time (the queue grows past the
// timeout), and priority shedding keeps the goodput near capacity, at least
// 3× the unprotected one, with at least 95% of critical requests in time.
func TestPredictOverloadDemo(t *testing.T) {
	m := demoModel(200)
	none, err := PredictOverload(m)
	if err != nil {
		t.Fatal(err)
	}
	m.Admission = admission(t, seedPriority)
	prio, err := PredictOverload(m)
	if err != nil {
		t.Fatal(err)
	}
	n, p := none[0], prio[0]
	t.Logf("200/s: none %.1f good/s (critical %.0f%%), priority %.1f good/s (critical %.0f%%, %d rejected)",
		n.GoodPerSec, 100*n.CriticalOK, p.GoodPerSec, 100*p.CriticalOK, p.Rejected)
	if n.GoodPerSec > 50 {
		t.Errorf("no protection at 200/s: %.1f good/s, want far below the capacity of 100 (at most 50)", n.GoodPerSec)
	}
	if p.GoodPerSec < 3*n.GoodPerSec || p.GoodPerSec < 85 {
		t.Errorf("priority at 200/s: %.1f good/s, want at least 85 and 3× no protection's %.1f", p.GoodPerSec, n.GoodPerSec)
	}
	if p.CriticalOK < 0.95 {
		t.Errorf("priority at 200/s: critical ok %.1f%%, want at least 95%%", 100*p.CriticalOK)
	}
}

// TestPredictOverloadAccounts: every arrival ends once — good, refused or
// timed out — whatever the admission and the backend's cancel policy; a
// gateway queue refuses fewer requests than the same limit without one,
// and a backend that drops abandoned work answers more in time.
func TestPredictOverloadAccounts(t *testing.T) {
	byName := map[string][]OverloadRow{}
	for _, c := range []struct {
		name, admission string
		honor           bool
	}{
		{"none", "", false},
		{"none, honor cancel", "", true},
		{"fixed reject", "{algorithm: fixed, initial_limit: 15}", false},
		{"fixed fifo", "{algorithm: fixed, initial_limit: 15, queue: {discipline: fifo, max_wait: 200ms}}", false},
		{"gradient2 codel", "{algorithm: gradient2, initial_limit: 20, min_limit: 5, max_limit: 200, queue: {discipline: codel, max_wait: 100ms}}", true},
		{"aimd adaptive-lifo", "{algorithm: aimd, queue: {discipline: adaptive-lifo, max_wait: 300ms}}", false},
		{"shadow", "{algorithm: fixed, initial_limit: 5, shadow: true}", false},
	} {
		m := demoModel(80, 200)
		m.HonorCancel = c.honor
		if c.admission != "" {
			m.Admission = admission(t, c.admission)
		}
		rows, err := PredictOverload(m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		byName[c.name] = rows
		for _, r := range rows {
			t.Logf("%s %v: offered %d, good %d, rejected %d (backend %d), timed out %d", c.name, r.Load, r.Offered, r.Good, r.Rejected, r.RejectedBackend, r.TimedOut)
			if r.Good+r.Rejected+r.TimedOut != r.Offered || r.Offered == 0 {
				t.Errorf("%s %v: good %d + rejected %d + timed out %d ≠ offered %d", c.name, r.Load, r.Good, r.Rejected, r.TimedOut, r.Offered)
			}
		}
	}
	if q, r := byName["fixed fifo"][1], byName["fixed reject"][1]; q.Rejected >= r.Rejected {
		t.Errorf("200/s: a 200 ms queue refused %d, no queue %d; want fewer", q.Rejected, r.Rejected)
	}
	if h, n := byName["none, honor cancel"][1], byName["none"][1]; h.Good <= n.Good {
		t.Errorf("200/s: good %d with HonorCancel, %d without; want more", h.Good, n.Good)
	}
	if s, n := byName["shadow"][1], byName["none"][1]; s != n {
		t.Errorf("shadow admission refused or changed something: %+v, want %+v", s, n)
	}
}

// TestPredictOverloadDeterministic: the same model gives the same rows;
// another seed other ones.
func TestPredictOverloadDeterministic(t *testing.T) {
	m := demoModel(100, 150)
	m.Admission = admission(t, "{algorithm: gradient2, initial_limit: 20, min_limit: 10, max_limit: 100, queue: {discipline: fifo, max_wait: 50ms}}")
	a, err := PredictOverload(m)
	if err != nil {
		t.Fatal(err)
	}
	m.Admission = admission(t, "{algorithm: gradient2, initial_limit: 20, min_limit: 10, max_limit: 100, queue: {discipline: fifo, max_wait: 50ms}}")
	b, err := PredictOverload(m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different rows:\n%+v\n%+v", a, b)
	}
	m.Seed++
	c, err := PredictOverload(m)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a, c) {
		t.Errorf("seeds %d and %d gave the same rows %+v", m.Seed-1, m.Seed, a)
	}
}

func TestPredictOverloadErrors(t *testing.T) {
	bad := &config.Admission{AlgorithmName: "fixed", InitialLimit: 10} // zero shares: the Limiter refuses them
	for _, c := range []struct {
		name string
		edit func(*OverloadModel)
	}{
		{"workers", func(m *OverloadModel) { m.Workers = 0 }},
		{"service", func(m *OverloadModel) { m.Service = 0 }},
		{"queue", func(m *OverloadModel) { m.Queue = -1 }},
		{"timeout", func(m *OverloadModel) { m.Timeout = -time.Second }},
		{"critical", func(m *OverloadModel) { m.Critical = math.NaN() }},
		{"duration", func(m *OverloadModel) { m.Duration = 0 }},
		{"no loads", func(m *OverloadModel) { m.Loads = nil }},
		{"zero load", func(m *OverloadModel) { m.Loads = []float64{100, 0} }},
		{"too many arrivals", func(m *OverloadModel) { m.Loads = []float64{1e6} }},
		{"shares", func(m *OverloadModel) { m.Admission = bad }},
	} {
		m := demoModel(100)
		c.edit(&m)
		if _, err := PredictOverload(m); !errors.Is(err, ErrModel) {
			t.Errorf("%s: err %v, want ErrModel", c.name, err)
		}
	}
}
