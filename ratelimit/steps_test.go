package ratelimit

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// step is one request of a step table and the decision it must get. The
// expected values are worked out by hand from the seed's formulas.
type step struct {
	t    float64
	cost int
	want Decision
}

var inf = math.Inf(1)

func ok(rem int, reset float64) Decision {
	return Decision{Allowed: true, Remaining: rem, Reset: reset}
}

func no(rem int, reset, retry float64) Decision {
	return Decision{Remaining: rem, Reset: reset, RetryAfter: retry}
}

// near reports whether a and b agree to 1e-9 (the hand-worked values are
// decimals such as 0.1 that float64 cannot hold exactly), or are both +Inf.
func near(a, b float64) bool {
	if math.IsInf(a, 1) || math.IsInf(b, 1) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9
}

func sameDecision(a, b Decision) bool {
	return a.Allowed == b.Allowed && a.Remaining == b.Remaining && near(a.RetryAfter, b.RetryAfter) &&
		near(a.Reset, b.Reset) && near(a.Delay, b.Delay) && near(a.Start, b.Start)
}

func runSteps[S any](t *testing.T, alg Decider[S], steps []step) {
	t.Helper()
	var s S
	for i, st := range steps {
		if got := alg.Decide(&s, st.t, st.cost); !sameDecision(got, st.want) {
			t.Errorf("step %d (t=%v cost=%d):\n got  %+v\n want %+v", i, st.t, st.cost, got, st.want)
		}
	}
}

// bucketSteps is the seed's vector (r = 2, b = 5: five requests at t = 0 pass,
// the sixth is refused with retry-after 0.5 s) and its continuation, which the
// token bucket, the leaky meter and GCRA must all answer the same way.
var bucketSteps = []step{
	{0, 1, ok(4, 0.5)},
	{0, 1, ok(3, 1)},
	{0, 1, ok(2, 1.5)},
	{0, 1, ok(1, 2)},
	{0, 1, ok(0, 2.5)},
	{0, 1, no(0, 2.5, 0.5)}, // the seed's sixth request
	{0.5, 1, ok(0, 2.5)},    // retried exactly after 0.5 s
	{0.5, 1, no(0, 2.5, 0.5)},
	{10, 1, ok(4, 0.5)}, // refilled to the burst, not beyond
	{10, 3, ok(1, 2)},   // cost 3
	{10, 2, no(1, 2, 0.5)},
	{10, 6, no(1, 2, inf)}, // more than the burst: never
	{10, 0, ok(1, 2)},      // a query
	{10, -4, ok(1, 2)},     // a negative cost is a query too
}

func TestBucketSteps(t *testing.T) {
	l := Limit{Rate: 2, Burst: 5}
	tb, err := NewTokenBucket(l)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := NewLeakyMeter(l)
	g, _ := NewGCRA(l)
	t.Run("token bucket", func(t *testing.T) { runSteps(t, tb, bucketSteps) })
	t.Run("leaky meter", func(t *testing.T) { runSteps(t, m, bucketSteps) })
	t.Run("GCRA", func(t *testing.T) { runSteps(t, g, bucketSteps) })
}

// Rate 10 releases one unit every 0.1 s; 3 may wait.
func TestLeakyQueueSteps(t *testing.T) {
	q, err := NewLeakyQueue(Limit{Rate: 10, Burst: 3})
	if err != nil {
		t.Fatal(err)
	}
	delayed := func(rem int, reset, delay, start float64) Decision {
		return Decision{Allowed: true, Remaining: rem, Reset: reset, Delay: delay, Start: start}
	}
	runSteps(t, q, []step{
		{0, 1, delayed(3, 0, 0, 0)}, // leaves at once, so it does not wait
		{0, 1, delayed(2, 0.1, 0.1, 0.1)},
		{0, 1, delayed(1, 0.2, 0.2, 0.2)},
		{0, 1, delayed(0, 0.3, 0.3, 0.3)},
		{0, 1, no(0, 0.3, 0.1)}, // full until the unit of 0.1 s leaves
		{0.1, 1, delayed(0, 0.3, 0.3, 0.4)},
		{0.1, 2, no(0, 0.3, 0.2)},     // two must leave: the second at 0.3 s
		{0.1, 4, no(0, 0.3, inf)},     // more than the queue: never
		{0.1, 0, ok(0, 0.3)},          // a query
		{5, 3, delayed(1, 0.2, 0, 5)}, // leaves at 5, 5.1, 5.2
	})
}

