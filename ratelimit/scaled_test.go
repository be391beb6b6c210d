package ratelimit

import (
	"context"
	"math"
	"sync"
	"testing"
)

func TestClassCurveScale(t *testing.T) {
	for _, c := range []struct {
		curve ClassCurve
		h     float64
		want  float64
	}{
		{ClassCurve{0, 1}, 1, 1},
		{ClassCurve{0, 1}, 0.3, 0.3},
		{ClassCurve{0, 1}, 0, 0},
		{ClassCurve{0, 1}, -2, 0},
		{ClassCurve{0, 1}, 7, 1},
		{ClassCurve{0, 0}, 0, 1}, // critical: full rate at any health
		{ClassCurve{0, 0}, 0.5, 1},
		{ClassCurve{0.5, 1}, 0.75, 0.5},
		{ClassCurve{0.5, 1}, 0.5, 0},
		{ClassCurve{0.5, 1}, 0.2, 0},
		{ClassCurve{0.2, 0.6}, 0.5, 0.75},
		{ClassCurve{0.5, 1}, math.NaN(), 1}, // an unusable signal sheds nothing
	} {
		if got := c.curve.Scale(c.h); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("%+v.Scale(%v) = %v, want %v", c.curve, c.h, got, c.want)
		}
	}
}

// memAdmitAt counts the cost-1 requests key gets at now in class before the
// first refusal (at most 100).
func memAdmitAt(m *Memory, key string, class int, now float64) (n int, refusal Decision) {
	for n < 100 {
		d := m.AllowClassN(key, class, now, 1)
		if !d.Allowed {
			return n, d
		}
		n++
	}
	return n, Decision{}
}

// A step table of scales: what a fresh key gets at one instant (the scaled
// burst), and how a used key's state carries over.
func TestMemorySetScaleSteps(t *testing.T) {
	gcra := mustMemory(t, Spec{Rate: 10, Per: 1, Burst: 10}, MemoryConfig{})
	tb := mustMemory(t, Spec{Algorithm: AlgTokenBucket, Rate: 10, Per: 1, Burst: 10}, MemoryConfig{})
	fw := mustMemory(t, Spec{Algorithm: AlgFixedWindow, Rate: 10, Per: 60}, MemoryConfig{})
	for _, m := range []*Memory{gcra, tb} {
		for range 4 {
			m.AllowClassN("used", 0, 0, 1) // 4 of 10 used at scale 1
		}
	}
	for i, s := range []struct {
		m     *Memory
		scale float64
		key   string
		admit int
		retry float64 // of the refusal
	}{
		{gcra, 0.5, "fresh-1", 5, 0.2},  // Burst ⌊10·0.5⌋ = 5 at 5/s
		{gcra, 0.5, "used", 3, 0.2},     // TAT 0.4 against τ = 4·0.2: 0.4, 0.6, 0.8 pass
		{tb, 0.5, "used", 5, 0.2},       // 6 tokens cut to the scaled Burst 5
		{gcra, 0.25, "fresh-2", 2, 0.4}, // ⌊2.5⌋ = 2 at 2.5/s
		{gcra, 0.01, "fresh-3", 1, 10},  // Burst at least 1, at 0.1/s
		{gcra, 0, "fresh-4", 0, 1},      // closed: RetryAfter is the period
		{gcra, -3, "fresh-5", 0, 1},     // clamped to 0
		{gcra, 1, "fresh-6", 10, 0.1},   // the rule itself again
		{gcra, math.NaN(), "fresh-7", 10, 0.1},
		{fw, 0.25, "w-1", 2, 60}, // ⌊10·0.25⌋ per window; retry at the window's end
		{fw, 0.05, "w-2", 0, 60}, // ⌊0.5⌋ = 0: closed
		{fw, 1, "w-3", 10, 60},
	} {
		s.m.SetScale(s.scale)
		n, d := memAdmitAt(s.m, s.key, 0, 0)
		if n != s.admit || math.Abs(d.RetryAfter-s.retry) > 1e-9 {
			t.Errorf("step %d %+v: admitted %d, refusal %+v", i, s, n, d)
		}
	}
	gcra.SetScale(0)
	if d := gcra.AllowClassN("q", 0, 0, 0); !d.Allowed {
		t.Errorf("a query on a closed class: %+v, want allowed", d)
	}
}

