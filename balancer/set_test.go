package balancer

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

func endpoints(addrs ...string) []Endpoint {
	eps := make([]Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = Endpoint{Addr: a}
	}
	return eps
}

func newSet(t *testing.T, cfg SetConfig) *Set {
	t.Helper()
	s, err := NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// addrs lists a snapshot's eligible endpoints in index order.
func addrs(s *Snapshot) []string {
	out := make([]string, s.Len())
	for i := range out {
		out[i] = s.Endpoint(i).Addr()
	}
	return out
}

// find returns the index of addr in s, or -1.
func find(s *Snapshot, addr string) int {
	for i := 0; i < s.Len(); i++ {
		if s.Endpoint(i).Addr() == addr {
			return i
		}
	}
	return -1
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

func TestSetConfigValidate(t *testing.T) {
	bad := []struct {
		cfg   SetConfig
		field string
	}{
		{SetConfig{SlowStart: -1}, "SetConfig.SlowStart"},
		{SetConfig{SlowStart: math.Inf(1)}, "SetConfig.SlowStart"},
		{SetConfig{SlowStart: math.NaN()}, "SetConfig.SlowStart"},
		{SetConfig{SlowStartMin: -0.1}, "SetConfig.SlowStartMin"},
		{SetConfig{SlowStartMin: 1.5}, "SetConfig.SlowStartMin"},
		{SetConfig{PanicThreshold: 1.01}, "SetConfig.PanicThreshold"},
		{SetConfig{PanicThreshold: math.NaN()}, "SetConfig.PanicThreshold"},
		{SetConfig{LatencyDecay: -2}, "SetConfig.LatencyDecay"},
		{SetConfig{Tables: make([]TableBuilder, MaxTables+1)}, "SetConfig.Tables"},
		{SetConfig{Tables: []TableBuilder{nil}}, "SetConfig.Tables[0]"},
	}
	for _, c := range bad {
		_, err := NewSet(c.cfg)
		var ce *ConfigError
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("NewSet(%+v): got %v; want a *ConfigError on %s", c.cfg, err, c.field)
		}
	}
	s := newSet(t, SetConfig{PanicThreshold: -1, SlowStart: 30})
	got := s.Config()
	if got.SlowStartMin != 0.1 || got.PanicThreshold != -1 || got.LatencyDecay != 10 || got.SlowStart != 30 {
		t.Errorf("defaults: got %+v", got)
	}
	if s.Snapshot() == nil || s.Snapshot().Len() != 0 {
		t.Error("a new set must publish an empty snapshot")
	}
}

func TestStateString(t *testing.T) {
	for st, want := range map[State]string{Healthy: "healthy", SlowStarting: "slow-starting", Draining: "draining",
		Ejected: "ejected", Unhealthy: "unhealthy", State(9): "state(9)"} {
		if st.String() != want {
			t.Errorf("%d: got %q, want %q", st, st.String(), want)
		}
	}
}

// A pick on a snapshot taken before an Update still works and returns one
// of that snapshot's endpoints; the new snapshot sees only the new list.
func TestSnapshotIsolation(t *testing.T) {
	s := newSet(t, SetConfig{})
	s.Update(0, endpoints("a", "b", "c"))
	old := s.Snapshot()
	s.Update(1, endpoints("d"))
	if got := addrs(s.Snapshot()); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("new snapshot: %v", got)
	}
	if got := addrs(old); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("old snapshot changed: %v", got)
	}
	p := &WeightedRandom{Rand: rng.New(7)}
	for k := 0; k < 100; k++ {
		i, err := p.Pick(old, 2)
		if err != nil || i < 0 || i >= 3 {
			t.Fatalf("pick on old snapshot: %d, %v", i, err)
		}
		e := old.Endpoint(i)
		e.Start()
		e.Done(2, 0.01, true)
		if e.InFlight() != 0 {
			t.Fatalf("%s: in flight %d after Start/Done", e.Addr(), e.InFlight())
		}
	}
	if old.Version() >= s.Snapshot().Version() {
		t.Errorf("versions: old %d, new %d", old.Version(), s.Snapshot().Version())
	}
}

