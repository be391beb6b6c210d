package shed

import (
	"errors"
	"math"
	"testing"
)

// dstep is one dequeue at an explicit instant: the entry enqueued at `at` is
// offered to Drop at `now`; idle instead tells the dropper the queue emptied.
type dstep struct {
	now, at float64
	drop    bool
	idle    bool
}

func runCoDel(t *testing.T, c *CoDel, steps []dstep) {
	t.Helper()
	for i, s := range steps {
		if s.idle {
			c.Idle()
			continue
		}
		if got := c.Drop(s.now, s.at); got != s.drop {
			t.Fatalf("step %d: Drop(now %v, at %v) = %v, want %v", i, s.now, s.at, got, s.drop)
		}
	}
}

func mustCoDel(t *testing.T, cfg CoDelConfig) *CoDel {
	t.Helper()
	c, err := NewCoDel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The seed's CoDel-like rule with target 50 ms and interval 100 ms.
func TestCoDelCutoffSteps(t *testing.T) {
	c := mustCoDel(t, CoDelConfig{Target: 0.050, Interval: 0.100, Law: Cutoff})
	runCoDel(t, c, []dstep{
		{now: 0, at: 0},                   // no wait
		{now: 1.0, at: 0.9},               // 100 ms > target: clock starts at 1.0, served
		{now: 1.05, at: 0.95},             // above for 50 ms: served
		{now: 1.1, at: 1.0, drop: true},   // above for 1.1−1.0 ≥ 0.1: dropped
		{now: 1.1, at: 1.01, drop: true},  // a drop does not reset the clock
		{now: 1.1, at: 1.06},              // 40 ms: under target, clock reset, served
		{now: 1.2, at: 1.1},               // above again: clock restarts at 1.2
		{idle: true},                      // the queue went empty: clock reset
		{now: 1.25, at: 1.15},             // clock starts at 1.25
		{now: 1.3, at: 1.2},               // 50 ms since: served
		{now: 1.35, at: 1.25, drop: true}, // 1.35 − 1.25 ≥ 0.1
	})
}

// The rule compares in float64 exactly as written: now − since ≥ interval and
// sojourn > target. With dyadic numbers the boundaries are exact.
func TestCoDelCutoffBoundaries(t *testing.T) {
	c := mustCoDel(t, CoDelConfig{Target: 0.25, Interval: 0.5, Law: Cutoff})
	runCoDel(t, c, []dstep{
		{now: 1, at: 0.75},              // sojourn exactly the target: not above
		{now: 2, at: 1.5},               // 0.5 > 0.25: clock starts at 2
		{now: 2.25, at: 1.75},           // above for 0.25
		{now: 2.5, at: 2.0, drop: true}, // above for exactly the interval: drop
		{now: 2.5, at: 2.25},            // sojourn exactly the target: reset
		{now: 2.75, at: 2.0},            // clock starts again at 2.75
		{now: 3.125, at: 2.5},           // 0.375 < interval
		{now: 3.25, at: 2.5, drop: true},
	})
}

// The clock's arithmetic is the caller's: ten steps of 0.01 from 0 sum to
// 0.09999999999999999, just short of an interval of 0.1, so the entry is
// served; the eleventh step is past it. The seed experiment depends on this.
func TestCoDelCutoffExactFloat(t *testing.T) {
	c := mustCoDel(t, CoDelConfig{Target: 0.05, Interval: 0.1, Law: Cutoff})
	now := 0.0
	if c.Drop(now, now-1) {
		t.Fatal("first entry above target dropped")
	}
	for range 10 {
		now += 0.01
	}
	if now != 0.09999999999999999 {
		t.Fatalf("now = %v", now)
	}
	if c.Drop(now, now-1) {
		t.Fatal("dropped at 0.09999999999999999 − 0 < 0.1")
	}
	if !c.Drop(now+0.01, now-1) {
		t.Fatal("not dropped after 0.11 s above target")
	}
}

// RFC 8289 with target 50 ms and interval 100 ms. Entries above target were
// enqueued 1 s earlier. Drops come Interval/√count apart: 0.1, 0.1/√2 =
// 0.0707…, 0.1/√3 = 0.0577…, 0.1/√4 = 0.05; re-entering soon after leaving
// resumes with the count of the last episode.
func TestCoDelRFC8289Steps(t *testing.T) {
	c := mustCoDel(t, CoDelConfig{Target: 0.050, Interval: 0.100})
	above := func(now float64, drop bool) dstep { return dstep{now: now, at: now - 1, drop: drop} }
	runCoDel(t, c, []dstep{
		above(0.000, false), // first above target: firstAbove = 0.1
		above(0.050, false),
		above(0.100, true),  // above for an interval: enter dropping, count 1, next drop at 0.2
		above(0.100, false), // the entry after the entering drop is served
		above(0.150, false),
		above(0.200, true),  // count 2
		above(0.200, false), // next drop at 0.2 + 0.1/√2 = 0.2707106781186547
		above(0.270, false),
		above(0.271, true),  // count 3
		above(0.271, false), // next at 0.27071… + 0.1/√3 = 0.3284457050376173
		above(0.328, false),
		above(0.3285, true),          // count 4
		above(0.3285, false),         // next at 0.3784457050376173
		{now: 0.40, at: 0.39},        // 10 ms: below target, leave dropping (count stays 4)
		above(0.50, false),           // above again: firstAbove = 0.6
		above(0.60, true),            // re-enter 0.22 s after the last schedule: count = 4 − 1 = 3, next at 0.6 + 0.1/√3 = 0.6577350269189626
		above(0.60, false),           // served after the entering drop
		above(0.657, false),          // spacing 0.1/√3, not 0.1
		above(0.658, true),           // count 4
		above(0.658, false),          // next at 0.6577… + 0.1/√4 = 0.7077350269189626
		above(0.7077, false),         //
		above(0.7078, true),          // count 5
		above(0.7078, false),         // next at 0.7077… + 0.1/√5 = 0.7524563864689527
		{idle: true},                 // queue empty: leave dropping
		above(5.0, false),            // firstAbove = 5.1
		above(5.1, true),             // last episode ended long ago: count 1 (5 − 3 = 2 > 1, but 5.1 − 0.75 ≥ 16 intervals)
		above(5.1, false),            // next at 5.2
		above(5.19, false),           //
		above(5.2, true),             // spacing back to a full interval
		{now: 5.2, at: 5.19},         // the next entry is below target: leave dropping
		above(5.2001, false),         // arms again: firstAbove = 5.3001
		above(5.3, false),            //
		above(5.3001, true),          // count − lastCount = 2 − 1 = 1: no carry-over, count 1
		above(5.3001, false),         //
		above(5.40009, false),        //
		above(5.4001, true),          // next 0.1 later
		above(5.4001, false),         //
		above(5.4001+0.07071, false), //
		above(5.4001+0.07072, true),  // then 0.1/√2 later
	})
}

// With dequeues every millisecond and a standing queue, the k-th gap between
// drops is Interval/√(k) (to within a millisecond tick), k = 1, 2, …
func TestCoDelRFC8289DropSpacing(t *testing.T) {
	const interval, tick = 0.1, 0.001
	c := mustCoDel(t, CoDelConfig{Target: 0.005, Interval: interval})
	var drops []float64
	for i := 0; i <= 2000; i++ {
		now := float64(i) * tick
		for c.Drop(now, now-1) { // a dropped entry is followed at once by the next
			drops = append(drops, now)
		}
	}
	if len(drops) < 20 {
		t.Fatalf("only %d drops in 2 s of standing queue", len(drops))
	}
	if drops[0] < interval || drops[0] > interval+tick {
		t.Fatalf("first drop at %v, want after one interval", drops[0])
	}
	sched := drops[0]
	for k := 1; k < len(drops); k++ {
		sched += interval / math.Sqrt(float64(k))
		if drops[k] < sched || drops[k] >= sched+tick+1e-12 {
			t.Fatalf("drop %d at %.6f, want the first tick at or after %.6f (gap %.6f = interval/√%d)",
				k+1, drops[k], sched, interval/math.Sqrt(float64(k)), k)
		}
	}
}

// Only one entry is dropped per Drop call, and a drop is never made while
// the sojourn time is below target, whatever the state.
func TestCoDelRFC8289NeverDropsBelowTarget(t *testing.T) {
	c := mustCoDel(t, CoDelConfig{Target: 0.05, Interval: 0.1})
	for i := range 5000 {
		now := float64(i) * 0.003
		sojourn := 0.2
		if i%7 == 0 || (i/200)%3 == 0 {
			sojourn = 0.049
		}
		if c.Drop(now, now-sojourn) && sojourn < 0.05 {
			t.Fatalf("dropped at %v with sojourn %v", now, sojourn)
		}
	}
}

func TestCoDelConfig(t *testing.T) {
	c := mustCoDel(t, CoDelConfig{})
	if c.Target() != DefaultTarget || c.Interval() != DefaultInterval || c.Law() != RFC8289 {
		t.Errorf("zero config: target %v interval %v law %v", c.Target(), c.Interval(), c.Law())
	}
	tests := []struct {
		cfg   CoDelConfig
		field string
	}{
		{CoDelConfig{Target: -0.001}, "Target"},
		{CoDelConfig{Target: math.Inf(1)}, "Target"},
		{CoDelConfig{Interval: math.NaN()}, "Interval"},
		{CoDelConfig{Interval: -1}, "Interval"},
		{CoDelConfig{Law: 2}, "Law"},
	}
	for _, tt := range tests {
		_, err := NewCoDel(tt.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v, want a ConfigError for %s", tt.cfg, err, tt.field)
		}
	}
	if RFC8289.String() != "RFC 8289" || Cutoff.String() != "cutoff" || Law(5).String() != "Law(5)" {
		t.Error("Law.String")
	}
}

func TestCoDelDropping(t *testing.T) {
	c := mustCoDel(t, CoDelConfig{Target: 0.05, Interval: 0.1})
	c.Drop(0, -1)
	c.Drop(0.1, -1)
	if !c.Dropping() {
		t.Fatal("RFC 8289 not dropping after an interval above target")
	}
	c.Idle()
	if c.Dropping() {
		t.Fatal("still dropping after Idle")
	}
	k := mustCoDel(t, CoDelConfig{Target: 0.05, Interval: 0.1, Law: Cutoff})
	k.Drop(0, -1)
	if !k.Dropping() {
		t.Fatal("cutoff clock not running above target")
	}
}
