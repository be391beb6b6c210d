package retry

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

func mustBudget(t testing.TB, c BudgetConfig) *Budget {
	t.Helper()
	b, err := NewBudget(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type budgetStep struct {
	op     string // "req" or "retry"
	now    float64
	ok     bool // for "retry": the expected answer
	tokens float64
}

func runBudgetSteps(t *testing.T, b *Budget, steps []budgetStep) {
	t.Helper()
	for i, s := range steps {
		switch s.op {
		case "req":
			b.RecordRequest(s.now)
		case "retry":
			if got := b.TryRetry(s.now); got != s.ok {
				t.Fatalf("step %d: TryRetry(%v) = %v, want %v", i, s.now, got, s.ok)
			}
		}
		if got := b.Tokens(); got != s.tokens {
			t.Fatalf("step %d (%s at %v): tokens = %v (%b), want %v", i, s.op, s.now, got, got, s.tokens)
		}
	}
}

// The seed's budget adds 0.1 per request with float64 arithmetic: ten
// deposits from 0 make 0.9999999999999999, not 1, so the next retry is
// refused. The expected values were computed with Python floats.
func TestBudgetFloatSemantics(t *testing.T) {
	b := mustBudget(t, BudgetConfig{Max: 10, Ratio: 0.1})
	var steps []budgetStep
	steps = append(steps, budgetStep{"req", 0, false, 10}) // full: min(10, 10.1)
	for i := 9; i >= 0; i-- {
		steps = append(steps, budgetStep{"retry", 0, true, float64(i)})
	}
	steps = append(steps, budgetStep{"retry", 0, false, 0})
	for _, tok := range []float64{0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6, 0.7,
		0.7999999999999999, 0.8999999999999999, 0.9999999999999999} {
		steps = append(steps, budgetStep{"req", 1, false, tok})
	}
	steps = append(steps,
		budgetStep{"retry", 2, false, 0.9999999999999999},
		budgetStep{"req", 2, false, 1.0999999999999999},
		budgetStep{"retry", 2, true, 0.09999999999999987},
		budgetStep{"retry", 2, false, 0.09999999999999987},
	)
	runBudgetSteps(t, b, steps)
}

// Fifteen deposits of 0.1 from 0 with Max 1 stop at exactly 1.
func TestBudgetCapsAtMax(t *testing.T) {
	b := mustBudget(t, BudgetConfig{Max: 1, Ratio: 0.1})
	if !b.TryRetry(0) {
		t.Fatal("a full budget of 1 token refused a retry")
	}
	for i := 0; i < 15; i++ {
		b.RecordRequest(0)
	}
	if got := b.Tokens(); got != 1 {
		t.Fatalf("tokens = %v, want 1", got)
	}
	if !b.TryRetry(0) || b.TryRetry(0) {
		t.Fatal("with exactly 1 token: want one retry, then none")
	}
}

func TestBudgetZeroConfigIsSeedBudget(t *testing.T) {
	b := mustBudget(t, BudgetConfig{})
	if got := b.Tokens(); got != 10 {
		t.Fatalf("starts with %v tokens, want 10", got)
	}
	for i := 0; i < 10; i++ {
		b.TryRetry(0)
	}
	b.RecordRequest(0)
	if got := b.Tokens(); got != 0.1 {
		t.Fatalf("after one request from empty: %v tokens, want 0.1", got)
	}
}

// Property: under a flood of failures (every request retried until the
// budget says no), the budget never allows more than Max + Ratio × requests
// retries — and, so that it is not trivially strict, at least one fewer.
func TestBudgetFloodBound(t *testing.T) {
	m := rng.New(7)
	for trial := 0; trial < 300; trial++ {
		c := BudgetConfig{Max: float64(1 + m.Uint32()%50), Ratio: float64(1+m.Uint32()%1000) / 1000}
		b := mustBudget(t, c)
		requests, retries := 0, 0
		n := int(m.Uint32() % 5000)
		for i := 0; i < n; i++ {
			b.RecordRequest(float64(i))
			requests++
			for k := 0; k < 3 && m.Float64() < 0.9; k++ { // the request fails, up to 3 retries
				if !b.TryRetry(float64(i)) {
					break
				}
				retries++
			}
		}
		bound := c.Max + c.Ratio*float64(requests)
		if float64(retries) > bound+1e-9 {
			t.Fatalf("%+v: %d retries for %d requests, bound %v", c, retries, requests, bound)
		}
	}
}

// When every request is retried until the budget refuses and Max ≥ 1 + Ratio,
// the bucket never overflows after the first deposit (lost to a full bucket),
// so the total comes within 1 + Ratio of the bound: the budget is not
// stricter than it says.
func TestBudgetFloodUsesTheBudget(t *testing.T) {
	m := rng.New(8)
	for trial := 0; trial < 300; trial++ {
		c := BudgetConfig{Max: float64(2 + m.Uint32()%50), Ratio: float64(1+m.Uint32()%1000) / 1000}
		b := mustBudget(t, c)
		n := 1 + int(m.Uint32()%5000)
		retries := 0
		for i := 0; i < n; i++ {
			b.RecordRequest(float64(i))
			for b.TryRetry(float64(i)) {
				retries++
			}
		}
		bound := c.Max + c.Ratio*float64(n)
		if got := float64(retries); got > bound+1e-9 || got < bound-1-c.Ratio-1e-9*float64(n) {
			t.Fatalf("%+v: %d retries for %d requests, want within [%v, %v]", c, retries, n, bound-1-c.Ratio, bound)
		}
	}
}

// Many goroutines share one budget; run with -race. The total stays within
// the bound however the calls interleave.
func TestBudgetConcurrent(t *testing.T) {
	b := mustBudget(t, BudgetConfig{Max: 10, Ratio: 0.1})
	const workers, perWorker = 8, 5000
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := 0
			for i := 0; i < perWorker; i++ {
				b.RecordRequest(0)
				for b.TryRetry(0) {
					mine++
				}
			}
			mu.Lock()
			total += mine
			mu.Unlock()
		}()
	}
	wg.Wait()
	bound := 10 + 0.1*workers*perWorker
	if float64(total) > bound || float64(total) < bound-2 {
		t.Fatalf("%d retries for %d requests; want within [%v, %v]", total, workers*perWorker, bound-2, bound)
	}
}