// Update keeps the EndpointState (counters, estimate) of endpoints that
// stay, takes their new weight and Meta, and forgets removed ones.
func TestUpdateKeepsCounters(t *testing.T) {
	s := newSet(t, SetConfig{})
	s.Update(0, endpoints("a", "b"))
	snap := s.Snapshot()
	a := snap.Endpoint(find(snap, "a"))
	b := snap.Endpoint(find(snap, "b"))
	a.Start()
	a.Start()
	a.Done(0.5, 0.2, true)
	a.Start() // 2 in flight
	b.Start()

	s.Update(1, []Endpoint{{Addr: "c"}, {Addr: "a", Weight: 3, Meta: map[string]string{"zone": "z1"}}, {Addr: "a", Weight: 9}})
	snap = s.Snapshot()
	if got := addrs(snap); !slices.Equal(got, []string{"c", "a"}) {
		t.Fatalf("after update: %v (duplicates: first wins)", got)
	}
	ia := find(snap, "a")
	if snap.Endpoint(ia) != a {
		t.Fatal("a staying endpoint must keep its EndpointState")
	}
	if a.InFlight() != 2 || snap.Load(ia) != 2 {
		t.Errorf("a in flight: %d, Load %d; want 2", a.InFlight(), snap.Load(ia))
	}
	if got := a.Latency(0.5); got != float64(float32(0.2)) {
		t.Errorf("a latency estimate %v, want 0.2 kept", got)
	}
	if snap.BaseWeight(ia) != 3 || a.Endpoint().Weight != 3 || a.Endpoint().Meta["zone"] != "z1" {
		t.Errorf("a description not updated: base %d, %+v", snap.BaseWeight(ia), a.Endpoint())
	}
	if snap.EqualWeights() || snap.TotalWeight() != 4 {
		t.Errorf("weights: equal %v total %v", snap.EqualWeights(), snap.TotalWeight())
	}
	if _, ok := s.State(1, "b"); ok || s.Len() != 2 {
		t.Error("b must be forgotten")
	}
	// b's request completes on its old state without harm.
	b.Done(1.5, 0.1, true)
	if b.InFlight() != 0 {
		t.Error("b's old state must still count")
	}
	// b comes back: a new endpoint with fresh counters.
	s.Update(2, endpoints("a", "b", "c"))
	snap = s.Snapshot()
	if nb := snap.Endpoint(find(snap, "b")); nb == b || nb.InFlight() != 0 {
		t.Error("a re-added address must get a new EndpointState")
	}
	// An identical update publishes nothing.
	v := s.Snapshot().Version()
	s.Update(3, endpoints("a", "b", "c"))
	if s.Snapshot().Version() != v {
		t.Error("an unchanged list must not republish")
	}
	// Unknown addresses are ignored by the state methods.
	if s.SetHealthy(4, "zz", false) || s.Eject(4, "zz", 9) || s.Uneject(4, "zz") || s.Drain(4, "zz", true) {
		t.Error("unknown address reported as known")
	}
}

// Drain: no new picks, in-flight requests unaffected; ending it brings the
// endpoint back at full weight (it never left service).
func TestDrain(t *testing.T) {
	s := newSet(t, SetConfig{SlowStart: 30})
	s.Update(0, endpoints("a", "b", "c"))
	snap := s.Snapshot()
	a := snap.Endpoint(find(snap, "a"))
	a.Start()
	if !s.Drain(5, "a", true) {
		t.Fatal("a unknown")
	}
	snap = s.Current(5)
	if find(snap, "a") >= 0 || snap.Len() != 2 || snap.Draining() != 1 || snap.Healthy() != 2 {
		t.Fatalf("draining a still eligible: %v (draining %d)", addrs(snap), snap.Draining())
	}
	if st, _ := s.State(5, "a"); st != Draining {
		t.Errorf("state %v", st)
	}
	for _, p := range []SetPicker{&WeightedRandom{Rand: rng.New(1)}, &LeastRequest{Rand: rng.New(2)},
		&PeakEWMA{Rand: rng.New(3)}, &SmoothWeighted{}, Loaded{&LeastOutstanding{}}} {
		for k := 0; k < 200; k++ {
			e, err := s.Pick(5, p)
			if err != nil || e == a {
				t.Fatalf("%T picked %v, %v", p, e, err)
			}
			e.Done(5, 0.01, true)
		}
	}
	if a.InFlight() != 1 {
		t.Errorf("drain must not touch in-flight requests: %d", a.InFlight())
	}
	a.Done(6, 0.05, true)
	if a.InFlight() != 0 {
		t.Error("in-flight request could not complete")
	}
	s.Drain(7, "a", false)
	snap = s.Current(7)
	if i := find(snap, "a"); i < 0 || snap.Weight(i) != 1 || snap.State(i) != Healthy {
		t.Fatalf("undrained a: %v", addrs(snap))
	}
}