// Lower classes first: critical keeps its rate, default scales with health,
// sheddable has nothing left at half health.
func TestMemoryClassesByHealth(t *testing.T) {
	m := mustMemory(t, Spec{Rate: 10, Per: 1, Burst: 10},
		MemoryConfig{Classes: []ClassCurve{{0, 0}, {0, 1}, {0.5, 1}}})
	for i, s := range []struct {
		health float64
		admit  [4]int // per class; class 3 is beyond the last and counts as 2
	}{
		{1, [4]int{10, 10, 10, 10}},
		{0.75, [4]int{10, 7, 5, 5}},
		{0.4, [4]int{10, 4, 0, 0}},
		{0, [4]int{10, 0, 0, 0}},
	} {
		m.SetHealth(s.health)
		for c := range 4 {
			key := string(rune('a'+i)) + string(rune('0'+c)) // a fresh key per step and class
			if n, _ := memAdmitAt(m, key, c, 0); n != s.admit[c] {
				t.Errorf("health %v class %d: admitted %d, want %d (scale %v)", s.health, c, n, s.admit[c], m.Scale(c))
			}
		}
	}
	// A key's state is shared by the classes: what critical spent, default
	// cannot spend again.
	m.SetHealth(1)
	for range 6 {
		m.AllowClassN("shared", 0, 0, 1)
	}
	if n, _ := memAdmitAt(m, "shared", 1, 0); n != 4 {
		t.Errorf("default after critical spent 6: %d, want 4", n)
	}
	// ForClass is the same as AllowClassN.
	m.SetHealth(0)
	if d, _ := m.ForClass(2).AllowN(context.Background(), "x", 0, 1); d.Allowed {
		t.Error("sheddable allowed at health 0")
	}
	if d, _ := m.ForClass(0).AllowN(context.Background(), "x", 0, 1); !d.Allowed {
		t.Error("critical refused at health 0")
	}
}

// Health is polled at most once per HealthInterval of the decisions' time.
func TestMemoryHealthPolling(t *testing.T) {
	healths := []float64{1, 0.5, 0.2}
	calls := 0
	m := mustMemory(t, Spec{Rate: 10, Per: 1, Burst: 10}, MemoryConfig{
		HealthInterval: 1,
		Health: func() float64 {
			h := healths[min(calls, len(healths)-1)]
			calls++
			return h
		},
	})
	for i, s := range []struct {
		now   float64
		calls int
		scale float64
	}{
		{0, 1, 1},
		{0.5, 1, 1},
		{0.99, 1, 1},
		{1.0, 2, 0.5},
		{1.5, 2, 0.5},
		{0.2, 2, 0.5}, // time going back does not poll
		{2.2, 3, 0.2},
		{2.3, 3, 0.2},
	} {
		m.AllowN(context.Background(), "k", s.now, 1)
		if calls != s.calls || m.Scale(0) != s.scale {
			t.Errorf("step %d at %v: %d calls, scale %v; want %d, %v", i, s.now, calls, m.Scale(0), s.calls, s.scale)
		}
	}
}

// Scales published while other goroutines decide: for the race detector,
// and decisions stay within the largest configuration.
func TestMemoryScaleConcurrent(t *testing.T) {
	m := mustMemory(t, Spec{Rate: 1, Per: 3600, Burst: 50}, MemoryConfig{Classes: []ClassCurve{{0, 0}, {0.3, 1}}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if d := m.AllowClassN("k", (i+g)%2, 1, 1); d.Allowed {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		}()
	}
	for i := range 200 {
		m.SetHealth(float64(i%10) / 10)
	}
	wg.Wait()
	if admitted > 50 {
		t.Errorf("%d admitted, the full burst is 50", admitted)
	}
}

// A scale cut leaves states holding more than the scaled capacity; Remaining
// must read 0 then, not a negative number (or, for the fixed window's
// unsigned count, a wrapped-around huge one) that would reach RateLimit: r=.
func TestRemainingNeverNegativeAfterScaleCut(t *testing.T) {
	for _, alg := range []Algorithm{AlgFixedWindow, AlgSlidingLog, AlgLeakyMeter, AlgLeakyQueue, AlgGCRA, AlgTokenBucket, AlgSlidingCounter} {
		spec := Spec{Algorithm: alg, Rate: 10, Per: 100}
		m, err := NewMemory(spec, MemoryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for i := 0; i < 10; i++ {
			if d, _ := m.AllowN(ctx, "k", 1, 1); !d.Allowed {
				t.Fatalf("%v: request %d refused before the cut", alg, i)
			}
		}
		m.SetScale(0.5)
		d, err := m.AllowN(ctx, "k", 1, 0) // a query
		if err != nil || d.Remaining != 0 {
			t.Errorf("%v: Remaining after a cut to half = %d (err %v), want 0", alg, d.Remaining, err)
		}
	}
}
