package breaker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

// play makes one call per step on b and returns, per step, "x" if Allow
// refused it, else the state letter after its Done (C, O or H). A step is
// an outcome letter (S success, F failure), the time of Allow, and
// optionally "+d": the call's duration (Done at t+d; else Done at t).
func play(t *testing.T, b *Breaker, steps string) string {
	t.Helper()
	var out []string
	for _, step := range strings.Fields(steps) {
		ok := step[0] == 'S'
		if !ok && step[0] != 'F' {
			t.Fatalf("bad step %q", step)
		}
		at, dur := step[1:], "0"
		if i := strings.IndexByte(at, '+'); i >= 0 {
			at, dur = at[:i], at[i+1:]
		}
		start, err1 := strconv.ParseFloat(at, 64)
		d, err2 := strconv.ParseFloat(dur, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad step %q", step)
		}
		tk, err := b.Allow(start)
		if err != nil {
			out = append(out, "x")
			continue
		}
		tk.Done(start+d, ok)
		out = append(out, b.Snapshot().State.String()[:1])
	}
	return strings.Join(out, " ")
}

// Sequences of calls through a count window: the state after each call.
func TestCountWindowSequences(t *testing.T) {
	base := Config{Window: CountWindow, WindowCalls: 4, MinCalls: 4, FailureRate: 0.5, Recovery: 5}
	for _, c := range []struct {
		cfg         Config
		steps, want string
	}{
		{base, "S0 F0 S0 F0", "C C C O"},                                 // 2/4 reaches 0.5
		{base, "S0 S0 S0 F0", "C C C C"},                                 // 1/4
		{base, "S0 S0 S0 F0 F0", "C C C C O"},                            // the oldest S leaves: S S F F
		{base, "F0 F0 F0", "C C C"},                                      // fewer than MinCalls
		{base, "F0 F0 F0 S0", "C C C O"},                                 // 3/4 once the window is full
		{base, "S0 S0 S0 S0 F0 S0 S0 F0", "C C C C C C C O"},             // F S S F
		{base, "S0 S0 S0 S0 S0 F0 F0 S1", "C C C C C C O x"},             // OPEN at 0 until 5
		{base, "F0 F0 F0 F0 S4.9 S5 S5 F5 F5 S5", "C C C O x C C C C O"}, // a trial success empties the window
		{base, "F0 F0 F0 F0 F5 S9.9 S10", "C C C O O x C"},               // a failed trial reopens at 5
		// FailureRate 1: only a window of failures opens.
		{Config{Window: CountWindow, WindowCalls: 3, FailureRate: 1}, "F0 F0 S0 F0 F0 F0", "C C C C C O"},
		// MinCalls below the window: a rate decides once MinCalls calls are in.
		{Config{Window: CountWindow, WindowCalls: 10, MinCalls: 2, FailureRate: 0.5}, "S0 F0", "C O"},
		{Config{Window: CountWindow, WindowCalls: 10, MinCalls: 5, FailureRate: 0.5}, "F0 F0 F0 F0 F0", "C C C C O"},
		// MinCalls 0: DefaultMinCalls (10), here capped at WindowCalls (4).
		{Config{Window: CountWindow, WindowCalls: 4}, "F0 F0 F0 S0", "C C C O"},
		{Config{Window: CountWindow, WindowCalls: 20}, "F0 F0 F0 F0 F0 F0 F0 F0 F0 F0", "C C C C C C C C C O"},
	} {
		t.Run(c.steps, func(t *testing.T) {
			if got := play(t, mustNew(t, c.cfg), c.steps); got != c.want {
				t.Fatalf("%s: states %q, want %q", c.steps, got, c.want)
			}
		})
	}
}