// Slow start: not at the first Update; linear ramp from SlowStartMin for an
// endpoint back from unhealthy, one back from ejection (from its deadline,
// however late the republication) and one added later.
func TestSlowStartRamp(t *testing.T) {
	const w = 30.0
	s := newSet(t, SetConfig{SlowStart: w})
	s.Update(0, []Endpoint{{Addr: "a", Weight: 2}, {Addr: "b", Weight: 2}, {Addr: "c", Weight: 2}})
	snap := s.Snapshot()
	for i := 0; i < 3; i++ {
		if snap.State(i) != Healthy || snap.Weight(i) != 2 {
			t.Fatalf("first update must not ramp: %v %v", snap.State(i), snap.Weight(i))
		}
	}
	if !math.IsInf(snap.Due(), 1) {
		t.Errorf("nothing pending, Due = %v", snap.Due())
	}

	s.SetHealthy(10, "a", false)
	if st, _ := s.State(10, "a"); st != Unhealthy || find(s.Current(10), "a") >= 0 {
		t.Fatal("unhealthy a still eligible")
	}
	s.SetHealthy(20, "a", true)
	// weight at t = 20 + e: 2 × max(0.1, e/30), SlowStarting until e = 30.
	steps := []struct {
		now, weight float64
		state       State
	}{
		{20, 0.2, SlowStarting},
		{21.5, 0.2, SlowStarting}, // 1.5/30 = 0.05 < 0.1
		{26, 0.4, SlowStarting},
		{35, 1.0, SlowStarting}, // mid-ramp
		{44, 1.6, SlowStarting},
		{50, 2, Healthy}, // the end
		{80, 2, Healthy},
	}
	for _, st := range steps {
		snap := s.Current(st.now)
		i := find(snap, "a")
		if i < 0 {
			t.Fatalf("t=%v: a not eligible", st.now)
		}
		if !near(snap.Weight(i), st.weight) || snap.State(i) != st.state {
			t.Errorf("t=%v: weight %v %v; want %v %v", st.now, snap.Weight(i), snap.State(i), st.weight, st.state)
		}
		if got, _ := s.State(st.now, "a"); got != st.state {
			t.Errorf("t=%v: Set.State %v, want %v", st.now, got, st.state)
		}
		if st.state == SlowStarting && !near(snap.Due(), min(st.now+w/RampSteps, 50)) {
			t.Errorf("t=%v: Due %v", st.now, snap.Due())
		}
	}
	// Without a call to Current the snapshot is not republished.
	s.SetHealthy(100, "b", false)
	s.SetHealthy(100, "b", true)
	if snap := s.Snapshot(); !near(snap.Weight(find(snap, "b")), 0.2) {
		t.Fatal("b must restart at the minimum")
	}
	if snap := s.Snapshot(); snap.At() != 100 {
		t.Errorf("At %v", snap.At())
	}

	// Ejected from 200 to 210; first looked at again at 225: the ramp began
	// at the deadline, so the weight is 2 × 15/30.
	s.Eject(200, "c", 210)
	if snap := s.Current(209.9); find(snap, "c") >= 0 || snap.Due() > 210 {
		t.Fatalf("ejected c eligible or Due %v", snap.Due())
	}
	if st, _ := s.State(205, "c"); st != Ejected {
		t.Errorf("state %v", st)
	}
	snap = s.Current(225)
	if i := find(snap, "c"); i < 0 || !near(snap.Weight(i), 1.0) || snap.State(i) != SlowStarting {
		t.Fatalf("c after ejection: %v", addrs(snap))
	}

	// Added after the first update: ramps from its arrival.
	s.Update(300, []Endpoint{{Addr: "a", Weight: 2}, {Addr: "b", Weight: 2}, {Addr: "c", Weight: 2}, {Addr: "d", Weight: 2}})
	for _, st := range []struct{ now, weight float64 }{{300, 0.2}, {315, 1}, {330, 2}} {
		snap := s.Current(st.now)
		if i := find(snap, "d"); !near(snap.Weight(i), st.weight) {
			t.Errorf("d at %v: weight %v, want %v", st.now, snap.Weight(i), st.weight)
		}
	}
}