// The floor bucket pays for retries the proportional bucket cannot, at
// MinPerSecond per second of the times passed in, up to max(1, ⌈MinPerSecond⌉).
func TestBudgetFloor(t *testing.T) {
	b := mustBudget(t, BudgetConfig{Max: 1, Ratio: 0.001, MinPerSecond: 2})
	for i, s := range []struct {
		now float64
		ok  bool
	}{
		{0, true},     // proportional bucket's single token
		{0, true},     // floor bucket starts full: 2 tokens
		{0, true},     //
		{0, false},    // both empty
		{0.25, false}, // floor 0.5
		{0.5, true},   // floor 1
		{0.5, false},  //
		{0.4, false},  // time going backwards adds nothing
		{10, true},    // refilled to the cap of 2
		{10, true},    //
		{10, false},   //
		{math.NaN(), false},
		{10.5, true}, // a NaN time did not break the clock
	} {
		if got := b.TryRetry(s.now); got != s.ok {
			t.Fatalf("step %d: TryRetry(%v) = %v, want %v", i, s.now, got, s.ok)
		}
	}
}

func TestBudgetConfigValidate(t *testing.T) {
	for _, c := range []struct {
		c     BudgetConfig
		field string
	}{
		{BudgetConfig{}, ""},
		{BudgetConfig{Max: 5, Ratio: 0.2, MinPerSecond: 1}, ""},
		{BudgetConfig{Max: -1}, "BudgetConfig.Max"},
		{BudgetConfig{Max: math.Inf(1)}, "BudgetConfig.Max"},
		{BudgetConfig{Ratio: math.NaN()}, "BudgetConfig.Ratio"},
		{BudgetConfig{Ratio: -0.1}, "BudgetConfig.Ratio"},
		{BudgetConfig{MinPerSecond: -3}, "BudgetConfig.MinPerSecond"},
	} {
		b, err := NewBudget(c.c)
		switch {
		case c.field == "" && (err != nil || b == nil):
			t.Errorf("%+v: unexpected error %v", c.c, err)
		case c.field != "" && (err == nil || b != nil):
			t.Errorf("%+v: no error, want one about %s", c.c, c.field)
		case c.field != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.field)):
			t.Errorf("%+v: error %q does not wrap ErrConfig or name %s", c.c, err, c.field)
		}
	}
}

func BenchmarkBudget(b *testing.B) {
	bu := mustBudget(b, BudgetConfig{})
	b.ReportAllocs()
	for b.Loop() {
		bu.RecordRequest(0)
		bu.TryRetry(0)
	}
}

func BenchmarkBudgetParallel(b *testing.B) {
	bu := mustBudget(b, BudgetConfig{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bu.RecordRequest(0)
			bu.TryRetry(0)
		}
	})
}
