package sim

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/retry"
)

// demoDip is the demo's capacity dip: 70 new calls a second to 10 workers
// of 100 ms (capacity 100/s, 50/s with 5 workers in [30 s, 60 s)), a queue
// of 1000, timeout 1 s, at most 3 retries; the seed's budget.
func demoDip(p DipPolicy) DipModel {
	return DipModel{Seed: 9, NewRate: 70, Workers: 10, Service: 100 * time.Millisecond, Queue: 1000, DipWorkers: 5,
		DipFrom: 30 * time.Second, DipTo: 60 * time.Second, End: 120 * time.Second, Timeout: time.Second,
		MaxRetries: 3, Policy: p, Budget: retry.BudgetConfig{Ratio: 0.1, Max: 10},
		LoadFrom: 90 * time.Second, LoadTo: 120 * time.Second}
}

// TestPredictDipDemo is the check on the prediction: with
// immediate retries the load 30 s after capacity returns is still at least
// 2.5× the new calls and goodput never recovers; with backoff, a budget and
// expired work dropped, goodput is back within 10 s and the load is the
// new calls'.
func TestPredictDipDemo(t *testing.T) {
	imm, err := PredictDip(demoDip(Immediate))
	if err != nil {
		t.Fatal(err)
	}
	bud, err := PredictDip(demoDip(BudgetDropExpired))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("immediate: load in 90-120 s %.0f/s, recovery %v; budget + drop: %.0f/s, recovery %v",
		imm.LoadAfter, imm.Recovery, bud.LoadAfter, bud.Recovery)
	if imm.LoadAfter < 2.5*70 || imm.Recovery != -1 {
		t.Errorf("immediate: load after %.0f/s, recovery %v; want at least 175/s and never", imm.LoadAfter, imm.Recovery)
	}
	if bud.Recovery < 0 || bud.Recovery > 10 || bud.LoadAfter > 1.2*70 {
		t.Errorf("budget + drop: load after %.0f/s, recovery %v; want at most 84/s and within 10 s", bud.LoadAfter, bud.Recovery)
	}
	for _, r := range []DipResult{imm, bud} {
		checkDipSeries(t, r, 120)
	}
}

// checkDipSeries checks what holds for any run: one bin a second; every
// new call is sent in its bin, so attempts ≥ new calls there; a call is
// good at most once.
func checkDipSeries(t *testing.T, r DipResult, bins int) {
	t.Helper()
	if len(r.Seconds) != bins || len(r.Attempts) != bins || len(r.Good) != bins || len(r.NewCalls) != bins {
		t.Fatalf("%d, %d, %d, %d bins, want %d", len(r.Seconds), len(r.Attempts), len(r.Good), len(r.NewCalls), bins)
	}
	for i := range bins {
		if r.Attempts[i] < r.NewCalls[i] {
			t.Errorf("second %v: %v attempts, fewer than the %v new calls", r.Seconds[i], r.Attempts[i], r.NewCalls[i])
		}
	}
	if g, n := Sum(r.Good), Sum(r.NewCalls); g > n {
		t.Errorf("%v good calls, more than the %v calls", g, n)
	}
}