// Endpoints that start unhealthy (NewUnhealthy) and pass their first check
// were never seen in service: no ramp. Once seen down, they ramp.
func TestSlowStartNotAtStart(t *testing.T) {
	s := newSet(t, SetConfig{SlowStart: 10, SlowStartMin: 0.5, NewUnhealthy: true, PanicThreshold: -1})
	s.Update(0, endpoints("a", "b"))
	if _, err := (&WeightedRandom{}).Pick(s.Snapshot(), 0); !errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("new endpoints must wait for a check: %v", err)
	}
	s.SetHealthy(1, "a", true)
	s.SetHealthy(1, "b", true)
	snap := s.Snapshot()
	if snap.Len() != 2 || snap.Weight(0) != 1 || snap.Weight(1) != 1 {
		t.Fatalf("first checks: %v weights %v %v", addrs(snap), snap.Weight(0), snap.Weight(1))
	}
	s.SetHealthy(2, "a", false)
	s.SetHealthy(3, "a", true)
	snap = s.Current(3)
	if i := find(snap, "a"); snap.Weight(i) != 0.5 || snap.State(i) != SlowStarting {
		t.Errorf("a seen down must ramp from 0.5: %v", snap.Weight(i))
	}
	// Added later, it ramps from its first healthy check.
	s.Update(4, endpoints("a", "b", "c"))
	if find(s.Current(4), "c") >= 0 {
		t.Fatal("c must wait for its check")
	}
	s.SetHealthy(8, "c", true)
	if snap := s.Current(10.5); !near(snap.Weight(find(snap, "c")), 0.5) {
		t.Errorf("c at 10.5: %v", snap.Weight(find(snap, "c")))
	}
	if snap := s.Current(16); !near(snap.Weight(find(snap, "c")), 0.8) {
		t.Errorf("c at 16: %v", snap.Weight(find(snap, "c")))
	}
}

// Panic mode: below the threshold share of healthy endpoints every
// endpoint that is not draining is eligible; at or above it only healthy
// ones.
func TestPanicThreshold(t *testing.T) {
	s := newSet(t, SetConfig{})
	s.Update(0, endpoints("a", "b", "c", "d"))
	s.SetHealthy(1, "a", false)
	s.SetHealthy(1, "b", false) // 2 of 4 = 50%: not below
	snap := s.Snapshot()
	if snap.Panic() || !slices.Equal(addrs(snap), []string{"c", "d"}) || snap.Healthy() != 2 {
		t.Fatalf("at 50%%: panic %v, %v", snap.Panic(), addrs(snap))
	}
	s.Eject(2, "c", 100) // 1 of 4 = 25%
	snap = s.Snapshot()
	if !snap.Panic() || !slices.Equal(addrs(snap), []string{"a", "b", "c", "d"}) {
		t.Fatalf("at 25%%: panic %v, %v", snap.Panic(), addrs(snap))
	}
	wantStates := []State{Unhealthy, Unhealthy, Ejected, Healthy}
	for i, want := range wantStates {
		if snap.State(i) != want {
			t.Errorf("panic snapshot state %d: %v, want %v", i, snap.State(i), want)
		}
	}
	// Draining is never overridden: 1 healthy of 3 non-draining is still panic.
	s.Drain(3, "a", true)
	snap = s.Snapshot()
	if !snap.Panic() || !slices.Equal(addrs(snap), []string{"b", "c", "d"}) {
		t.Fatalf("panic with a draining: %v %v", snap.Panic(), addrs(snap))
	}
	// b recovers: 2 of 3 non-draining.
	s.SetHealthy(4, "b", true)
	snap = s.Snapshot()
	if snap.Panic() || !slices.Equal(addrs(snap), []string{"b", "d"}) {
		t.Fatalf("recovered: %v %v", snap.Panic(), addrs(snap))
	}

	// A custom threshold, and panic mode off.
	s30 := newSet(t, SetConfig{PanicThreshold: 0.3})
	off := newSet(t, SetConfig{PanicThreshold: -1})
	for _, set := range []*Set{s30, off} {
		set.Update(0, endpoints("a", "b", "c", "d", "e", "f", "g", "h", "i", "j"))
		for _, a := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			set.SetHealthy(1, a, false)
		}
	}
	if snap := s30.Snapshot(); snap.Panic() || snap.Len() != 3 { // 30%: not below
		t.Errorf("threshold 0.3 at 30%%: panic %v len %d", snap.Panic(), snap.Len())
	}
	s30.SetHealthy(2, "h", false)
	if snap := s30.Snapshot(); !snap.Panic() || snap.Len() != 10 {
		t.Errorf("threshold 0.3 at 20%%: panic %v len %d", snap.Panic(), snap.Len())
	}
	for _, a := range []string{"h", "i", "j"} {
		off.SetHealthy(2, a, false)
	}
	if snap := off.Snapshot(); snap.Panic() || snap.Len() != 0 {
		t.Errorf("panic off, none healthy: panic %v len %d", snap.Panic(), snap.Len())
	}
	if _, err := off.Pick(3, &LeastRequest{}); !errors.Is(err, ErrNoEndpoints) {
		t.Errorf("pick with nothing eligible: %v", err)
	}
}