// Sequences through a time window: old buckets leave it.
func TestTimeWindowSequences(t *testing.T) {
	base := Config{Window: TimeWindow, WindowSeconds: 3, BucketSeconds: 1, MinCalls: 2, FailureRate: 0.6, Recovery: 5}
	half := Config{Window: TimeWindow, WindowSeconds: 1, BucketSeconds: 0.5, MinCalls: 2, FailureRate: 1, Recovery: 5}
	for _, c := range []struct {
		cfg         Config
		steps, want string
	}{
		{base, "S0 S0.5 F1 F2.9", "C C C C"},            // buckets 0–2: 2/4
		{base, "S0 S0.5 F1 F3.2", "C C C O"},            // buckets 1–3: bucket 0 (both S) has left; 2/2
		{base, "F0 S3 F3", "C C C"},                     // F0 has left by 3: S F is 1/2
		{base, "F0 F0.999", "C O"},                      // one bucket, 2/2
		{base, "F0 S1 F2 F2.5", "C C O x"},              // 2/3 ≥ 0.6
		{base, "F0 S100 F100", "C C C"},                 // a long gap empties the window
		{base, "S0 F0 F9 F9", "C C C O"},                // F9 F9: 2/2 (the window was S F, now gone)
		{base, "F0 F0 S4 S5 S6 F6 F7", "C O x C C C O"}, // the trial S5 closes; the window restarts empty
		{half, "F0 F1", "C C"},                          // 0.5 s buckets, 2 in the window: bucket 0 left at 1
		{half, "F0 F0.99", "C O"},                       // buckets 0 and 1
		{half, "F0.4 F0.5", "C O"},                      // buckets 0 and 1
		{half, "F0.49 F1.49", "C C"},                    // buckets 0 and 2
		// Reports that arrive with an earlier time count in the newest bucket.
		{base, "F5 F1", "C O"},
	} {
		t.Run(c.steps, func(t *testing.T) {
			if got := play(t, mustNew(t, c.cfg), c.steps); got != c.want {
				t.Fatalf("%s: states %q, want %q", c.steps, got, c.want)
			}
		})
	}
}

// Slow calls: the duration is Done's now minus Allow's now, and a slow
// call counts as slow whether it failed or not.
func TestSlowCalls(t *testing.T) {
	cfg := Config{Window: CountWindow, WindowCalls: 2, MinCalls: 2, FailureRate: 1, SlowCall: 1, SlowCallRate: 0.5}
	for _, c := range []struct{ steps, want string }{
		{"S0+1 S1+0.5", "C O"},          // 1 s is slow: 1/2
		{"S0+0.999 S1+0.5", "C C"},      // nothing slow
		{"F0+2 S2", "C O"},              // the failed call was slow: 1/2 slow, 1/2 failed (< 1)
		{"S0+0.5 S1+0.5 S2+3", "C C O"}, // the last two: one slow
		{"S0+0.5 S1+0.5 S2+0.99 S3+0.2", "C C C C"},
	} {
		if got := play(t, mustNew(t, cfg), c.steps); got != c.want {
			t.Errorf("%s: states %q, want %q", c.steps, got, c.want)
		}
	}
	// SlowCallRate 0 means 1: every call in the window slow.
	b := mustNew(t, Config{Window: CountWindow, WindowCalls: 3, SlowCall: 0.25})
	if got := play(t, b, "S0+0.25 S0+1 S0+0.1 S1+9 S2+9 S3+9"); got != "C C C C C O" {
		t.Errorf("default SlowCallRate: states %q, want C C C C C O", got)
	}
	if s := b.Snapshot(); s.Calls != 3 || s.Slow != 3 || s.Failures != 0 {
		t.Errorf("snapshot %+v, want 3 calls, 3 slow, 0 failures", s)
	}
	if k := b.Counters(); k.Successes != 1 || k.Slow != 5 || k.Failures != 0 {
		t.Errorf("counters %+v, want 1 success, 5 slow", k)
	}
	// Without SlowCall nothing is slow.
	b = mustNew(t, Config{Window: CountWindow, WindowCalls: 2, FailureRate: 1})
	if got := play(t, b, "S0+100 S0+100"); got != "C C" {
		t.Errorf("no SlowCall: states %q", got)
	}
	if k := b.Counters(); k.Slow != 0 || k.Successes != 2 {
		t.Errorf("no SlowCall: counters %+v", k)
	}
}

