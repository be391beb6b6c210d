package breaker

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

func mustNew(t testing.TB, c Config) *Breaker {
	t.Helper()
	b, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// call makes one call through b at now to a dependency that answers ok, and
// describes the outcome the way the seed's reference prints it.
func call(b *Breaker, now float64, ok bool) string {
	tk, err := b.Allow(now)
	if err != nil {
		return "REJECTED"
	}
	tk.Done(now, ok)
	s := b.Snapshot()
	if ok {
		return "SUCCESS " + s.State.String()
	}
	return fmt.Sprintf("FAILURE %v %d", s.State, s.Failures)
}

// The seed's timeline (reference/circuit_breaker.py): threshold 3,
// recovery 5 s, a service that fails its first 3 calls.
func TestSeedTimeline(t *testing.T) {
	b := mustNew(t, Config{Threshold: 3, Recovery: 5})
	calls := 0
	for _, s := range []struct {
		now  float64
		want string
	}{
		{0, "FAILURE CLOSED 1"},
		{1, "FAILURE CLOSED 2"},
		{2, "FAILURE OPEN 3"}, // opened at 2; the count is not reset
		{3, "REJECTED"},       // 3 − 2 < 5: fast fail, the service is not called
		{10, "SUCCESS CLOSED"},
		{11, "SUCCESS CLOSED"},
	} {
		tk, err := b.Allow(s.now)
		got := "REJECTED"
		if err == nil {
			calls++
			ok := calls > 3
			tk.Done(s.now, ok)
			snap := b.Snapshot()
			if ok {
				got = "SUCCESS " + snap.State.String()
			} else {
				got = fmt.Sprintf("FAILURE %v %d", snap.State, snap.Failures)
			}
		} else if !errors.Is(err, ErrOpen) {
			t.Fatalf("t=%v: error %v, want ErrOpen", s.now, err)
		}
		if got != s.want {
			t.Errorf("t=%v: %s, want %s", s.now, got, s.want)
		}
	}
	if calls != 5 {
		t.Errorf("service called %d times, want 5", calls)
	}
}

// model is the seed reference's breaker, written out as plainly as
// possible, as the oracle for the exhaustive test.
type model struct {
	threshold int
	recovery  float64
	failures  int
	state     string
	openedAt  float64
}

func (m *model) call(now float64, ok bool) string {
	if m.state == "OPEN" {
		if now-m.openedAt >= m.recovery {
			m.state = "HALF_OPEN"
		} else {
			return "REJECTED"
		}
	}
	if !ok {
		m.failures++
		if m.state == "HALF_OPEN" || m.failures >= m.threshold {
			m.state = "OPEN"
			m.openedAt = now
		}
		return fmt.Sprintf("FAILURE %s %d", m.state, m.failures)
	}
	m.failures = 0
	m.state = "CLOSED"
	return "SUCCESS CLOSED"
}

// Every sequence of 6 sequential calls, each a success or a failure after a
// pause of 0, 2.5 or 5 seconds (so that every gap since opening, 0 to 30 s in
// steps of 2.5, is reached: below, at and above Recovery), gives the
// reference's results, states and counts after every call.
func TestExhaustiveSequences(t *testing.T) {
	pauses := []float64{0, 2.5, 5}
	const maxLen = 6
	type symbol struct {
		pause float64
		ok    bool
	}
	var alphabet []symbol
	for _, p := range pauses {
		alphabet = append(alphabet, symbol{p, true}, symbol{p, false})
	}
	for _, threshold := range []int{1, 2, 3} {
		seq := make([]int, maxLen)
		total := 1
		for i := 0; i < maxLen; i++ {
			total *= len(alphabet)
		}
		for code := 0; code < total; code++ {
			c := code
			for i := range seq {
				seq[i] = c % len(alphabet)
				c /= len(alphabet)
			}
			b := mustNew(t, Config{Threshold: threshold, Recovery: 5})
			m := &model{threshold: threshold, recovery: 5, state: "CLOSED"}
			now := 0.0
			for i, k := range seq {
				now += alphabet[k].pause
				got, want := call(b, now, alphabet[k].ok), m.call(now, alphabet[k].ok)
				if got != want || b.Snapshot().State.String() != m.state || b.Snapshot().Failures != m.failures {
					t.Fatalf("threshold %d, sequence %v, step %d at t=%v: got %q (%+v), reference %q (%+v)",
						threshold, seq[:i+1], i, now, got, b.Snapshot(), want, *m)
				}
			}
		}
	}
}

// The transition table: from each state, each event, the next state.
func TestTransitionTable(t *testing.T) {
	const R = 5.0
	// Set-ups, each leaving the breaker in one state at t = 100 and, for
	// HALF_OPEN, the trial ticket out.
	closed := func(b *Breaker) *Ticket { return nil }
	closedNearThreshold := func(b *Breaker) *Ticket { // 2 failures of 3
		call(b, 99, false)
		call(b, 100, false)
		return nil
	}
	open := func(b *Breaker) *Ticket { // opened at 100
		for i := 0; i < 3; i++ {
			call(b, 100, false)
		}
		return nil
	}
	halfOpen := func(b *Breaker) *Ticket { // opened at 95, trial allowed at 100
		for i := 0; i < 3; i++ {
			call(b, 95, false)
		}
		tk, err := b.Allow(100)
		if err != nil {
			panic("no trial")
		}
		return &tk
	}
	allowAt := func(now float64) func(*Breaker, *Ticket) error {
		return func(b *Breaker, _ *Ticket) error { _, err := b.Allow(now); return err }
	}
	callAt := func(now float64, ok bool) func(*Breaker, *Ticket) error {
		return func(b *Breaker, _ *Ticket) error {
			tk, err := b.Allow(now)
			if err == nil {
				tk.Done(now, ok)
			}
			return err
		}
	}
	trialDone := func(ok bool) func(*Breaker, *Ticket) error {
		return func(b *Breaker, tk *Ticket) error { tk.Done(101, ok); return nil }
	}
	trialCancel := func(b *Breaker, tk *Ticket) error { tk.Cancel(); return nil }

	for _, c := range []struct {
		name     string
		setup    func(*Breaker) *Ticket
		event    func(*Breaker, *Ticket) error
		wantErr  error
		want     State
		failures int
	}{
		{"closed/allow", closed, allowAt(100), nil, Closed, 0},
		{"closed/success", closed, callAt(100, true), nil, Closed, 0},
		{"closed/failure below threshold", closed, callAt(100, false), nil, Closed, 1},
		{"closed/success resets", closedNearThreshold, callAt(101, true), nil, Closed, 0},
		{"closed/failure reaches threshold", closedNearThreshold, callAt(101, false), nil, Open, 3},
		{"open/allow before recovery", open, allowAt(100 + R - 0.001), ErrOpen, Open, 3},
		{"open/allow at recovery", open, allowAt(100 + R), nil, HalfOpen, 3},
		{"open/trial success", open, callAt(100+R, true), nil, Closed, 0},
		{"open/trial failure", open, callAt(100+R, false), nil, Open, 4},
		{"half-open/second call", halfOpen, allowAt(101), ErrOpen, HalfOpen, 3},
		{"half-open/trial success", halfOpen, trialDone(true), nil, Closed, 0},
		{"half-open/trial failure", halfOpen, trialDone(false), nil, Open, 4},
		{"half-open/trial cancelled", halfOpen, trialCancel, nil, HalfOpen, 3},
		{"half-open/trial lost", halfOpen, allowAt(100 + R), nil, HalfOpen, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := mustNew(t, Config{Threshold: 3, Recovery: R})
			tk := c.setup(b)
			if err := c.event(b, tk); err != c.wantErr {
				t.Fatalf("event error %v, want %v", err, c.wantErr)
			}
			if s := b.Snapshot(); s.State != c.want || s.Failures != c.failures {
				t.Fatalf("after event: %v with %d failures, want %v with %d", s.State, s.Failures, c.want, c.failures)
			}
		})
	}
}

// After a trial is cancelled, its slot goes to the next call; after a lost
// trial is replaced, the lost one's late report is discarded.
func TestTrialSlots(t *testing.T) {
	b := mustNew(t, Config{Threshold: 1, Recovery: 5})
	call(b, 0, false) // OPEN at 0
	first, err := b.Allow(5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Allow(5); err != ErrOpen {
		t.Fatalf("second concurrent trial: %v, want ErrOpen", err)
	}
	first.Cancel()
	second, err := b.Allow(6)
	if err != nil {
		t.Fatalf("after Cancel: %v, want a trial", err)
	}
	first.Done(6, true) // already cancelled: ignored
	if s := b.Snapshot(); s.State != HalfOpen {
		t.Fatalf("a cancelled ticket's Done changed the state to %v", s.State)
	}
	// second is never reported; at 6 + 5 its slot is presumed lost.
	if _, err := b.Allow(10.5); err != ErrOpen {
		t.Fatalf("at 10.5: %v, want ErrOpen (trial out for 4.5 s)", err)
	}
	third, err := b.Allow(11)
	if err != nil {
		t.Fatalf("at 11: %v, want a new trial", err)
	}
	second.Done(11, false) // stale: discarded
	if s := b.Snapshot(); s.State != HalfOpen || s.Failures != 1 {
		t.Fatalf("stale trial failure counted: %+v", s)
	}
	third.Done(12, true)
	if s := b.Snapshot(); s.State != Closed || s.Failures != 0 {
		t.Fatalf("after the new trial's success: %+v, want CLOSED with 0 failures", s)
	}
}

func TestSeveralTrials(t *testing.T) {
	b := mustNew(t, Config{Threshold: 1, Recovery: 5, Trials: 2})
	call(b, 0, false)
	a, errA := b.Allow(5)
	c, errC := b.Allow(5)
	_, errD := b.Allow(5)
	if errA != nil || errC != nil || errD != ErrOpen {
		t.Fatalf("Trials 2: errors %v, %v, %v; want nil, nil, ErrOpen", errA, errC, errD)
	}
	a.Done(6, false) // the first report decides: OPEN at 6
	c.Done(6, true)  // stale
	if s := b.Snapshot(); s.State != Open || s.OpenedAt != 6 {
		t.Fatalf("%+v, want OPEN since 6", s)
	}
}

func TestDoneIsIdempotent(t *testing.T) {
	var changes []Transition
	b := mustNew(t, Config{Threshold: 2, Recovery: 5, OnStateChange: func(tr Transition) { changes = append(changes, tr) }})
	tk, _ := b.Allow(0)
	tk.Done(0, false)
	tk.Done(0, false)
	tk.Cancel()
	if s := b.Snapshot(); s.Failures != 1 || s.State != Closed {
		t.Fatalf("one ticket reported failure twice: %+v, want 1 failure, CLOSED", s)
	}
	call(b, 1, false) // OPEN at 1
	trial, _ := b.Allow(6)
	trial.Done(6, true)
	trial.Done(7, false)
	if s := b.Snapshot(); s.State != Closed || s.Failures != 0 {
		t.Fatalf("trial reported twice: %+v, want CLOSED", s)
	}
	want := []Transition{{Closed, Open, 1, 1}, {Open, HalfOpen, 6, 2}, {HalfOpen, Closed, 6, 3}}
	if fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Fatalf("transitions %v, want %v", changes, want)
	}
	var zero Ticket
	zero.Done(0, false) // the zero Ticket reports nothing
	zero.Cancel()
}

// Calls that began before the breaker opened must not count afterwards.
func TestStaleGenerationIgnored(t *testing.T) {
	b := mustNew(t, Config{Threshold: 2, Recovery: 5})
	slowOK, _ := b.Allow(0)
	slowFail, _ := b.Allow(0)
	call(b, 1, false)
	call(b, 2, false) // OPEN at 2
	slowOK.Done(3, true)
	slowFail.Done(3, false)
	if s := b.Snapshot(); s.State != Open || s.Failures != 2 || s.OpenedAt != 2 {
		t.Fatalf("stragglers changed the breaker: %+v, want OPEN at 2 with 2 failures", s)
	}
	// A call that began in an earlier CLOSED generation is discarded even
	// when the breaker is CLOSED again when it reports.
	trial, _ := b.Allow(7)
	trial.Done(7, true)
	veryOld, _ := b.Allow(7)
	call(b, 8, false)
	call(b, 8, false) // OPEN at 8
	call(b, 13, true) // trial success: CLOSED
	veryOld.Done(14, false)
	if s := b.Snapshot(); s.State != Closed || s.Failures != 0 {
		t.Fatalf("%+v, want CLOSED with 0 failures", s)
	}
}

// The state-change hook runs without the lock: it may call the breaker.
func TestHookMayCallBreaker(t *testing.T) {
	var b *Breaker
	var seen []string
	b = mustNew(t, Config{Threshold: 1, Recovery: 5, OnStateChange: func(tr Transition) {
		seen = append(seen, tr.To.String()+"/"+b.Snapshot().State.String())
	}})
	call(b, 0, false)
	call(b, 5, true)
	if got := strings.Join(seen, " "); got != "OPEN/OPEN HALF_OPEN/HALF_OPEN CLOSED/CLOSED" {
		t.Fatalf("hook saw %q", got)
	}
}

// Many goroutines share a breaker; run with -race. The transitions the
// hook reports, ordered by generation, form a valid chain.
func TestConcurrent(t *testing.T) {
	var mu sync.Mutex
	var changes []Transition
	b := mustNew(t, Config{Threshold: 3, Recovery: 0.01, OnStateChange: func(tr Transition) {
		mu.Lock()
		changes = append(changes, tr)
		mu.Unlock()
	}})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rng.New(uint32(w))
			for i := 0; i < 3000; i++ {
				now := float64(i) * 0.001
				tk, err := b.Allow(now)
				if err != nil {
					continue
				}
				switch u := r.Float64(); {
				case u < 0.1:
					tk.Cancel()
				default:
					tk.Done(now, u > 0.6)
				}
			}
		}()
	}
	wg.Wait()
	sort.Slice(changes, func(i, j int) bool { return changes[i].Generation < changes[j].Generation })
	if len(changes) == 0 {
		t.Fatal("no state change in 24000 calls")
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

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		c     Config
		field string
	}{
		{Config{}, ""},
		{Config{Threshold: 10, Recovery: 0.5, Trials: 3}, ""},
		{Config{Threshold: -1}, "Config.Threshold"},
		{Config{Recovery: -1}, "Config.Recovery"},
		{Config{Recovery: math.NaN()}, "Config.Recovery"},
		{Config{Recovery: math.Inf(1)}, "Config.Recovery"},
		{Config{Trials: -2}, "Config.Trials"},
	} {
		b, err := New(c.c)
		switch {
		case c.field == "" && (err != nil || b == nil):
			t.Errorf("%+v: unexpected error %v", c.c, err)
		case c.field != "" && (err == nil || b != nil):
			t.Errorf("%+v: no error, want one about %s", c.c, c.field)
		case c.field != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.field) || !strings.HasPrefix(err.Error(), "breaker: ")):
			t.Errorf("%+v: error %q does not wrap ErrConfig or name %s", c.c, err, c.field)
		}
	}
}

// The zero Config is the seed's breaker: 3 failures, 5 s.
func TestZeroConfig(t *testing.T) {
	b := mustNew(t, Config{})
	got := []string{call(b, 0, false), call(b, 0, false), call(b, 0, false), call(b, 4.999, true), call(b, 5, true)}
	want := []string{"FAILURE CLOSED 1", "FAILURE CLOSED 2", "FAILURE OPEN 3", "REJECTED", "SUCCESS CLOSED"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

func TestNaNTimeRejectedWhileOpen(t *testing.T) {
	b := mustNew(t, Config{Threshold: 1})
	call(b, 0, false)
	if _, err := b.Allow(math.NaN()); err != ErrOpen {
		t.Fatalf("Allow(NaN) while OPEN: %v, want ErrOpen", err)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Closed: "CLOSED", Open: "OPEN", HalfOpen: "HALF_OPEN", 7: "State(7)"} {
		if got := s.String(); got != want {
			t.Errorf("%d: %q, want %q", uint8(s), got, want)
		}
	}
}

func BenchmarkAllowDone(b *testing.B) {
	br := mustNew(b, Config{})
	b.ReportAllocs()
	for b.Loop() {
		tk, err := br.Allow(1)
		if err == nil {
			tk.Done(1, true)
		}
	}
}

func BenchmarkAllowRejected(b *testing.B) {
	br := mustNew(b, Config{Threshold: 1, Recovery: 1e9})
	call(br, 0, false)
	b.ReportAllocs()
	for b.Loop() {
		br.Allow(1)
	}
}

func BenchmarkAllowDoneParallel(b *testing.B) {
	br := mustNew(b, Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, err := br.Allow(1)
			if err == nil {
				tk.Done(1, true)
			}
		}
	})
}
