package retry

import (
	"errors"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

func mustHedger(t testing.TB, c HedgeConfig) *Hedger {
	t.Helper()
	h, err := NewHedger(c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHedgeConfigValidate(t *testing.T) {
	for _, c := range []struct {
		c     HedgeConfig
		field string // "" means valid
	}{
		{HedgeConfig{}, ""},
		{HedgeConfig{Delay: 0.05, Quantile: 0.5, MaxHedges: MaxMaxHedges, Samples: MinHedgeSamples, MaxAge: 1}, ""},
		{HedgeConfig{Samples: MaxHedgeSamples}, ""},
		{HedgeConfig{Delay: -1}, "HedgeConfig.Delay"},
		{HedgeConfig{Delay: math.NaN()}, "HedgeConfig.Delay"},
		{HedgeConfig{Delay: math.Inf(1)}, "HedgeConfig.Delay"},
		{HedgeConfig{Quantile: 1}, "HedgeConfig.Quantile"},
		{HedgeConfig{Quantile: -0.5}, "HedgeConfig.Quantile"},
		{HedgeConfig{Quantile: math.NaN()}, "HedgeConfig.Quantile"},
		{HedgeConfig{MaxHedges: -1}, "HedgeConfig.MaxHedges"},
		{HedgeConfig{MaxHedges: MaxMaxHedges + 1}, "HedgeConfig.MaxHedges"},
		{HedgeConfig{Samples: MinHedgeSamples - 1}, "HedgeConfig.Samples"},
		{HedgeConfig{Samples: MaxHedgeSamples + 1}, "HedgeConfig.Samples"},
		{HedgeConfig{MaxAge: -1}, "HedgeConfig.MaxAge"},
		{HedgeConfig{MaxAge: math.Inf(1)}, "HedgeConfig.MaxAge"},
	} {
		h, err := NewHedger(c.c)
		switch {
		case c.field == "" && (err != nil || h == nil):
			t.Errorf("%+v: unexpected error %v", c.c, err)
		case c.field != "" && (err == nil || h != nil):
			t.Errorf("%+v: no error, want one about %s", c.c, c.field)
		case c.field != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.field)):
			t.Errorf("%+v: error %q does not wrap ErrConfig or name %s", c.c, err, c.field)
		}
	}
}

func TestHedgerFixedDelay(t *testing.T) {
	h := mustHedger(t, HedgeConfig{Delay: 0.25, MaxHedges: 3})
	for i := 0; i < 50; i++ {
		h.Record(0, 9)
	}
	if d := h.Delay(0); d != 0.25 {
		t.Errorf("Delay = %v, want the fixed 0.25", d)
	}
	if n := h.MaxHedges(); n != 3 {
		t.Errorf("MaxHedges = %d, want 3", n)
	}
	if n := mustHedger(t, HedgeConfig{}).MaxHedges(); n != 1 {
		t.Errorf("default MaxHedges = %d, want 1", n)
	}
}

// Latencies 0.01, 0.02, …, 1.00 s in a scrambled order: the p95 by nearest
// rank is the 95th smallest, 0.95 s; no hedging before 20 latencies, and
// with exactly 20 (0.01 … 0.20) the 19th smallest, 0.19 s.
func TestHedgerQuantile(t *testing.T) {
	h := mustHedger(t, HedgeConfig{})
	order := []int{}
	for i := 1; i <= 100; i++ {
		order = append(order, (i*37)%101) // a permutation of 1 … 100
	}
	for i, k := range order[:19] {
		h.Record(float64(i)/100, float64(k)/100)
		if d := h.Delay(float64(i) / 100); !math.IsInf(d, 1) {
			t.Fatalf("after %d latencies: Delay = %v, want +Inf", i+1, d)
		}
	}
	h2 := mustHedger(t, HedgeConfig{})
	for k := 20; k >= 1; k-- {
		h2.Record(0, float64(k)/100)
	}
	if d := h2.Delay(0); d != 0.19 {
		t.Errorf("20 latencies: Delay = %v, want 0.19", d)
	}
	for i, k := range order[19:] {
		h.Record(float64(19+i)/100, float64(k)/100)
	}
	if d := h.Delay(1); d != 0.95 {
		t.Errorf("100 latencies: Delay = %v, want 0.95", d)
	}
	h3 := mustHedger(t, HedgeConfig{Quantile: 0.5})
	for _, k := range order {
		h3.Record(0, float64(k)/100)
	}
	if d := h3.Delay(0); d != 0.5 {
		t.Errorf("median of 100: Delay = %v, want 0.5", d)
	}
}

// The tracker keeps the last Samples latencies and forgets those older than
// MaxAge.
func TestHedgerWindow(t *testing.T) {
	h := mustHedger(t, HedgeConfig{Samples: 20})
	for i := 0; i < 20; i++ {
		h.Record(0, 10) // pushed out below
	}
	for k := 1; k <= 20; k++ {
		h.Record(1, float64(k)/100)
	}
	if d := h.Delay(1); d != 0.19 {
		t.Errorf("after the ring turned: Delay = %v, want 0.19", d)
	}

	h = mustHedger(t, HedgeConfig{MaxAge: 10})
	for i := 0; i < 30; i++ {
		h.Record(0, 5)
	}
	for i := 0; i < 30; i++ {
		h.Record(5, 1)
	}
	for _, s := range []struct{ now, want float64 }{
		{9, 5},              // 60 latencies, half 5 s
		{10, 5},             // exactly MaxAge old: still counted
		{10.5, 1},           // the 5 s ones left
		{15, 1},             //
		{15.5, math.Inf(1)}, // all left
	} {
		if d := h.Delay(s.now); d != s.want {
			t.Errorf("Delay(%v) = %v, want %v", s.now, d, s.want)
		}
	}
}

// Against a naive tracker (the last Samples latencies, copied and sorted
// at every step) over random latencies, times and sizes.
func TestHedgerMatchesNaive(t *testing.T) {
	m := rng.New(5)
	for trial := 0; trial < 30; trial++ {
		c := HedgeConfig{Samples: MinHedgeSamples + int(m.Uint32()%60), Quantile: 0.5 + float64(m.Uint32()%499)/1000, MaxAge: 1 + float64(m.Uint32()%20)}
		h := mustHedger(t, c)
		type sample struct{ at, lat float64 }
		var kept []sample
		now := 0.0
		for step := 0; step < 600; step++ {
			now += m.Exp(0.2)
			lat := math.Floor(m.Exp(0.1)*1000) / 1000 // ties happen
			h.Record(now, lat)
			kept = append(kept, sample{now, lat})
			if len(kept) > c.Samples {
				kept = kept[1:]
			}
			var live []float64
			for _, s := range kept {
				if now-s.at <= c.MaxAge {
					live = append(live, s.lat)
				}
			}
			want := math.Inf(1)
			if len(live) >= MinHedgeSamples {
				sort.Float64s(live)
				rank := int(math.Ceil(c.Quantile * float64(len(live)))) // 1-based
				want = live[max(rank, 1)-1]
			}
			if got := h.Delay(now); got != want {
				t.Fatalf("trial %d step %d (%+v): Delay = %v, want %v", trial, step, c, got, want)
			}
		}
	}
}

func TestHedgerIgnoresBadInput(t *testing.T) {
	h := mustHedger(t, HedgeConfig{})
	for i := 0; i < MinHedgeSamples-1; i++ {
		h.Record(0, 0.1)
	}
	h.Record(0, -1)
	h.Record(0, math.NaN())
	h.Record(0, math.Inf(1))
	h.Record(math.NaN(), 0.1)
	h.Record(math.Inf(1), 0.1)
	if d := h.Delay(0); !math.IsInf(d, 1) {
		t.Fatalf("bad latencies were counted: Delay = %v", d)
	}
	h.Record(0, 0)
	if d := h.Delay(0); d != 0.1 {
		t.Fatalf("Delay = %v, want 0.1", d)
	}
	if d := h.Delay(math.NaN()); d != 0.1 {
		t.Fatalf("Delay(NaN) = %v, want 0.1 (nothing dropped)", d)
	}
}

// Hedges and retries share the Budget: two hedges spend the two tokens
// Max 2 holds, and then neither a hedge nor a retry is paid for.
func TestHedgesSpendTheRetryBudget(t *testing.T) {
	b := mustBudget(t, BudgetConfig{Max: 2, Ratio: 0.1})
	h := mustHedger(t, HedgeConfig{Budget: b})
	p := mustPolicy(t, Policy{Budget: b})
	if !h.TryHedge(0) || !h.TryHedge(0) {
		t.Fatal("the budget refused a hedge it holds tokens for")
	}
	if h.TryHedge(0) {
		t.Fatal("a hedge beyond the budget was allowed")
	}
	if _, v := p.Next(Attempt{N: 1, After: -1}, nil); v != StopBudget {
		t.Fatalf("a retry after the hedges spent the budget: %v, want StopBudget", v)
	}
	free := mustHedger(t, HedgeConfig{})
	for i := 0; i < 100; i++ {
		if !free.TryHedge(0) {
			t.Fatal("a Hedger without a budget refused a hedge")
		}
	}
}

// Run with -race.
func TestHedgerConcurrent(t *testing.T) {
	h := mustHedger(t, HedgeConfig{Samples: 64})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			m := rng.New(uint32(w))
			for i := 0; i < 2000; i++ {
				now := float64(i) / 100
				h.Record(now, m.Float64())
				if d := h.Delay(now); !(d >= 0 && d < 1) && !math.IsInf(d, 1) {
					t.Errorf("Delay = %v", d)
					return
				}
			}
		}(w)
	}
	wg.Wait()
}

func BenchmarkHedgerRecordDelay(b *testing.B) {
	h := mustHedger(b, HedgeConfig{})
	r := rng.New(1)
	b.ReportAllocs()
	now := 0.0
	for b.Loop() {
		now += 0.001
		h.Record(now, r.Float64())
		h.Delay(now)
	}
}
