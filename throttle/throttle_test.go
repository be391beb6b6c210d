package throttle

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

func mustNew(t testing.TB, c Config) *Throttle {
	t.Helper()
	th, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// The formula, with counts fed directly and the expected values worked out
// by hand.
func TestProbabilityTable(t *testing.T) {
	for _, c := range []struct {
		k                 float64
		requests, accepts int
		want              float64
	}{
		{0, 0, 0, 0},               // nothing counted
		{0, 10, 10, 0},             // (10 − 20)/11 < 0
		{0, 10, 0, 10.0 / 11},      // all refused
		{0, 100, 10, 80.0 / 101},   // (100 − 20)/101
		{0, 100, 50, 0},            // (100 − 100)/101
		{0, 100, 49, 2.0 / 101},    // (100 − 98)/101
		{0, 3, 1, 0.25},            // (3 − 2)/4
		{1, 100, 50, 50.0 / 101},   // K = 1: (100 − 50)/101
		{1.5, 100, 40, 40.0 / 101}, // (100 − 60)/101
		{4, 100, 10, 60.0 / 101},   // (100 − 40)/101
	} {
		th := mustNew(t, Config{K: c.k})
		for i := 0; i < c.requests; i++ {
			th.Allow(0, 0.5)
		}
		for i := 0; i < c.accepts; i++ {
			th.Record(0, true)
		}
		th.Record(0, false) // a refusal changes no count
		if r, a := th.Counts(0); r != int64(c.requests) || a != int64(c.accepts) {
			t.Errorf("K=%v: Counts = %d, %d, want %d, %d", c.k, r, a, c.requests, c.accepts)
		}
		if got := th.Probability(0); got != c.want {
			t.Errorf("K=%v requests=%d accepts=%d: Probability = %v, want %v", c.k, c.requests, c.accepts, got, c.want)
		}
	}
}

// Allow decides with the probability of the counts before the request, then
// counts the request whether it let it through or not.
func TestAllowSteps(t *testing.T) {
	th := mustNew(t, Config{})
	for i, s := range []struct {
		accept bool // Record(0, true) before the Allow
		u      float64
		ok     bool
		p      float64 // Probability after the step
	}{
		{false, 0, true, 0.5},              // p = 0: allowed even with u = 0; then 1 request, 0 accepts
		{false, 0.49, false, 2.0 / 3},      // p = 1/2
		{false, 0.67, true, 0.75},          // p = 2/3 ≤ 0.67
		{true, 0.25, true, 0.4},            // accept: p = (3 − 2)/4 = 0.25, not above u; then (4 − 2)/5
		{false, 0.39, false, 0.5},          // p = 0.4; then (5 − 2)/6
		{false, math.NaN(), true, 4.0 / 7}, // NaN allows
		{false, 1, true, 5.0 / 8},          // u ≥ 1 allows
		{false, -0.1, false, 6.0 / 9},      // u < 0 rejects when p > 0
		{true, -0.1, false, 5.0 / 10},      // p = (8 − 4)/9 still > 0
	} {
		if s.accept {
			th.Record(0, true)
		}
		if got := th.Allow(0, s.u); got != s.ok {
			t.Fatalf("step %d: Allow(0, %v) = %v, want %v", i, s.u, got, s.ok)
		}
		if got := th.Probability(0); got != s.p {
			t.Fatalf("step %d: Probability = %v, want %v", i, got, s.p)
		}
	}
	// With p = 0, even u < 0 is allowed.
	th = mustNew(t, Config{})
	th.Allow(0, 0.5)
	th.Record(0, true)
	if !th.Allow(0, -1) {
		t.Fatal("Allow with p = 0 and u < 0 rejected")
	}
}

// Counts leave the window slice by slice.
func TestWindowExpiry(t *testing.T) {
	th := mustNew(t, Config{Window: 10, Buckets: 10}) // slices of 1 s
	for i := 0; i < 5; i++ {
		th.Allow(0.5, 0.99) // slice 0
	}
	for i := 0; i < 3; i++ {
		th.Allow(3.2, 0.99) // slice 3
	}
	th.Record(3.5, true)
	for i, s := range []struct {
		now               float64
		requests, accepts int64
		p                 float64
	}{
		{9.99, 8, 1, 6.0 / 9},  // slices 0..9
		{10, 3, 1, 1.0 / 4},    // slice 0 left
		{12.99, 3, 1, 1.0 / 4}, //
		{13, 0, 0, 0},          // slice 3 left
		{1e6, 0, 0, 0},         // a long jump
	} {
		r, a := th.Counts(s.now)
		if r != s.requests || a != s.accepts {
			t.Fatalf("step %d at %v: Counts = %d, %d, want %d, %d", i, s.now, r, a, s.requests, s.accepts)
		}
		if got := th.Probability(s.now); got != s.p {
			t.Fatalf("step %d at %v: Probability = %v, want %v", i, s.now, got, s.p)
		}
	}
	// Time going backwards counts in the newest slice (1e6's).
	th.Allow(5, 0.99)
	if r, _ := th.Counts(1e6 + 9.99); r != 1 {
		t.Fatalf("a request at an earlier time: %d requests in the window, want 1", r)
	}
	if r, _ := th.Counts(1e6 + 10); r != 0 {
		t.Fatalf("a request at an earlier time did not leave with its slice: %d requests", r)
	}
}

// A window of Buckets slices that is advanced one slice at a time keeps the
// right totals when the slice ring wraps many times.
func TestWindowSlidesOverManyRounds(t *testing.T) {
	th := mustNew(t, Config{Window: 4, Buckets: 4})
	for s := 0; s < 40; s++ {
		now := float64(s) + 0.5
		for i := 0; i <= s%3; i++ { // 1, 2, 3, 1, 2, 3, … requests per slice
			th.Allow(now, 0.99)
		}
		if s%2 == 0 {
			th.Record(now, true)
		}
		if s < 3 {
			continue
		}
		// The last four slices hold 1+2+3 plus one of 1, 2 or 3 requests:
		// the sum of (k%3)+1 over k = s−3..s; and two accepts.
		var want int64
		for k := s - 3; k <= s; k++ {
			want += int64(k%3) + 1
		}
		if r, a := th.Counts(now); r != want || a != 2 {
			t.Fatalf("slice %d: Counts = %d, %d, want %d, 2", s, r, a, want)
		}
	}
}

// A backend that can accept A = 10 requests per second of a demand of
// R = 100 per second: the throttle settles where p = 1 − K·A/R (by hand:
// K = 2 → 0.8, K = 1.5 → 0.85, K = 4 → 0.6) and the client sends about
// K·A per second (a binomial count: over 480 s its standard deviation is
// about 1% of the mean, the tolerance 5%). A backend that accepts everything is never throttled.
func TestConvergence(t *testing.T) {
	for _, c := range []struct {
		k, capacity float64 // capacity: accepts per second
		wantP       float64
		wantSent    float64 // per second
	}{
		{2, 10, 0.8, 20},
		{1.5, 10, 0.85, 15},
		{4, 10, 0.6, 40},
		{2, 1000, 0, 100},
	} {
		th := mustNew(t, Config{K: c.k})
		m := rng.New(7)
		credit := 0.0 // the backend: a token bucket of rate capacity, burst 10
		sent := 0
		const steps = 60000 // 600 s at 100 attempts per second
		for i := 0; i < steps; i++ {
			now := float64(i) / 100
			credit = math.Min(10, credit+c.capacity/100)
			if !th.Allow(now, m.Float64()) {
				continue
			}
			if i >= 12000 { // after the first window: 480 s
				sent++
			}
			ok := credit >= 1
			if ok {
				credit--
			}
			th.Record(now, ok)
		}
		p := th.Probability(float64(steps-1) / 100)
		if math.Abs(p-c.wantP) > 0.01 {
			t.Errorf("K=%v capacity=%v: p = %v, want %v ± 0.01", c.k, c.capacity, p, c.wantP)
		}
		if got := float64(sent) / 480; math.Abs(got-c.wantSent) > 0.05*c.wantSent {
			t.Errorf("K=%v capacity=%v: sent %v per second, want %v ± 5%%", c.k, c.capacity, got, c.wantSent)
		}
	}
}

// Many goroutines share one Throttle; run with -race. No count is lost.
func TestConcurrent(t *testing.T) {
	th := mustNew(t, Config{})
	const workers, perWorker = 8, 2000
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			m := rng.New(uint32(w))
			for i := 0; i < perWorker; i++ {
				th.Allow(1, m.Float64())
				th.Record(1, i%2 == 0)
				if i%100 == 0 {
					if p := th.Probability(1); !(p >= 0 && p < 1) {
						t.Errorf("Probability = %v", p)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	if r, a := th.Counts(1); r != workers*perWorker || a != workers*perWorker/2 {
		t.Fatalf("Counts = %d, %d, want %d, %d", r, a, workers*perWorker, workers*perWorker/2)
	}
}

// Goroutines cross slice boundaries together; run with -race. The counts
// stay within what was counted, and once the window has slid past every
// slice one slice at a time (so no reset hides an error) they are exactly
// zero: overlapping calls may go uncounted, but never drift the totals.
func TestConcurrentAcrossSlices(t *testing.T) {
	th := mustNew(t, Config{Window: 1, Buckets: 10}) // slices of 0.1 s
	const workers, perWorker = 4, 3000
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				now := float64(i) / 1000 // 3 s, 30 slices
				th.Allow(now, 0.5)
				th.Record(now, i%3 != 0)
				if r, a := th.Counts(now); r < 0 || a < 0 || r > workers*perWorker || a > workers*perWorker {
					t.Errorf("at %v: Counts = %d, %d", now, r, a)
					return
				}
			}
		}()
	}
	wg.Wait()
	for k := 0; k <= 10; k++ {
		th.Counts(3 + float64(k)/10)
	}
	if r, a := th.Counts(4.05); r != 0 || a != 0 {
		t.Fatalf("after the window slid past: Counts = %d, %d, want 0, 0", r, a)
	}
}

// Nonsense times neither panic nor corrupt the counts.
func TestHostileTimes(t *testing.T) {
	th := mustNew(t, Config{})
	for _, now := range []float64{math.NaN(), -1e300, math.Inf(-1), 0, 5, math.NaN(), 1e300, math.Inf(1), math.MaxFloat64, 3} {
		th.Allow(now, 0.99)
		th.Record(now, true)
		r, a := th.Counts(now)
		if r < 0 || a < 0 || r > 10 || a > 10 {
			t.Fatalf("at %v: Counts = %d, %d", now, r, a)
		}
		if p := th.Probability(now); !(p >= 0 && p < 1) {
			t.Fatalf("at %v: Probability = %v", now, p)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		c     Config
		field string // "" means valid
	}{
		{Config{}, ""},
		{Config{K: 1, Window: 0.5, Buckets: 1}, ""},
		{Config{K: 3, Window: 60, Buckets: MaxBuckets}, ""},
		{Config{K: 0.5}, "K"},
		{Config{K: -2}, "K"},
		{Config{K: math.NaN()}, "K"},
		{Config{K: math.Inf(1)}, "K"},
		{Config{Window: -1}, "Window"},
		{Config{Window: math.NaN()}, "Window"},
		{Config{Window: math.Inf(1)}, "Window"},
		{Config{Buckets: -1}, "Buckets"},
		{Config{Buckets: MaxBuckets + 1}, "Buckets"},
	} {
		th, err := New(c.c)
		var ce *ConfigError
		switch {
		case c.field == "" && (err != nil || th == nil):
			t.Errorf("%+v: unexpected error %v", c.c, err)
		case c.field != "" && (err == nil || th != nil):
			t.Errorf("%+v: no error, want one about %s", c.c, c.field)
		case c.field != "" && (!errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != c.field || ce.Reason == ""):
			t.Errorf("%+v: error %#v does not wrap ErrConfig or name %s", c.c, err, c.field)
		}
	}
}

func BenchmarkAllowRecord(b *testing.B) {
	th := mustNew(b, Config{})
	b.ReportAllocs()
	now := 0.0
	for i := 0; b.Loop(); i++ {
		now += 0.001 // a new slice every 1000 requests
		if th.Allow(now, 0.5) {
			th.Record(now, i%4 != 0)
		}
	}
}

func BenchmarkAllowRecordParallel(b *testing.B) {
	th := mustNew(b, Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if th.Allow(1, 0.5) {
				th.Record(1, i%4 != 0)
			}
		}
	})
}