// Ejection: deadlines, replacement, Uneject.
func TestEject(t *testing.T) {
	s := newSet(t, SetConfig{PanicThreshold: -1})
	s.Update(0, endpoints("a", "b"))
	if !s.Eject(1, "a", 1) || s.Snapshot().Len() != 2 {
		t.Fatal("an until not after now must change nothing")
	}
	s.Eject(1, "a", 10)
	s.Eject(2, "a", 20) // replaces the deadline
	if snap := s.Current(15); snap.Len() != 1 || snap.Due() != 20 {
		t.Fatalf("at 15: %v due %v", addrs(snap), snap.Due())
	}
	if snap := s.Current(20); snap.Len() != 2 {
		t.Fatalf("at 20: %v", addrs(snap))
	}
	s.Eject(21, "b", 50)
	s.Uneject(22, "b")
	if snap := s.Snapshot(); snap.Len() != 2 {
		t.Fatalf("after Uneject: %v", addrs(snap))
	}
	// Unhealthy and ejected: back only when both clear.
	s.SetHealthy(30, "a", false)
	s.Eject(30, "a", 40)
	s.SetHealthy(35, "a", true)
	if snap := s.Current(35); find(snap, "a") >= 0 {
		t.Fatal("a still ejected")
	}
	if snap := s.Current(40); find(snap, "a") < 0 {
		t.Fatal("a must be back at its deadline")
	}
	// A mutation after the deadline also ends the ejection.
	s.Eject(50, "a", 60)
	s.Drain(61, "b", false) // no change to b, but a's ejection ended
	if snap := s.Snapshot(); find(snap, "a") < 0 {
		t.Fatal("ejection not ended by a later mutation")
	}
}

// The latency estimate: first sample taken as is; a higher sample replaces
// it at once (peak); a lower one moves it by 1 − exp(−Δt/τ); a failure can
// only raise it; reading decays it toward 0.
func TestEndpointEWMA(t *testing.T) {
	s := newSet(t, SetConfig{LatencyDecay: 2})
	s.Update(0, endpoints("a"))
	e := s.Snapshot().Endpoint(0)
	if e.Latency(0) != 0 {
		t.Fatal("no sample must read 0")
	}
	f32 := func(x float64) float64 { return float64(float32(x)) }
	check := func(now, want float64) {
		t.Helper()
		if got := e.Latency(now); math.Abs(got-want) > 1e-6*want {
			t.Errorf("Latency(%v) = %v, want %v", now, got, want)
		}
	}
	e.Start()
	e.Done(1, 0.1, true)
	check(1, 0.1)
	e.Start()
	e.Done(2, 0.5, true) // peak
	check(2, f32(0.5))
	e.Start()
	e.Done(4, 0.1, true) // Δt = 2 = τ
	w := math.Exp(-1)
	v := f32(f32(0.5)*w + 0.1*(1-w))
	check(4, v)
	check(6, v*math.Exp(-1)) // read decay over τ
	e.Start()
	e.Done(6, 0.01, false) // a fast failure does not lower it
	check(6, v*math.Exp(-1))
	e.Start()
	e.Done(7, 2, false) // a slow failure raises it
	check(7, 2)
	e.Start()
	e.Done(6.5, 0.2, true) // an older instant: Δt = 0, no movement toward the sample
	check(7, 2)
	e.Start()
	e.Done(8, math.NaN(), true)
	e.Start()
	e.Done(8, -1, true)
	check(7, 2)
	if e.InFlight() != 0 {
		t.Errorf("in flight %d", e.InFlight())
	}

	// An endpoint joining a running set starts at the others' mean estimate.
	s2 := newSet(t, SetConfig{LatencyDecay: 1000})
	s2.Update(0, endpoints("a", "b", "c"))
	snap := s2.Snapshot()
	snap.Endpoint(0).Done(1, 0.1, true)
	snap.Endpoint(1).Done(1, 0.3, true)
	s2.Update(1, endpoints("a", "b", "c", "d"))
	d := s2.Snapshot().Endpoint(3)
	if got := d.Latency(1); math.Abs(got-0.2) > 1e-6 {
		t.Errorf("seeded estimate %v, want 0.2", got)
	}
}

// countingBuilder counts builds and returns the ids it was given.
type countingBuilder struct{ builds atomic.Int32 }

func (b *countingBuilder) BuildTable(ids []string, weights []int) (any, error) {
	b.builds.Add(1)
	return append([]string(nil), ids...), nil
}

// The table hook: one build per membership; slow-start steps and changes
// that leave the eligible list alone reuse it; eager builders are built at
// publication.
func TestSnapshotTable(t *testing.T) {
	lazy := &countingBuilder{}
	eager := &countingBuilder{}
	s := newSet(t, SetConfig{SlowStart: 10, Tables: []TableBuilder{eager}})
	s.Update(0, endpoints("a", "b", "c"))
	if eager.builds.Load() != 2 { // the empty set, then a b c
		t.Errorf("eager builds %d, want 2", eager.builds.Load())
	}
	snap := s.Snapshot()
	for k := 0; k < 3; k++ {
		v, err := snap.Table(lazy)
		if err != nil || !slices.Equal(v.([]string), []string{"a", "b", "c"}) {
			t.Fatalf("table %v, %v", v, err)
		}
	}
	if v, _ := snap.Table(eager); !slices.Equal(v.([]string), []string{"a", "b", "c"}) || eager.builds.Load() != 2 {
		t.Errorf("eager table %v after %d builds", v, eager.builds.Load())
	}
	if lazy.builds.Load() != 1 {
		t.Fatalf("lazy builds %d, want 1", lazy.builds.Load())
	}
	// c goes down and comes back: two new memberships ...
	s.SetHealthy(1, "c", false)
	s.SetHealthy(2, "c", true)
	snap = s.Current(2)
	snap.Table(lazy)
	if lazy.builds.Load() != 2 {
		t.Errorf("lazy builds %d, want 2", lazy.builds.Load())
	}
	// ... then slow-start steps republish without rebuilding.
	for now := 2.5; now <= 13; now += 0.5 {
		s.Current(now).Table(lazy)
	}
	if lazy.builds.Load() != 2 || s.Current(13).Version() <= snap.Version() {
		t.Errorf("slow-start steps: %d builds, versions %d → %d", lazy.builds.Load(), snap.Version(), s.Current(13).Version())
	}
	// A weight change is a new membership.
	s.Update(20, []Endpoint{{Addr: "a", Weight: 5}, {Addr: "b"}, {Addr: "c"}})
	s.Snapshot().Table(lazy)
	if lazy.builds.Load() != 3 {
		t.Errorf("after a weight change: %d builds, want 3", lazy.builds.Load())
	}
}

// Update, health changes and drains race with picks, Start and Done on
// lock-free snapshots (run with -race): tables match the membership they were
// built for, every request ends on the EndpointState it started on (also on
// states removed meanwhile), so every count ends at 0, and every published
// state is picked. The interleaving does not rely on the scheduler: after
// each mutation the mutator hands its snapshot's version to every picker and
// waits until each has picked every endpoint of a snapshot at least that new,
// while the pickers keep picking through the next mutation.
func TestSetConcurrent(t *testing.T) {
	const pickers, cycles, overlap = 4, 12, 50
	s := newSet(t, SetConfig{SlowStart: 0.05})
	all := []Endpoint{{Addr: "a", Weight: 1}, {Addr: "b", Weight: 2}, {Addr: "c", Weight: 3}, {Addr: "d"}, {Addr: "e"}}
	s.Update(0, all)
	var clock atomic.Int64 // microseconds of fake time
	now := func() float64 { return float64(clock.Add(1)) / 1e6 }
	tb := &countingBuilder{}
	shared := []SetPicker{&WeightedRandom{}, &LeastRequest{}, &LeastRequest{Choices: 3, Bias: 0.5},
		&PeakEWMA{}, &SmoothWeighted{}, Loaded{&P2C{}}, Loaded{&RoundRobin{}}}
	pub := make([]chan uint64, pickers) // mutator → picker g: a published version
	ack := make(chan map[*EndpointState]bool, pickers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range pickers {
		pub[g] = make(chan uint64, 1)
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			// Its own round robin makes it cover a stable snapshot in Len picks.
			ps := append(slices.Clone(shared[g%len(shared):]), shared[:g%len(shared)]...)
			ps = append(ps, Loaded{&RoundRobin{}})
			concurrentPicker(t, s, ps, now, tb, pub[g], ack, stop, overlap)
		}(g)
	}
	published := map[*EndpointState]bool{}
	seen := map[*EndpointState]bool{}
	for k := 0; k < 6*cycles; k++ {
		mutateStep(s, now(), all, k)
		snap := s.Snapshot()
		for i := range snap.Len() {
			published[snap.Endpoint(i)] = true
		}
		for g := range pickers {
			pub[g] <- snap.Version()
		}
		for range pickers {
			maps.Copy(seen, <-ack)
		}
	}
	close(stop)
	wg.Wait()
	// a, b and c stay; each cycle removes d and e, and their return makes new states.
	if want := 3 + 2*cycles; len(published) != want {
		t.Errorf("%d endpoint states published, want %d", len(published), want)
	}
	for e := range published {
		if !seen[e] {
			t.Errorf("%s: a published state was never picked", e.Addr())
		}
	}
	for e := range seen {
		if e.InFlight() != 0 {
			t.Errorf("%s: %d in flight after all requests finished", e.Addr(), e.InFlight())
		}
	}
}

// mutateStep applies the k-th of TestSetConcurrent's six mutations in turn.
func mutateStep(s *Set, t float64, all []Endpoint, k int) {
	switch k % 6 {
	case 0:
		s.Update(t, all[:3])
	case 1:
		s.SetHealthy(t, "b", k%4 == 1)
	case 2:
		s.Eject(t, "c", t+0.001)
	case 3:
		s.Drain(t, "a", k%4 == 3)
	case 4:
		s.Update(t, all)
	case 5:
		s.State(t, "d")
	}
}

// concurrentPicker picks in a loop with the pickers ps in turn. On a version
// from pub it answers on ack, with the states it picked since, once these
// cover the current snapshot and that is at least as new; it then picks
// overlap more times, racing the next mutation, and waits for the next
// version or stop.
func concurrentPicker(t *testing.T, s *Set, ps []SetPicker, now func() float64, tb *countingBuilder,
	pub <-chan uint64, ack chan<- map[*EndpointState]bool, stop <-chan struct{}, overlap int) {
	var want uint64
	var picked map[*EndpointState]bool // since want; nil when not asked
	extra := 0
	for k := 0; ; k++ {
		if picked == nil && extra == 0 {
			select {
			case want = <-pub:
				picked = map[*EndpointState]bool{}
			case <-stop:
				return
			}
		}
		e, err := s.Pick(now(), ps[k%len(ps)])
		if err == nil {
			if picked != nil {
				picked[e] = true
			}
			e.Done(now(), 0.001*float64(1+k%5), k%7 != 0)
		}
		if k%50 == 0 {
			snap := s.Current(now())
			if v, _ := snap.Table(tb); len(v.([]string)) != snap.Len() {
				t.Error("table of another membership")
			}
		}
		switch {
		case picked != nil && covers(picked, s.Snapshot(), want):
			ack <- picked
			picked, extra = nil, overlap
		case picked == nil:
			extra--
		}
	}
}