func TestFixedWindowSteps(t *testing.T) {
	fw, err := NewFixedWindow(Quota{Limit: 3, Window: 10})
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, fw, []step{
		{0, 1, ok(2, 10)},
		{1, 1, ok(1, 9)},
		{2, 1, ok(0, 8)},
		{3, 1, no(0, 7, 7)}, // time left in the window
		{9.5, 1, no(0, 0.5, 0.5)},
		{10, 1, ok(2, 10)}, // new window
		{11, 2, ok(0, 9)},
		{12, 4, no(0, 8, inf)},
		{12, 0, ok(0, 8)},
		{35, 1, ok(2, 5)}, // several windows later
	})
}

func TestSlidingLogSteps(t *testing.T) {
	l, err := NewSlidingLog(Quota{Limit: 3, Window: 10})
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, l, []step{
		{0, 1, ok(2, 10)},
		{1, 1, ok(1, 10)},
		{2, 1, ok(0, 10)},
		{5, 1, no(0, 7, 5)}, // until the entry of t = 0 leaves
		{10, 1, ok(0, 10)},  // it left: 0 ≤ 10 − 10
		{10, 2, no(0, 10, 2)},
		{4, 1, no(0, 16, 7)}, // clock stepped back: counted at t = 10
		{10, 4, no(0, 10, inf)},
	})
}

// Limit 10 per 10 s; ten requests at t = 5, then into the next windows.
func TestSlidingCounterSteps(t *testing.T) {
	sc, err := NewSlidingCounter(Quota{Limit: 10, Window: 10})
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	for i := range 10 {
		steps = append(steps, step{5, 1, ok(9-i, 15)})
	}
	steps = append(steps,
		step{5, 1, no(0, 15, 5+1e-9)},   // cur is full: the next window, once prev·weight < 10 (1 ns after 10)
		step{12, 1, ok(1, 18)},          // weight 0.8: 10·0.8 + 0 < 10
		step{12, 1, ok(0, 18)},          // 8 + 1 < 10
		step{12, 1, no(0, 18, 0)},       // 8 + 2 is not < 10; allowed just after 12
		step{25, 1, ok(8, 15)},          // prev 2 · 0.5 + 0 < 10
		step{50, 1, ok(9, 20)},          // windows skipped: prev 0
		step{50, 11, no(9, 20, inf)},    // more than the limit
		step{50, 0, ok(9, 20)},          // a query
		step{50, 9, ok(0, 20)},          // cost 9: 0 + (1 + 9 − 1) < 10
		step{50, 1, no(0, 20, 10+1e-9)}, // next window: prev 10, weight must fall below 1 (1 ns after 60)
		step{60, 1, no(0, 10, 0)},       // weight exactly 1 at the window start
		step{65, 5, ok(0, 15)},          // 10·0.5 + (0 + 5 − 1) < 10
		step{65, 1, no(0, 15, 0)},       // 10·w must fall below 10 − 5: just after 65
		step{1e6, 1, ok(9, 20)},         // a long pause empties it
	)
	runSteps(t, sc, steps)
}

func TestConstructorErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   error
		field string
	}{
		{"zero rate", errOf(NewGCRA(Limit{Rate: 0, Burst: 1})), "Rate"},
		{"negative rate", errOf(NewTokenBucket(Limit{Rate: -1, Burst: 1})), "Rate"},
		{"NaN rate", errOf(NewLeakyMeter(Limit{Rate: math.NaN(), Burst: 1})), "Rate"},
		{"infinite rate", errOf(NewLeakyQueue(Limit{Rate: inf, Burst: 1})), "Rate"},
		{"tiny rate", errOf(NewGCRA(Limit{Rate: 1e-320, Burst: 1})), "Rate"},
		{"zero burst", errOf(NewGCRA(Limit{Rate: 1, Burst: 0})), "Burst"},
		{"huge burst", errOf(NewTokenBucket(Limit{Rate: 1, Burst: MaxBurst + 1})), "Burst"},
		{"burst/rate overflow", errOf(NewGCRA(Limit{Rate: 1e-300, Burst: 1 << 30})), "Burst"},
		{"zero limit", errOf(NewFixedWindow(Quota{Limit: 0, Window: 1})), "Limit"},
		{"log limit", errOf(NewSlidingLog(Quota{Limit: MaxLogLimit + 1, Window: 1})), "Limit"},
		{"zero window", errOf(NewSlidingCounter(Quota{Limit: 1, Window: 0})), "Window"},
		{"infinite window", errOf(NewSlidingLog(Quota{Limit: 1, Window: inf})), "Window"},
	} {
		if !errors.Is(c.err, ErrInvalidLimit) {
			t.Errorf("%s: err = %v, want ErrInvalidLimit", c.name, c.err)
			continue
		}
		if msg := c.err.Error(); !strings.HasPrefix(msg, "ratelimit: ") || !strings.Contains(msg, c.field) {
			t.Errorf("%s: message %q should start with ratelimit: and name %s", c.name, msg, c.field)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }
