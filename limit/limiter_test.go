package limit_test

import (
	"container/heap"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// scriptAlg is a fake Algorithm: it records every sample and returns the
// limits of its script in turn (the last one repeated).
type scriptAlg struct {
	limit   int
	script  []int
	samples []limit.Sample
}

var _ limit.Algorithm = (*scriptAlg)(nil)

func (a *scriptAlg) Update(s limit.Sample) int {
	a.samples = append(a.samples, s)
	if len(a.script) > 0 {
		a.limit, a.script = a.script[0], a.script[1:]
	}
	return a.limit
}

func (a *scriptAlg) Limit() int { return a.limit }

func mustFixed(t testing.TB, n int) *limit.Fixed {
	t.Helper()
	f, err := limit.NewFixed(n)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustLimiter(t testing.TB, alg limit.Algorithm, cfg limit.LimiterConfig) *limit.Limiter {
	t.Helper()
	l, err := limit.NewLimiter(alg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// step is one line of a step table: acquire a ticket of class (saving it in
// slot) or, when done is set, call Done on slot's ticket.
type step struct {
	now      float64
	done     bool
	class    shed.Class
	slot     int
	ok       bool // acquire only: want admitted
	inFlight int  // want after the step
}

func runSteps(t *testing.T, l *limit.Limiter, steps []step) {
	t.Helper()
	var tickets [16]limit.Ticket
	for i, s := range steps {
		if s.done {
			tickets[s.slot].Done(s.now, limit.Success)
		} else {
			var ok bool
			tickets[s.slot], ok = l.Acquire(s.now, s.class)
			if ok != s.ok {
				t.Fatalf("step %d: Acquire(%v, %v) ok = %v, want %v", i, s.now, s.class, ok, s.ok)
			}
			if tickets[s.slot].Admitted() != ok {
				t.Fatalf("step %d: Admitted() = %v, want %v", i, tickets[s.slot].Admitted(), ok)
			}
		}
		if got := l.InFlight(); got != s.inFlight {
			t.Fatalf("step %d: InFlight() = %d, want %d", i, got, s.inFlight)
		}
	}
}

// With Fixed(4) and the default shares the class limits are 4, 3, 2.
func TestLimiterSteps(t *testing.T) {
	l := mustLimiter(t, mustFixed(t, 4), limit.LimiterConfig{})
	runSteps(t, l, []step{
		{now: 0.00, class: shed.Sheddable, slot: 0, ok: true, inFlight: 1},
		{now: 0.01, class: shed.Sheddable, slot: 1, ok: true, inFlight: 2},
		{now: 0.02, class: shed.Sheddable, slot: 2, ok: false, inFlight: 2},
		{now: 0.03, class: shed.Default, slot: 3, ok: true, inFlight: 3},
		{now: 0.04, class: shed.Default, slot: 4, ok: false, inFlight: 3},
		{now: 0.05, class: shed.Critical, slot: 5, ok: true, inFlight: 4},
		{now: 0.06, class: shed.Critical, slot: 6, ok: false, inFlight: 4},
		{now: 0.07, done: true, slot: 0, inFlight: 3},
		{now: 0.08, class: shed.Sheddable, slot: 7, ok: false, inFlight: 3},
		{now: 0.09, class: shed.Default, slot: 8, ok: false, inFlight: 3},
		{now: 0.10, class: shed.Critical, slot: 9, ok: true, inFlight: 4},
		{now: 0.11, done: true, slot: 9, inFlight: 3},
		{now: 0.12, done: true, slot: 3, inFlight: 2},
		{now: 0.13, class: shed.Default, slot: 10, ok: true, inFlight: 3},
		{now: 0.14, done: true, slot: 1, inFlight: 2},
		{now: 0.15, class: shed.Sheddable, slot: 11, ok: false, inFlight: 2},
		{now: 0.16, done: true, slot: 5, inFlight: 1},
		{now: 0.17, class: shed.Sheddable, slot: 12, ok: true, inFlight: 2},
		{now: 0.18, class: 7, slot: 13, ok: false, inFlight: 2}, // unconfigured class = sheddable
		{now: 0.19, done: true, slot: 2, inFlight: 2},           // refused ticket: no effect
	})
	want := map[shed.Class]limit.ClassCounts{
		shed.Critical:  {Admitted: 2, Rejected: 1, Rejects: reasons(limit.ReasonLimit, 1)},
		shed.Default:   {Admitted: 2, Rejected: 2, Rejects: reasons(limit.ReasonLimit, 2)},
		shed.Sheddable: {Admitted: 3, Rejected: 4, Rejects: reasons(limit.ReasonLimit, 4)}, // slots 2, 7, 11, 13
	}
	for c, w := range want {
		if got := l.Counts(c); got != w {
			t.Errorf("Counts(%v) = %+v, want %+v", c, got, w)
		}
	}
}

func TestLimiterClassLimits(t *testing.T) {
	tests := []struct {
		limit  int
		shares []float64
		want   []int
	}{
		{1, nil, []int{1, 0, 0}},
		{2, nil, []int{2, 1, 1}},
		{3, nil, []int{3, 2, 1}},
		{7, nil, []int{7, 6, 3}},
		{10, nil, []int{10, 9, 5}},
		{100, nil, []int{100, 90, 50}},
		{1, []float64{0.5}, []int{1}}, // first class at least 1
		{9, []float64{0.5, 0.5, 0.25, 0.1}, []int{4, 4, 2, 0}},
	}
	for _, tt := range tests {
		l := mustLimiter(t, mustFixed(t, tt.limit), limit.LimiterConfig{Shares: tt.shares})
		if l.Classes() != len(tt.want) || l.Limit() != tt.limit {
			t.Fatalf("limit %d shares %v: Classes() = %d, Limit() = %d", tt.limit, tt.shares, l.Classes(), l.Limit())
		}
		for c, w := range tt.want {
			if got := l.ClassLimit(shed.Class(c)); got != w {
				t.Errorf("limit %d shares %v: ClassLimit(%d) = %d, want %d", tt.limit, tt.shares, c, got, w)
			}
		}
	}
}

// The class limits follow the algorithm's limit as Done feeds samples.
func TestLimiterFollowsAlgorithm(t *testing.T) {
	alg := &scriptAlg{limit: 10, script: []int{10, 4, 20}}
	l := mustLimiter(t, alg, limit.LimiterConfig{})
	want := [][3]int{{10, 9, 5}, {4, 3, 2}, {20, 18, 10}}
	for i, w := range want {
		tk, ok := l.Acquire(float64(i), shed.Critical)
		if !ok {
			t.Fatalf("sample %d: refused", i)
		}
		tk.Done(float64(i)+0.5, limit.Success)
		if l.Limit() != w[0] {
			t.Errorf("sample %d: Limit() = %d, want %d", i, l.Limit(), w[0])
		}
		for c := range 3 {
			if got := l.ClassLimit(shed.Class(c)); got != w[c] {
				t.Errorf("sample %d: ClassLimit(%d) = %d, want %d", i, c, got, w[c])
			}
		}
	}
}

// Regression for the habit "release is idempotent" (Netflix's listener is
// not): a second Done neither releases again nor samples again.
func TestLimiterDoneIdempotent(t *testing.T) {
	alg := &scriptAlg{limit: 5}
	l := mustLimiter(t, alg, limit.LimiterConfig{})
	a, _ := l.Acquire(1.0, shed.Default)
	b, _ := l.Acquire(1.25, shed.Critical)
	if l.InFlight() != 2 {
		t.Fatalf("InFlight() = %d, want 2", l.InFlight())
	}
	a.Done(1.5, limit.Success)
	a.Done(1.75, limit.Success)
	a.Done(2.0, limit.Dropped)
	if l.InFlight() != 1 {
		t.Fatalf("after double Done: InFlight() = %d, want 1", l.InFlight())
	}
	b.Done(2.25, limit.Dropped)
	b.Done(2.5, limit.Success)
	if l.InFlight() != 0 {
		t.Fatalf("InFlight() = %d, want 0", l.InFlight())
	}
	want := []limit.Sample{
		{Now: 1.5, RTT: 0.5, InFlight: 1},
		{Now: 2.25, RTT: 1, InFlight: 2, Dropped: true},
	}
	if len(alg.samples) != len(want) {
		t.Fatalf("got %d samples %+v, want %d", len(alg.samples), alg.samples, len(want))
	}
	for i, w := range want {
		if alg.samples[i] != w {
			t.Errorf("sample %d = %+v, want %+v", i, alg.samples[i], w)
		}
	}
}

// Concurrent Done on one ticket (a timeout racing a completion): one
// release, one sample.
func TestLimiterDoneRace(t *testing.T) {
	alg := &scriptAlg{limit: 100}
	l := mustLimiter(t, alg, limit.LimiterConfig{})
	for range 50 {
		tk, ok := l.Acquire(0, shed.Critical)
		if !ok {
			t.Fatal("refused")
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { tk.Done(1, limit.Success) })
		}
		wg.Wait()
	}
	if l.InFlight() != 0 || len(alg.samples) != 50 {
		t.Fatalf("InFlight() = %d, samples = %d; want 0, 50", l.InFlight(), len(alg.samples))
	}
}

func TestLimiterIgnore(t *testing.T) {
	alg := &scriptAlg{limit: 1}
	l := mustLimiter(t, alg, limit.LimiterConfig{})
	tk, ok := l.Acquire(0, shed.Critical)
	if !ok {
		t.Fatal("refused")
	}
	if _, ok := l.Acquire(0, shed.Critical); ok {
		t.Fatal("admitted over the limit")
	}
	tk.Done(0.1, limit.Ignore)
	tk.Done(0.2, limit.Success) // already done
	if l.InFlight() != 0 {
		t.Fatalf("InFlight() = %d, want 0", l.InFlight())
	}
	if len(alg.samples) != 0 {
		t.Fatalf("Ignore fed %d samples, want 0", len(alg.samples))
	}
	if _, ok := l.Acquire(0.3, shed.Critical); !ok {
		t.Fatal("place not released by Ignore")
	}
	var zero limit.Ticket
	zero.Done(1, limit.Success) // zero ticket: nothing
	if len(alg.samples) != 0 || l.InFlight() != 1 {
		t.Fatalf("zero ticket: samples = %d, InFlight() = %d; want 0, 1", len(alg.samples), l.InFlight())
	}
}

func TestLimiterUnknownOutcome(t *testing.T) {
	alg := &scriptAlg{limit: 1}
	l := mustLimiter(t, alg, limit.LimiterConfig{})
	tk, _ := l.Acquire(0, shed.Critical)
	tk.Done(1, limit.Outcome(9))
	if l.InFlight() != 0 || len(alg.samples) != 0 {
		t.Fatalf("InFlight() = %d, samples = %d; want 0, 0", l.InFlight(), len(alg.samples))
	}
	if got := limit.Outcome(9).String(); got != "outcome 9" {
		t.Errorf("String() = %q", got)
	}
}

func TestLimiterConfigErrors(t *testing.T) {
	tests := []struct {
		alg    limit.Algorithm
		shares []float64
		field  string
	}{
		{nil, nil, "alg"},
		{mustFixed(t, 1), []float64{}, "Shares"},
		{mustFixed(t, 1), make([]float64, 9), "Shares"},
		{mustFixed(t, 1), []float64{0}, "Shares[0]"},
		{mustFixed(t, 1), []float64{1.5}, "Shares[0]"},
		{mustFixed(t, 1), []float64{1, -0.5}, "Shares[1]"},
		{mustFixed(t, 1), []float64{1, nan()}, "Shares[1]"},
		{mustFixed(t, 1), []float64{0.5, 0.9}, "Shares[1]"},
	}
	for _, tt := range tests {
		_, err := limit.NewLimiter(tt.alg, limit.LimiterConfig{Shares: tt.shares})
		var ce *limit.ConfigError
		if !errors.Is(err, limit.ErrConfig) || !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("shares %v: err = %v, want a ConfigError for %s", tt.shares, err, tt.field)
		}
	}
}

func nan() float64 { z := 0.0; return z / z }

// Many goroutines acquire and finish at once; the in-flight count measured
// outside the Limiter never exceeds the limit.
func TestLimiterConcurrent(t *testing.T) {
	const (
		workers = 8
		iters   = 2000
		lim     = 5
	)
	l := mustLimiter(t, mustFixed(t, lim), limit.LimiterConfig{})
	var cur, peak atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range iters {
				tk, ok := l.Acquire(float64(i), shed.Class((w+i)%3))
				if !ok {
					continue
				}
				n := cur.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				runtime.Gosched()
				cur.Add(-1)
				out := limit.Outcome(i % 3)
				tk.Done(float64(i)+0.001, out)
				tk.Done(float64(i)+0.002, out)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > lim || p < 1 {
		t.Errorf("peak in flight = %d, want 1..%d", p, lim)
	}
	if l.InFlight() != 0 {
		t.Errorf("InFlight() = %d after all Done", l.InFlight())
	}
	var total uint64
	for c := range 3 {
		k := l.Counts(shed.Class(c))
		total += k.Admitted + k.Rejected
	}
	if total != workers*iters {
		t.Errorf("admitted + rejected = %d, want %d", total, workers*iters)
	}
	t.Logf("peak in flight %d of %d", peak.Load(), lim)
}

// The same with an adaptive algorithm changing the limits concurrently:
// never more than MaxLimit in flight.
func TestLimiterConcurrentGradient(t *testing.T) {
	const maxLimit = 6
	g, err := limit.NewGradient(limit.GradientConfig{InitialLimit: 4, MaxLimit: maxLimit})
	if err != nil {
		t.Fatal(err)
	}
	l := mustLimiter(t, g, limit.LimiterConfig{})
	var cur, peak atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				now := float64(i) * 0.001
				tk, ok := l.Acquire(now, shed.Class((w+i)%3))
				if !ok {
					continue
				}
				n := cur.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				runtime.Gosched()
				cur.Add(-1)
				out := limit.Success
				if i%50 == 0 {
					out = limit.Dropped
				}
				tk.Done(now+0.0005*float64(1+n), out)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > maxLimit {
		t.Errorf("peak in flight = %d > MaxLimit %d", p, maxLimit)
	}
	if l.InFlight() != 0 {
		t.Errorf("InFlight() = %d after all Done", l.InFlight())
	}
}

// A small open-loop driver in virtual time: a server with true concurrency
// C and base latency L (a request started with n in flight, itself
// included, takes L × max(1, n/C)) is offered twice its capacity C/L, one
// request every L/(2C) seconds, classes cycling critical, default, default,
// sheddable, sheddable (20/40/40%). Gradient finds the limit; the shares
// decide who is refused.

type vtDone struct {
	at float64
	tk *limit.Ticket
}

type vtHeap []vtDone

func (h vtHeap) Len() int           { return len(h) }
func (h vtHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h vtHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *vtHeap) Push(x any)        { *h = append(*h, x.(vtDone)) }
func (h *vtHeap) Pop() any          { o := *h; e := o[len(o)-1]; *h = o[:len(o)-1]; return e }

func TestLimiterGradientOverload(t *testing.T) {
	const (
		C   = 20
		L   = 0.010
		dur = 10.0
	)
	g, err := limit.NewGradient(limit.GradientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := mustLimiter(t, g, limit.LimiterConfig{})
	mix := [5]shed.Class{shed.Critical, shed.Default, shed.Default, shed.Sheddable, shed.Sheddable}
	var offered [3]int
	h := &vtHeap{}
	gap := L / (2 * C)
	served := 0
	var limitSum float64
	n := int(dur / gap)
	for i := range n {
		now := float64(i) * gap
		for h.Len() > 0 && (*h)[0].at <= now {
			d := heap.Pop(h).(vtDone)
			d.tk.Done(d.at, limit.Success)
			served++
		}
		c := mix[i%len(mix)]
		offered[c]++
		tk := new(limit.Ticket)
		var ok bool
		if *tk, ok = l.Acquire(now, c); ok {
			inFlight := l.InFlight()
			heap.Push(h, vtDone{at: now + L*max(1, float64(inFlight)/C), tk: tk})
		}
		limitSum += float64(l.Limit())
	}
	var rej [3]uint64
	var totalRej uint64
	for c := range 3 {
		k := l.Counts(shed.Class(c))
		if k.Admitted+k.Rejected != uint64(offered[c]) {
			t.Fatalf("class %d: counts %+v, offered %d", c, k, offered[c])
		}
		rej[c] = k.Rejected
		totalRej += k.Rejected
	}
	okPct := func(c int) float64 { return 100 * (1 - float64(rej[c])/float64(offered[c])) }
	goodput := float64(served) / dur
	t.Logf("mean limit %.1f, goodput %.0f/s of %d/s capacity; admitted %% critical %.2f default %.2f sheddable %.2f; sheddable share of rejects %.1f%%",
		limitSum/float64(n), goodput, C*int(1/L), okPct(0), okPct(1), okPct(2), 100*float64(rej[2])/float64(totalRej))
	if okPct(0) < 99 {
		t.Errorf("critical admitted %.2f%%, want ≥ 99%%", okPct(0))
	}
	if !(okPct(2) < okPct(1) && okPct(1) <= okPct(0)) {
		t.Errorf("admitted %% not ordered by class: %.2f %.2f %.2f", okPct(0), okPct(1), okPct(2))
	}
	if float64(rej[2]) < 0.5*float64(totalRej) {
		t.Errorf("sheddable took %d of %d rejections, want at least half", rej[2], totalRej)
	}
	if goodput < 0.9*C/L {
		t.Errorf("goodput %.0f/s < 90%% of capacity %.0f/s", goodput, C/L)
	}
}

// A limit of 2 with the default shares: critical may fill both places,
// default and sheddable only floor(0.9×2) = floor(0.5×2) = 1.
func ExampleLimiter() {
	alg, _ := limit.NewFixed(2)
	l, _ := limit.NewLimiter(alg, limit.LimiterConfig{})

	prefetch, ok := l.Acquire(0.000, shed.Sheddable)
	fmt.Println("sheddable:", ok)
	_, ok = l.Acquire(0.001, shed.Sheddable)
	fmt.Println("sheddable:", ok)
	checkout, ok := l.Acquire(0.002, shed.Critical)
	fmt.Println("critical:", ok)
	_, ok = l.Acquire(0.003, shed.Critical)
	fmt.Println("critical:", ok)

	prefetch.Done(0.020, limit.Success)
	prefetch.Done(0.021, limit.Dropped) // a second Done does nothing
	checkout.Done(0.030, limit.Ignore)  // e.g. the client went away
	fmt.Println("in flight:", l.InFlight())
	k := l.Counts(shed.Sheddable)
	fmt.Printf("sheddable admitted %d, rejected %d\n", k.Admitted, k.Rejected)
	// Output:
	// sheddable: true
	// sheddable: false
	// critical: true
	// critical: false
	// in flight: 0
	// sheddable admitted 1, rejected 1
}

func BenchmarkLimiterAcquireDone(b *testing.B) {
	l := mustLimiter(b, mustFixed(b, 1000), limit.LimiterConfig{})
	b.ReportAllocs()
	now := 0.0
	for b.Loop() {
		tk, ok := l.Acquire(now, shed.Default)
		if !ok {
			b.Fatal("refused")
		}
		now += 1e-3
		tk.Done(now, limit.Success)
	}
}

func BenchmarkLimiterAcquireDoneGradient(b *testing.B) {
	g, err := limit.NewGradient(limit.GradientConfig{})
	if err != nil {
		b.Fatal(err)
	}
	l := mustLimiter(b, g, limit.LimiterConfig{})
	b.ReportAllocs()
	now := 0.0
	for b.Loop() {
		tk, ok := l.Acquire(now, shed.Critical)
		if !ok {
			b.Fatal("refused")
		}
		now += 1e-3
		tk.Done(now, limit.Success)
	}
}

func BenchmarkLimiterReject(b *testing.B) {
	l := mustLimiter(b, mustFixed(b, 1), limit.LimiterConfig{})
	held, _ := l.Acquire(0, shed.Critical)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := l.Acquire(0, shed.Critical); ok {
			b.Fatal("admitted")
		}
	}
	held.Done(1, limit.Ignore)
}

func BenchmarkLimiterAcquireDoneParallel(b *testing.B) {
	l := mustLimiter(b, mustFixed(b, 1<<20), limit.LimiterConfig{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := 0.0
		for pb.Next() {
			tk, ok := l.Acquire(now, shed.Default)
			if !ok {
				b.Fatal("refused")
			}
			now += 1e-3
			tk.Done(now, limit.Success)
		}
	})
}

// reasons returns a Rejects array with n refusals for r.
func reasons(r limit.Reason, n uint64) (a [limit.NumReasons]uint64) {
	a[r] = n
	return a
}