// allowN takes n tickets at now and fails the test if any is refused.
func allowN(t *testing.T, b *Breaker, now float64, n int) []Ticket {
	t.Helper()
	tks := make([]Ticket, n)
	for i := range tks {
		var err error
		if tks[i], err = b.Allow(now); err != nil {
			t.Fatalf("Allow #%d at %v: %v", i, now, err)
		}
	}
	return tks
}

func wantState(t *testing.T, b *Breaker, state State, calls, failures int) {
	t.Helper()
	if s := b.Snapshot(); s.State != state || s.Calls != calls || s.Failures != failures {
		t.Fatalf("%+v, want %v with %d calls, %d failures", s, state, calls, failures)
	}
}

// In rate mode HALF_OPEN lets Trials calls through and decides once all
// have reported.
func TestHalfOpenProbes(t *testing.T) {
	cfg := Config{Window: CountWindow, WindowCalls: 2, MinCalls: 2, FailureRate: 0.5, Trials: 3, Recovery: 5}
	for _, c := range []struct {
		outcomes []bool
		want     State
	}{
		{[]bool{true, true, true}, Closed},
		{[]bool{true, false, true}, Closed}, // 1/3 < 0.5
		{[]bool{false, true, false}, Open},  // 2/3
		{[]bool{false, false, false}, Open},
	} {
		b := mustNew(t, cfg)
		play(t, b, "F0 F0")
		tks := allowN(t, b, 5, 3)
		if _, err := b.Allow(5); err != ErrOpen {
			t.Fatalf("fourth trial: %v, want ErrOpen", err)
		}
		fails := 0
		for i := 0; i < 2; i++ {
			tks[i].Done(6, c.outcomes[i])
			if !c.outcomes[i] {
				fails++
			}
			wantState(t, b, HalfOpen, i+1, fails)
		}
		tks[2].Done(7, c.outcomes[2])
		if s := b.Snapshot(); s.State != c.want {
			t.Fatalf("outcomes %v: %v, want %v", c.outcomes, s.State, c.want)
		}
		if c.want == Open {
			if s := b.Snapshot(); s.OpenedAt != 7 || s.Calls != 3 {
				t.Fatalf("outcomes %v: %+v, want OPEN at 7 decided on 3 trials", c.outcomes, s)
			}
		} else {
			wantState(t, b, Closed, 0, 0) // the window starts empty
		}
	}

	// A cancelled trial gives its slot back; the round still needs Trials
	// reports.
	b := mustNew(t, cfg)
	play(t, b, "F0 F0")
	tks := allowN(t, b, 5, 3)
	tks[0].Cancel()
	tks[1].Done(5, true)
	more := allowN(t, b, 5, 1)
	if _, err := b.Allow(5); err != ErrOpen {
		t.Fatalf("after the slot was reused: %v, want ErrOpen", err)
	}
	tks[2].Done(6, true)
	wantState(t, b, HalfOpen, 2, 0)
	more[0].Done(6, true)
	wantState(t, b, Closed, 0, 0)

	// Slow trials count against the slow-call rate.
	b = mustNew(t, Config{Window: CountWindow, WindowCalls: 2, MinCalls: 2, FailureRate: 1, SlowCall: 1, SlowCallRate: 0.5, Trials: 2, Recovery: 5})
	play(t, b, "S0+1 S1+1")
	if b.Snapshot().State != Open {
		t.Fatal("two slow calls did not open")
	}
	tks = allowN(t, b, 7, 2)
	tks[0].Done(7.5, true)
	tks[1].Done(8, true) // slow
	if s := b.Snapshot(); s.State != Open || s.Slow != 1 || s.OpenedAt != 8 {
		t.Fatalf("a slow trial: %+v, want OPEN at 8 with 1 slow", s)
	}
}