// TestPredictDipMatchesSeed is the sanity reference: the seed's retry storm
// (capacity 100/s, 50/s in [30 s, 60 s), 240 s), here as 2 workers of 20 ms
// with 1 in the dip and no queue bound. The seed's table (load in the dip,
// load in 120-180 s, recovery) is matched within 10% for immediate retries
// — the seed halves one server's speed, this halves the workers — and
// budget + drop expired ends at the new calls' rate and recovers at once.
func TestPredictDipMatchesSeed(t *testing.T) {
	golden := readGoldenStorm(t)
	for _, c := range []struct {
		policy DipPolicy
		name   string
	}{{Immediate, "immediate retry"}, {BudgetDropExpired, "+ server drops expired"}} {
		m := demoDip(c.policy)
		m.Workers, m.DipWorkers, m.Service, m.Queue = 2, 1, 20*time.Millisecond, 1e6
		m.End, m.LoadFrom, m.LoadTo = 240*time.Second, 120*time.Second, 180*time.Second
		r, err := PredictDip(m)
		if err != nil {
			t.Fatal(err)
		}
		g := golden[c.name]
		inDip := r.LoadInDip
		if want := Sum(r.Attempts[30:60]) / 30; !within(inDip, want, 1e-9) {
			t.Errorf("%s: LoadInDip %v, the series' mean in the dip %v", c.name, inDip, want)
		}
		t.Logf("%s: load in dip %.0f (seed %.0f), in 120-180 s %.0f (%.0f), recovery %v (%v)", c.name, inDip, g[0], r.LoadAfter, g[1], r.Recovery, g[2])
		if !within(inDip, g[0], 0.1) || !within(r.LoadAfter, g[1], 0.1) || r.Recovery != g[2] {
			t.Errorf("%s: load in dip %.0f, after %.0f, recovery %v; seed %.0f, %.0f, %v", c.name, inDip, r.LoadAfter, r.Recovery, g[0], g[1], g[2])
		}
		checkDipSeries(t, r, 240)
	}
}

func within(x, want, rel float64) bool { return x >= want*(1-rel) && x <= want*(1+rel) }

// readGoldenStorm parses testdata/retry_storm.out: per policy, the load in
// the dip, the load in 120-180 s, and the recovery in seconds (−1: never).
func readGoldenStorm(t *testing.T) map[string][3]float64 {
	t.Helper()
	b, err := os.ReadFile("testdata/retry_storm.out")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][3]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		f := strings.Fields(line[26:]) // "230 (3.29x) 279 (3.99x) never (by 240 s)"
		var v [3]float64
		for i, s := range []string{f[0], f[2], f[4]} {
			if s == "never" {
				v[i] = -1
				continue
			}
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("golden %q: %v", line, err)
			}
			v[i] = x
		}
		out[strings.TrimSpace(line[:26])] = v
	}
	return out
}

// TestPredictDipDeterministic: the same model gives the same result;
// another seed another; half-second bins give twice the bins.
func TestPredictDipDeterministic(t *testing.T) {
	m := demoDip(BudgetDropExpired)
	a, err := PredictDip(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := PredictDip(m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different results")
	}
	m.Seed++
	c, err := PredictDip(m)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a, c) {
		t.Error("two seeds, the same result")
	}
	m.Bin = 500 * time.Millisecond
	h, err := PredictDip(m)
	if err != nil {
		t.Fatal(err)
	}
	checkDipSeries(t, h, 240)
}

func TestPredictDipErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*DipModel)
	}{
		{"rate", func(m *DipModel) { m.NewRate = 0 }},
		{"arrivals", func(m *DipModel) { m.NewRate = 1e5 }},
		{"workers", func(m *DipModel) { m.Workers = 0 }},
		{"dip workers", func(m *DipModel) { m.DipWorkers = -1 }},
		{"queue", func(m *DipModel) { m.Queue = -1 }},
		{"dip", func(m *DipModel) { m.DipTo = m.DipFrom }},
		{"end", func(m *DipModel) { m.End = 0 }},
		{"timeout", func(m *DipModel) { m.Timeout = 0 }},
		{"retries", func(m *DipModel) { m.MaxRetries = 11 }},
		{"policy", func(m *DipModel) { m.Policy = 7 }},
		{"budget", func(m *DipModel) { m.Budget.Ratio = -1 }},
		{"backoff", func(m *DipModel) { m.Backoff = retry.Backoff{Base: 2, Cap: 1} }},
		{"load window", func(m *DipModel) { m.LoadTo = 200 * time.Second }},
		{"bin", func(m *DipModel) { m.Bin = time.Microsecond }},
		{"window", func(m *DipModel) { m.Window = time.Millisecond }},
	} {
		m := demoDip(BudgetDropExpired)
		c.edit(&m)
		if _, err := PredictDip(m); !errors.Is(err, ErrModel) {
			t.Errorf("%s: err %v, want ErrModel", c.name, err)
		}
	}
}