// covers reports whether snap is at least version want and every one of its
// endpoints is in picked.
func covers(picked map[*EndpointState]bool, snap *Snapshot, want uint64) bool {
	if snap.Version() < want {
		return false
	}
	for i := range snap.Len() {
		if !picked[snap.Endpoint(i)] {
			return false
		}
	}
	return true
}

// The hook with a real table: Maglev answers are snapshot indices.
func TestSnapshotTableMaglev(t *testing.T) {
	cfg := &MaglevConfig{TableSize: 1009}
	s := newSet(t, SetConfig{Tables: []TableBuilder{cfg}})
	s.Update(0, []Endpoint{{Addr: "b:1"}, {Addr: "a:1", Weight: 2}, {Addr: "c:1"}})
	s.SetHealthy(1, "c:1", false)
	snap := s.Snapshot()
	v, err := snap.Table(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(*Maglev)
	if m.Len() != snap.Len() {
		t.Fatalf("table over %d endpoints, snapshot has %d", m.Len(), snap.Len())
	}
	for h := uint64(0); h < 2000; h += 7 {
		i := m.Lookup(h)
		if i < 0 || i >= snap.Len() || m.ID(i) != snap.Endpoint(i).Addr() || snap.Endpoint(i).Addr() == "c:1" {
			t.Fatalf("hash %d: index %d", h, i)
		}
	}
}

// A client of a Set: discovery fills it, checks change it, each request
// picks, starts and finishes.
func ExampleSet() {
	set, err := NewSet(SetConfig{SlowStart: 30})
	if err != nil {
		panic(err)
	}
	set.Update(0, []Endpoint{{Addr: "10.0.0.1:80"}, {Addr: "10.0.0.2:80"}, {Addr: "10.0.0.3:80"}})
	set.Drain(1, "10.0.0.2:80", true)       // being redeployed
	set.SetHealthy(2, "10.0.0.3:80", false) // 1 of 2 healthy: 50%, no panic

	var p LeastRequest // d = 2, default Rand
	now := 3.0
	e, err := set.Pick(now, &p)
	if err != nil {
		panic(err)
	}
	// ... send the request to e.Addr(), then:
	e.Done(now+0.012, 0.012, true)
	fmt.Println("sent to", e.Addr())

	set.SetHealthy(10, "10.0.0.3:80", true) // back: slow start from 10% of its weight
	snap := set.Current(25)
	for i := 0; i < snap.Len(); i++ {
		fmt.Println(snap.Endpoint(i).Addr(), snap.State(i), snap.Weight(i))
	}
	// Output:
	// sent to 10.0.0.1:80
	// 10.0.0.1:80 healthy 1
	// 10.0.0.3:80 slow-starting 0.5
}

// Members lists every endpoint with its state, eligible or not, in the
// order of the last Update.
func TestMembers(t *testing.T) {
	s := newSet(t, SetConfig{})
	s.Update(0, endpoints("a", "b", "c", "d"))
	s.Drain(1, "b", true)
	s.SetHealthy(1, "c", false)
	s.Eject(1, "d", 10)
	got := s.Members(2)
	want := []struct {
		addr  string
		state State
	}{{"a", Healthy}, {"b", Draining}, {"c", Unhealthy}, {"d", Ejected}}
	if len(got) != len(want) {
		t.Fatalf("%d members, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Addr() != w.addr || got[i].State != w.state {
			t.Errorf("member %d: %s %v, want %s %v", i, got[i].Addr(), got[i].State, w.addr, w.state)
		}
	}
	if st := s.Members(11)[3].State; st != Healthy {
		t.Errorf("d after its ejection ended: %v", st)
	}
}