// Each failed HALF_OPEN round multiplies the open time, up to MaxRecovery;
// closing resets it.
func TestGrowingOpenTime(t *testing.T) {
	for _, cfg := range []Config{
		{Threshold: 1, Recovery: 5, RecoveryMultiplier: 2, MaxRecovery: 30},
		{Window: CountWindow, WindowCalls: 1, Recovery: 5, RecoveryMultiplier: 2, MaxRecovery: 30},
	} {
		b := mustNew(t, cfg)
		now := 0.0
		play(t, b, "F0")
		for i, want := range []float64{5, 10, 20, 30, 30} {
			if s := b.Snapshot(); s.State != Open || s.OpenFor != want || s.OpenedAt != now {
				t.Fatalf("%v: opening %d: %+v, want OPEN at %v for %v", cfg.Window, i, s, now, want)
			}
			if _, err := b.Allow(now + want - 0.001); err != ErrOpen {
				t.Fatalf("%v: opening %d: a call before %v s: %v, want ErrOpen", cfg.Window, i, want, err)
			}
			now += want
			tk, err := b.Allow(now)
			if err != nil {
				t.Fatalf("%v: opening %d: no trial after %v s: %v", cfg.Window, i, want, err)
			}
			tk.Done(now, false)
		}
		// 30 s more, then a trial succeeds: CLOSED, and the next opening is 5 s again.
		now += 30
		if got := play(t, b, fmt.Sprintf("S%v F%v", now, now+1)); got != "C O" {
			t.Fatalf("%v: states %q after recovery", cfg.Window, got)
		}
		if s := b.Snapshot(); s.OpenFor != 5 {
			t.Fatalf("%v: open time %v after closing, want 5", cfg.Window, s.OpenFor)
		}
	}
	// Multiplier 1 (the zero value): a constant open time.
	b := mustNew(t, Config{Threshold: 1, Recovery: 5})
	if got := play(t, b, "F0 F5 S9.9 F10 S14.9 S15"); got != "O O x O x C" {
		t.Fatalf("constant open time: %q", got)
	}
}

// Generations discard stragglers in rate mode too.
func TestWindowStragglers(t *testing.T) {
	for _, cfg := range []Config{
		{Window: CountWindow, WindowCalls: 4, MinCalls: 2, FailureRate: 0.5, Recovery: 5},
		{Window: TimeWindow, WindowSeconds: 10, MinCalls: 2, FailureRate: 0.5, Recovery: 5},
	} {
		b := mustNew(t, cfg)
		old := allowN(t, b, 0, 2)
		play(t, b, "F1 F1") // OPEN at 1
		old[0].Done(2, false)
		old[1].Done(2, true)
		wantState(t, b, Open, 2, 2)
		play(t, b, "S6") // trial success: CLOSED, empty window
		wantState(t, b, Closed, 0, 0)
		veryOld := allowN(t, b, 6, 1)
		play(t, b, "F7 F7")        // OPEN again
		play(t, b, "S12")          // CLOSED
		veryOld[0].Done(13, false) // from two generations ago
		old[0].Done(13, false)     // already reported
		wantState(t, b, Closed, 0, 0)
		if k := b.Counters(); k.Failures != 6 || k.Successes != 3 {
			t.Fatalf("%v: counters %+v, want every first report counted: 6 failures, 3 successes", cfg.Window, k)
		}
	}
}

// A lost trial in rate mode: a new round starts with no trials counted,
// and the lost trial's late report is discarded.
func TestWindowLostTrial(t *testing.T) {
	b := mustNew(t, Config{Window: CountWindow, WindowCalls: 2, FailureRate: 0.5, Trials: 2, Recovery: 5})
	play(t, b, "F0 F0")
	tks := allowN(t, b, 5, 2)
	tks[0].Done(5, true)
	wantState(t, b, HalfOpen, 1, 0)
	if _, err := b.Allow(9.9); err != ErrOpen {
		t.Fatalf("at 9.9: %v, want ErrOpen", err)
	}
	round := allowN(t, b, 10, 2) // the trial of 5 is presumed lost
	wantState(t, b, HalfOpen, 0, 0)
	tks[1].Done(10, false) // late: discarded
	wantState(t, b, HalfOpen, 0, 0)
	round[0].Done(11, true)
	round[1].Done(11, true)
	wantState(t, b, Closed, 0, 0)
}

// Many goroutines share a windowed breaker; run with -race. Transitions
// form a valid chain and the counters add up to what the callers saw.
func TestConcurrentWindows(t *testing.T) {
	for _, cfg := range []Config{
		{Window: CountWindow, WindowCalls: 20, MinCalls: 5, FailureRate: 0.5, SlowCall: 0.002, SlowCallRate: 0.9, Trials: 3, Recovery: 0.01, RecoveryMultiplier: 1.5, MaxRecovery: 0.05},
		{Window: TimeWindow, WindowSeconds: 0.02, BucketSeconds: 0.005, MinCalls: 5, FailureRate: 0.5, Trials: 2, Recovery: 0.01},
	} {
		var mu sync.Mutex
		var changes []Transition
		cfg.OnStateChange = func(tr Transition) {
			mu.Lock()
			changes = append(changes, tr)
			mu.Unlock()
		}
		b := mustNew(t, cfg)
		var wg sync.WaitGroup
		var allowed, rejected, cancelled [8]uint64
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rng.New(uint32(w) + 100)
				for i := 0; i < 2000; i++ {
					now := float64(i) * 0.001
					tk, err := b.Allow(now)
					if err != nil {
						rejected[w]++
						continue
					}
					allowed[w]++
					switch u := r.Float64(); {
					case u < 0.05:
						tk.Cancel()
						cancelled[w]++
					default:
						tk.Done(now+float64(r.Float64()*0.003), u > 0.55)
					}
				}
			}()
		}
		wg.Wait()
		var sumAllowed, sumRejected, sumCancelled uint64
		for w := range allowed {
			sumAllowed += allowed[w]
			sumRejected += rejected[w]
			sumCancelled += cancelled[w]
		}
		k := b.Counters()
		if k.Successes+k.Slow+k.Failures+k.Cancelled != sumAllowed || k.Rejected != sumRejected || k.Cancelled != sumCancelled {
			t.Fatalf("%v: counters %+v; callers saw %d allowed, %d rejected, %d cancelled", cfg.Window, k, sumAllowed, sumRejected, sumCancelled)
		}
		checkChain(t, changes, b)
		var fromCounters uint64
		for i := range k.Transitions {
			for j := range k.Transitions[i] {
				fromCounters += k.Transitions[i][j]
			}
		}
		if fromCounters != uint64(len(changes)) {
			t.Fatalf("%v: %d transitions counted, %d reported to the hook", cfg.Window, fromCounters, len(changes))
		}
	}
}

// checkChain checks that transitions, ordered by generation, chain from
// CLOSED through valid changes to b's state.
func checkChain(t *testing.T, changes []Transition, b *Breaker) {
	t.Helper()
	sort.Slice(changes, func(i, j int) bool { return changes[i].Generation < changes[j].Generation })
	if len(changes) == 0 {
		t.Fatal("no state change")
	}
	prev := Closed
	for i, tr := range changes {
		valid := (tr.From == Closed && tr.To == Open) || (tr.From == Open && tr.To == HalfOpen) ||
			(tr.From == HalfOpen && (tr.To == Closed || tr.To == Open))
		if tr.From != prev || !valid || (i > 0 && tr.Generation <= changes[i-1].Generation) {
			t.Fatalf("transition %d: %+v after state %v", i, tr, prev)
		}
		prev = tr.To
	}
	if s := b.Snapshot(); s.State != prev {
		t.Fatalf("final state %v, last transition to %v", s.State, prev)
	}
}
